// What a kernel's bandwidth cases are made of (bench/dsv4/<kernel>.cpp builds them; the
// harness in bench/kernels/ times, checks and reports them): a case is one kernel at one size,
// its input sets in device memory, one launch per set, and the bytes it must move.
//
// A kernel's file registers its cases with a static registrar, compiled into the executable
// (bench/CMakeLists.txt globs bench/dsv4/*.cpp), so a new kernel adds one file:
//
//   const CaseRegistrar kRegistrar{{.kernel = "dcp_pack", .make = dcp_case}};
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "dsv4/compressor/reference.hpp"
#include "dsv4/support/inputs.hpp"
#include "kernels/device_set.hpp"
#include "kernels/timing.hpp"

namespace zerojit::bench {

namespace in = zerojit::dsv4::testing;
namespace ref = zerojit::dsv4::reference;
namespace params = zj::dsv4;

// DSv4-Flash shapes (spec 0.1).
inline constexpr std::int64_t kIndexHeads = 64;
inline constexpr std::int64_t kIndexHeadDim = 128;
inline constexpr std::int64_t kRopeDim = 64;
inline constexpr std::int64_t kHeadSize = 512;
inline constexpr std::int64_t kCosSinRowBytes = kRopeDim * 4;  // one f32 cos/sin row
inline constexpr std::int64_t kDsMlaRowBytes = 584;            // 576 data + 8 scale bytes
inline constexpr std::int64_t kFullBf16RowBytes = kHeadSize * 2;
inline constexpr std::int64_t kNormWeightBytes = kHeadSize * 2;  // bf16

// Rotation: inputs are copied until the copies together move this many times the L2's bytes,
// at most kMaxInputSets copies and kMaxSetBytes of device memory per case.
inline constexpr std::int64_t kColdFootprintInL2s = 4;
inline constexpr int kMaxInputSets = 16;
inline constexpr std::int64_t kMaxSetBytes = std::int64_t{16} << 30;

// The indexer-Q inputs both variants take (FP8 and MXFP4 args alike), uploaded to `set`.
template <class IndexerQArgs>
void put_indexer_q_inputs(DeviceSet& set, const in::IndexerQInputsHost& host, IndexerQArgs& a) {
  a.positions = set.put(host.positions);
  a.q = set.put(host.q);
  a.cos_sin_cache = set.put(host.cos_sin_cache);
  a.weights = set.put(host.weights);
  a.scale = host.scale;
}

struct Case {
  std::string kernel;
  std::string size;
  std::int64_t tokens = 0;          // tokens of the call (gathered rows for dequant_gather)
  std::int64_t active_tokens = -1;  // compressors: tokens that write a row
  std::int64_t bytes = 0;
  std::string formula;
  std::int64_t written_bytes = 0;  // what the outputs must receive
  // A gather of 4-byte values still moves whole 32-byte DRAM sectors: where that makes the
  // memory's share larger than `bytes`, the bytes at sector granularity (else 0).
  std::int64_t sector_bytes = 0;
  std::vector<DeviceSet> sets;
  std::vector<Launch> launches;  // launches[i] runs on sets[i]
};

struct Context {
  std::int64_t l2_bytes = 50 << 20;
  // No GPU: host memory stands in for device memory, and each case runs its kernel's plan
  // (argument validation) and CPU reference once instead of timed launches.
  bool dry_run = false;
  std::string compile_arch;  // dry run: compile each planned key for this arch (NVRTC)
  // Tuning: launch with this grid.x instead of the plan's (0: the plan's), for the kernels
  // that are correct at any grid and honour it (c128_compress, c4_store, c4_store_full;
  // dequant_gather takes it as grid.y, its workers per request).
  std::int64_t grid_x = 0;
};

// One kernel's cases: its name (in --kernels and the records; "c4_store" is the family's kernel
// "dsv4.c4_store"), the sizes it has, and the builder of one case.
struct KernelCases {
  std::string kernel;
  // The sizes of docs/BENCHMARKS.md: `small` is a decode step (a few dozen tokens), `serving`
  // the default max_num_batched_tokens (8192 tokens), `large` a prefill big enough to move
  // several times the L2 cache. A kernel may add sizes of its own.
  std::vector<std::string> sizes = {"small", "serving", "large"};
  std::function<Case(const std::string& size, const Context& context)> make;
};

// Registers a kernel's cases during static initialization.
class CaseRegistrar {
 public:
  explicit CaseRegistrar(KernelCases cases);
};

// Every registered kernel, in the order of the DSv4 family table (dsv4::all_kernels()); a
// kernel outside the family after those, by name.
std::vector<KernelCases> registered_kernels();

int input_sets_for(const Context& context, std::int64_t bytes, std::int64_t allocated);

// What a dry run does with one input set.
struct Emulation {
  bool reference = false;    // run the CPU reference (the first set)
  std::string compile_arch;  // also compile the planned key for this arch (empty: do not)
};

// Uploads the first input set with make(set) -> Args, copies it as many times as the case's
// bytes ask for, and makes one launch per set: run(args, stream) launches the kernel. In a dry
// run, emulate(args, emulation) validates the arguments with the kernel's plan and, for the
// first set, compiles the planned key and runs the CPU reference on the planned argument block.
template <class MakeArgs, class Run, class Emulate>
void add_input_sets(Case& c, const Context& context, MakeArgs make, Run run, Emulate emulate) {
  c.sets.emplace_back(context.dry_run);
  std::vector<decltype(make(c.sets.front()))> args;
  args.push_back(make(c.sets.front()));
  // A dry run needs one replica to check that the copies plan like the original.
  const int count = std::min(context.dry_run ? 2 : kMaxInputSets,
                             input_sets_for(context, c.bytes, c.sets.front().allocated_bytes()));
  for (int i = 1; i < count; ++i) c.sets.push_back(c.sets.front().replicate());
  for (std::size_t i = 1; i < c.sets.size(); ++i) args.push_back(make(c.sets[i]));
  // The uploads and copies ran on the legacy stream and may still be in flight (a pageable
  // upload returns once staged; a device copy does not wait): the timing stream, created
  // non-blocking, would not wait for them.
  if (!context.dry_run) cuda::check(cuda::driver().cuCtxSynchronize(), "cuCtxSynchronize");
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (context.dry_run) {
      Emulation emulation;
      emulation.reference = i == 0;
      if (i == 0) emulation.compile_arch = context.compile_arch;
      c.launches.push_back(
          [a = args[i], emulate, emulation](cuda::Stream) { emulate(a, emulation); });
    } else {
      c.launches.push_back([a = args[i], run](cuda::Stream stream) { run(a, stream); });
    }
  }
}

// The argument block a plan packed (each DSv4 kernel takes exactly one).
template <class Params, class Spec>
Params unpack(const Spec& spec) {
  if (spec.args.count() != 1 || spec.args.size(0) != sizeof(Params)) {
    throw std::logic_error("the plan did not pack one argument block of the expected size");
  }
  Params params;
  std::memcpy(&params, spec.args.data(0), sizeof params);
  return params;
}

// The dry run's part of one launch, given its plan's spec: compile the planned key when asked,
// then (first set only) run `reference(block, key)` on the argument block the plan packed.
template <class Params, class Kernel, class Spec, class Reference>
void emulate_planned(Kernel& kernel, const Spec& spec, const Emulation& emulation,
                     Reference reference) {
  if (!emulation.compile_arch.empty()) kernel.compile(spec.key, emulation.compile_arch);
  if (emulation.reference) reference(unpack<Params>(spec), spec.key);
}

// Which grid dimension a kernel's --grid-x replaces (dequant-gather's workers are grid.y).
enum class TunedAxis { x, y };

// Launches Kernel on `args` as a caller would, or, when `grid` is positive (tuning), with the
// plan's grid.x (grid.y) replaced by it: for the kernels that are correct at any grid.
template <class Kernel, class Args>
void launch_with_grid(const Args& args, cuda::Stream stream, std::int64_t grid,
                      TunedAxis axis = TunedAxis::x) {
  auto& kernel = Kernel::instance();
  if (grid <= 0) {
    kernel(args, stream);
    return;
  }
  auto spec = kernel.launch_spec(args);
  (axis == TunedAxis::x ? spec.geometry.grid.x : spec.geometry.grid.y) =
      static_cast<std::uint32_t>(grid);
  kernel.launch(spec, LaunchTarget{spec.device, stream});
}

// run(args, stream) of the compressor cases whose kernel is a plain / full-row pair.
template <class Plain, class Full, class Args>
auto run_plain_or_full(bool full, std::int64_t grid_x = 0) {
  return [full, grid_x](const Args& args, cuda::Stream stream) {
    if (full) {
      launch_with_grid<Full>(args, stream, grid_x);
    } else {
      launch_with_grid<Plain>(args, stream, grid_x);
    }
  };
}

// The seed of a case's inputs: a function of kernel and size, so that runs compare.
std::uint64_t seed_of(std::string_view kernel, std::string_view size);

// Tokens of a call and, for prefill, its chunk length (0 = decode: one token per request).
struct TokenSize {
  std::int64_t tokens;
  std::int64_t chunk;
};

}  // namespace zerojit::bench
