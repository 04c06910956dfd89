#include "languages/triton/launch_record.hpp"

#include "languages/record_json.hpp"
#include "zerojit/backend.hpp"
#include "zerojit/error.hpp"
#include "zerojit/launch.hpp"

namespace zerojit::languages {
namespace {

constexpr std::string_view kWhat = "the launch record";

// Launch limits of every CUDA GPU zerojit targets (sm_90, sm_100): a record outside them is
// damaged or from a compiler zerojit does not understand, and is never launched.
constexpr std::int64_t kMaxBlockThreads = 1024;
constexpr std::int64_t kMaxSharedBytes = 227 * 1024;  // the opt-in maximum a block
constexpr std::int64_t kMaxClusterCtas = 16;
constexpr std::int64_t kMaxScratchPointers = 2;
constexpr std::int64_t kMaxEntryNameBytes = 4096;

std::vector<std::string> parameter_types(const OrderedJson& json) {
  const auto found = json.find("params");
  if (found == json.end() || !found->is_array()) {
    throw RecordProblem(std::string(kWhat) + ": \"params\" is missing or not a list");
  }
  if (found->size() > static_cast<std::size_t>(kMaxKernelParams)) {
    throw RecordProblem(std::string(kWhat) + " lists " + std::to_string(found->size()) +
                        " parameters; zerojit launches at most " +
                        std::to_string(kMaxKernelParams));
  }
  std::vector<std::string> types;
  for (const OrderedJson& type : *found) {
    if (!type.is_string() || triton_param_bytes(type.get<std::string>()) == 0) {
      throw RecordProblem(std::string(kWhat) + ": parameter type " + type.dump() +
                          " cannot be launched by zerojit");
    }
    types.push_back(type.get<std::string>());
  }
  return types;
}

}  // namespace

LaunchRecord read_launch_record(std::string_view text) {
  const OrderedJson json = parse_record_object(text, kWhat);
  require_only(json,
               {"entry", "block_threads", "shared_bytes", "cluster_ctas",
                "programmatic_serialization", "cooperative", "params", "scratch_pointers",
                "global_scratch_bytes", "profile_scratch_bytes", "tensor_descriptors"},
               kWhat);
  LaunchRecord record;
  record.entry = string_field(json, "entry", kWhat);
  if (record.entry.empty() || record.entry.size() > kMaxEntryNameBytes) {
    throw RecordProblem(std::string(kWhat) + " names no entry symbol of a sane length");
  }
  record.block_threads =
      static_cast<std::uint32_t>(integer_field(json, "block_threads", 32, kMaxBlockThreads, kWhat));
  if (record.block_threads % 32 != 0) {
    throw RecordProblem(std::string(kWhat) + ": block_threads " +
                        std::to_string(record.block_threads) + " is not a whole number of warps");
  }
  record.shared_bytes =
      static_cast<std::uint32_t>(integer_field(json, "shared_bytes", 0, kMaxSharedBytes, kWhat));
  record.cluster_ctas =
      static_cast<std::uint32_t>(integer_field(json, "cluster_ctas", 1, kMaxClusterCtas, kWhat));
  record.programmatic_serialization = bool_field(json, "programmatic_serialization", kWhat);
  record.cooperative = bool_field(json, "cooperative", kWhat);
  record.params = parameter_types(json);
  record.scratch_pointers = static_cast<std::uint32_t>(
      integer_field(json, "scratch_pointers", 0, kMaxScratchPointers, kWhat));
  if (record.params.size() + record.scratch_pointers > static_cast<std::size_t>(kMaxKernelParams)) {
    throw RecordProblem(std::string(kWhat) + ": " + std::to_string(record.params.size()) +
                        " parameters and scratch pointers; zerojit launches at most " +
                        std::to_string(kMaxKernelParams));
  }
  // Kernels that need these are refused when they compile (the worker says why): a record
  // that asks for them was not written by zerojit.
  record.global_scratch_bytes =
      static_cast<std::uint64_t>(integer_field(json, "global_scratch_bytes", 0, 0, kWhat));
  record.profile_scratch_bytes =
      static_cast<std::uint64_t>(integer_field(json, "profile_scratch_bytes", 0, 0, kWhat));
  record.tensor_descriptors =
      static_cast<std::uint32_t>(integer_field(json, "tensor_descriptors", 0, 0, kWhat));
  return record;
}

std::uint32_t triton_param_bytes(std::string_view type) {
  if (type.size() > 1 && type.starts_with('*')) return 8;
  if (type == "i1" || type == "u1" || type == "i8" || type == "u8") return 1;
  if (type == "i16" || type == "u16" || type == "fp16" || type == "bf16") return 2;
  if (type == "i32" || type == "u32" || type == "fp32") return 4;
  if (type == "i64" || type == "u64" || type == "fp64") return 8;
  return 0;
}

std::string encode_launch_record(const LaunchRecord& record) {
  const OrderedJson json = {
      {"entry", record.entry},
      {"block_threads", record.block_threads},
      {"shared_bytes", record.shared_bytes},
      {"cluster_ctas", record.cluster_ctas},
      {"programmatic_serialization", record.programmatic_serialization},
      {"cooperative", record.cooperative},
      {"params", record.params},
      {"scratch_pointers", record.scratch_pointers},
      {"global_scratch_bytes", record.global_scratch_bytes},
      {"profile_scratch_bytes", record.profile_scratch_bytes},
      {"tensor_descriptors", record.tensor_descriptors},
  };
  return json.dump();
}

LaunchRecord decode_launch_record(std::string_view json, std::string_view kernel) {
  try {
    return read_launch_record(json);
  } catch (const RecordProblem& problem) {
    throw Error("kernel " + std::string(kernel) + ": " + problem.what());
  }
}

void adopt_launch_record(const LaunchRecord& record, LoadedFunction& function) {
  function.block_threads = record.block_threads;
  function.shared_bytes = record.shared_bytes;
  function.grid_x_multiplier = record.cluster_ctas;
  function.trailing_null_pointers = record.scratch_pointers;
  function.attributes = {};
  function.attributes.programmatic_serialization = record.programmatic_serialization;
  function.attributes.cooperative = record.cooperative;
  if (record.cluster_ctas != 1) {
    function.attributes.cluster = {record.cluster_ctas, 1, 1};
    function.attributes.cluster_spread = true;
  }
}

}  // namespace zerojit::languages
