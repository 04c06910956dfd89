// Triton's entries: a cubin with the launch record its compiler fixed (launch_record.hpp),
// compiled by the Python module's compiler in worker processes.
#include "languages/triton/entry_kind.hpp"

#include "languages/triton/packer.hpp"

#include "languages/record_json.hpp"
#include "languages/triton/launch_record.hpp"
#include "zerojit/backend.hpp"
#include "zerojit/compiler.hpp"

namespace zerojit::languages {
namespace {

constexpr std::string_view kRequest = "the compile request";

std::string listed(const std::vector<std::string>& types) {
  std::string out;
  for (const std::string& type : types) out += (out.empty() ? "" : ", ") + type;
  return "(" + out + ")";
}

// The parameters the request's signature leaves after constexpr removal, in order: what the
// record must list.
std::vector<std::string> runtime_parameter_types(const OrderedJson& request) {
  const auto signature = request.find("signature");
  if (signature == request.end() || !signature->is_object()) {
    throw RecordProblem(std::string(kRequest) + " has no signature");
  }
  std::vector<std::string> types;
  for (const auto& [name, type] : signature->items()) {
    if (!type.is_string())
      throw RecordProblem(std::string(kRequest) + ": '" + name + "' is untyped");
    if (type.get<std::string>() != "constexpr") types.push_back(type.get<std::string>());
  }
  return types;
}

// An option of the request, or its default when the request leaves it out.
template <class T>
T option(const OrderedJson& request, const char* name, T fallback) {
  const auto options = request.find("options");
  if (options == request.end() || !options->is_object()) return fallback;
  const auto found = options->find(name);
  if (found == options->end()) return fallback;
  if constexpr (std::is_same_v<T, bool>) {
    if (!found->is_boolean())
      throw RecordProblem(std::string(kRequest) + ": " + name + " is no bool");
  } else {
    if (!found->is_number_integer()) {
      throw RecordProblem(std::string(kRequest) + ": " + name + " is no whole number");
    }
  }
  return found->get<T>();
}

void check_agreement(const LaunchRecord& record, const CompiledArtifact& artifact) {
  const OrderedJson request = parse_record_object(artifact.compile_request, kRequest);
  const std::vector<std::string> expected = runtime_parameter_types(request);
  if (record.params != expected) {
    throw RecordProblem("the launch record lists " + std::to_string(record.params.size()) +
                        " parameters " + listed(record.params) +
                        " where the compile request's signature has " +
                        std::to_string(expected.size()) + " " + listed(expected));
  }
  const auto flag = [&](const char* field, bool recorded, const char* name) {
    const bool requested = option(request, name, false);
    if (recorded != requested) {
      throw RecordProblem(std::string("the launch record says ") + field + "=" +
                          (recorded ? "true" : "false") + " where the compile request's " + name +
                          " is " + (requested ? "true" : "false"));
    }
  };
  flag("programmatic_serialization", record.programmatic_serialization, "launch_pdl");
  flag("cooperative", record.cooperative, "launch_cooperative_grid");
  const auto ctas = option<std::int64_t>(request, "num_ctas", 1);
  if (record.cluster_ctas != ctas) {
    throw RecordProblem(
        "the launch record says cluster_ctas=" + std::to_string(record.cluster_ctas) +
        " where the compile request's num_ctas is " + std::to_string(ctas));
  }
  if (artifact.lowered_names.size() != 1 ||
      artifact.lowered_names.front().lowered != record.entry) {
    throw RecordProblem("the launch record's entry \"" + record.entry +
                        "\" is not the symbol the entry loads");
  }
  // Triton 3.5 and 3.6, the versions zerojit launches, append two scratch pointers.
  if (record.scratch_pointers != 2) {
    throw RecordProblem("the launch record says " + std::to_string(record.scratch_pointers) +
                        " scratch pointers where Triton appends 2");
  }
}

std::string check_record(const CompiledArtifact& artifact) {
  try {
    check_agreement(read_launch_record(artifact.launch_record), artifact);
    return {};
  } catch (const RecordProblem& problem) {
    return problem.what();
  }
}

std::string describe_launch(const CompiledArtifact& artifact) {
  const LaunchRecord record = read_launch_record(artifact.launch_record);
  std::string params;
  for (const std::string& type : record.params) params += " " + type;
  return "block " + std::to_string(record.block_threads) + ", shared " +
         std::to_string(record.shared_bytes) + " B" +
         (record.cluster_ctas != 1 ? ", cluster " + std::to_string(record.cluster_ctas) : "") +
         (record.programmatic_serialization ? ", PDL" : "") +
         (record.cooperative ? ", cooperative" : "") + ", params" + params + " + " +
         std::to_string(record.scratch_pointers) + " scratch";
}

void adopt_record(const CompiledArtifact& artifact, LoadedFunction& function) {
  adopt_launch_record(decode_launch_record(artifact.launch_record, artifact.kernel_name), function);
}

}  // namespace

const EntryKind& triton_entry_kind() {
  static const EntryKind kind{
      .language = Language::triton,
      .name = "triton",
      .compiler = "Triton",
      .compiled_by_nvrtc = false,
      .holds_host_code = false,
      .image = ImageForm::cubin,
      .launch = LaunchForm::recorded,
      .host_runtime = nullptr,
      .check_record = &check_record,
      .describe_launch = &describe_launch,
      .adopt_record = &adopt_record,
      .make_packer = &make_triton_packer,
  };
  return kind;
}

}  // namespace zerojit::languages
