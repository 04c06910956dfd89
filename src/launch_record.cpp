#include "zerojit/launch_record.hpp"

#include <nlohmann/json.hpp>

#include "zerojit/backend.hpp"
#include "zerojit/error.hpp"
#include "zerojit/launch.hpp"

namespace zerojit {

namespace {

using Json = nlohmann::json;

// Launch limits of every CUDA GPU zerojit targets: a record outside them is damaged or from a
// compiler zerojit does not understand, and is refused before anything is launched with it.
constexpr std::uint32_t kMaxBlockThreads = 1024;
constexpr std::uint32_t kMaxClusterCtas = 16;
constexpr std::uint32_t kMaxScratchPointers = 2;

template <class T>
T field(const Json& object, const char* name, std::string_view kernel) {
  const auto found = object.find(name);
  if (found == object.end()) {
    throw Error("kernel " + std::string(kernel) + ": launch record has no \"" + name + "\"");
  }
  try {
    return found->get<T>();
  } catch (const Json::exception&) {
    throw Error("kernel " + std::string(kernel) + ": launch record field \"" + name +
                "\" has the wrong type");
  }
}

}  // namespace

std::uint32_t triton_param_bytes(std::string_view type) {
  if (type.starts_with('*')) return 8;
  if (type == "i1" || type == "u1" || type == "i8" || type == "u8") return 1;
  if (type == "i16" || type == "u16" || type == "fp16" || type == "bf16") return 2;
  if (type == "i32" || type == "u32" || type == "fp32") return 4;
  if (type == "i64" || type == "u64" || type == "fp64") return 8;
  return 0;
}

std::string encode_launch_record(const LaunchRecord& record) {
  const Json json = {
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

LaunchRecord decode_launch_record(std::string_view text, std::string_view kernel) {
  const std::string where = "kernel " + std::string(kernel) + ": launch record";
  Json json;
  try {
    json = Json::parse(text);
  } catch (const Json::exception&) {
    throw Error(where + " is not JSON");
  }
  if (!json.is_object()) throw Error(where + " is not a JSON object");
  LaunchRecord record;
  record.entry = field<std::string>(json, "entry", kernel);
  record.block_threads = field<std::uint32_t>(json, "block_threads", kernel);
  record.shared_bytes = field<std::uint32_t>(json, "shared_bytes", kernel);
  record.cluster_ctas = field<std::uint32_t>(json, "cluster_ctas", kernel);
  record.programmatic_serialization = field<bool>(json, "programmatic_serialization", kernel);
  record.cooperative = field<bool>(json, "cooperative", kernel);
  record.params = field<std::vector<std::string>>(json, "params", kernel);
  record.scratch_pointers = field<std::uint32_t>(json, "scratch_pointers", kernel);
  record.global_scratch_bytes = field<std::uint64_t>(json, "global_scratch_bytes", kernel);
  record.profile_scratch_bytes = field<std::uint64_t>(json, "profile_scratch_bytes", kernel);
  record.tensor_descriptors = field<std::uint32_t>(json, "tensor_descriptors", kernel);

  if (record.entry.empty()) throw Error(where + " names no entry symbol");
  if (record.block_threads == 0 || record.block_threads > kMaxBlockThreads ||
      record.block_threads % 32 != 0) {
    throw Error(where + ": block_threads " + std::to_string(record.block_threads) +
                " is not a whole number of warps up to " + std::to_string(kMaxBlockThreads));
  }
  if (record.cluster_ctas == 0 || record.cluster_ctas > kMaxClusterCtas) {
    throw Error(where + ": cluster_ctas " + std::to_string(record.cluster_ctas) +
                " is outside 1.." + std::to_string(kMaxClusterCtas));
  }
  if (record.scratch_pointers > kMaxScratchPointers) {
    throw Error(where + ": " + std::to_string(record.scratch_pointers) + " scratch pointers");
  }
  if (record.params.size() + record.scratch_pointers > static_cast<std::size_t>(kMaxKernelParams)) {
    throw Error(where + ": " + std::to_string(record.params.size()) +
                " parameters; zerojit launches at most " + std::to_string(kMaxKernelParams));
  }
  for (const std::string& type : record.params) {
    if (triton_param_bytes(type) == 0) {
      throw Error(where + ": parameter type \"" + type + "\" cannot be launched by zerojit");
    }
  }
  return record;
}

void adopt_launch_record(const LaunchRecord& record, std::string_view kernel,
                         LoadedFunction& function) {
  const std::string where = "kernel " + std::string(kernel) + ": ";
  if (record.global_scratch_bytes != 0 || record.profile_scratch_bytes != 0) {
    throw Error(where + "the compiled kernel needs " + std::to_string(record.global_scratch_bytes) +
                " bytes of global scratch a program, which zerojit does not allocate yet");
  }
  if (record.tensor_descriptors != 0) {
    throw Error(where +
                "the compiled kernel takes host TMA descriptors, which zerojit does not "
                "build yet");
  }
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

}  // namespace zerojit
