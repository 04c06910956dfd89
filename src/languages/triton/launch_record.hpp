// How a Triton kernel must be launched, as its compiler fixed it. A CUDA C++ kernel's plan owns
// its whole launch; a Triton kernel's compiler decides the block size (its final num_warps), the
// dynamic shared memory, the cluster and whether the kernel was built for programmatic dependent
// launch, and appends parameters of its own. The record travels with the cubin in every tier
// (it is part of the cache entry), so a process that serves a pack needs no Triton to launch it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace zerojit {
struct LoadedFunction;
}

namespace zerojit::languages {

struct LaunchRecord {
  std::string entry;                // the kernel's symbol in the image
  std::uint32_t block_threads = 0;  // 32 * the final num_warps
  std::uint32_t shared_bytes = 0;   // dynamic shared memory of every launch
  std::uint32_t cluster_ctas = 1;   // num_ctas: grid.x is multiplied by it, cluster (n, 1, 1)
  bool programmatic_serialization = false;  // built for PDL (launch_pdl)
  bool cooperative = false;                 // launch_cooperative_grid
  // The parameters after constexpr removal, in order, as Triton types them ("*fp32", "i32",
  // "fp16", ...); the launch packs exactly these, then `scratch_pointers` null pointers.
  std::vector<std::string> params;
  std::uint32_t scratch_pointers = 0;  // Triton's global and profile scratch parameters
  std::uint64_t global_scratch_bytes = 0;
  std::uint64_t profile_scratch_bytes = 0;
  std::uint32_t tensor_descriptors = 0;  // host TMA descriptors among the parameters

  bool operator==(const LaunchRecord&) const = default;
};

// The record as the JSON object a cache entry stores.
std::string encode_launch_record(const LaunchRecord& record);
// Parses a stored record with bounds (record_json.hpp) and checks every field in its domain,
// including what zerojit can launch (no global scratch, no host TMA descriptors); throws
// RecordProblem saying what is wrong.
LaunchRecord read_launch_record(std::string_view json);
// read_launch_record, throwing zerojit::Error naming `kernel` instead.
LaunchRecord decode_launch_record(std::string_view json, std::string_view kernel);

// Sets what the record fixes on a function just loaded: its block, dynamic shared memory, grid
// multiplier (the cluster size), trailing null pointers and launch attributes. Touches no
// driver.
void adopt_launch_record(const LaunchRecord& record, LoadedFunction& function);

// The bytes a Triton parameter type occupies in the kernel's parameter buffer (pointers 8,
// "i32" 4, "fp16" 2, ...); 0 for a type zerojit cannot pack.
std::uint32_t triton_param_bytes(std::string_view type);

}  // namespace zerojit::languages
