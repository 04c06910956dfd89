// CuTeDSL's entries: an exported host object (host machine code) that NVIDIA's CuTeDSL runtime
// loads (runtime.hpp) and whose exported entry computes its grid and launches; compiled by the
// Python module's compiler in worker processes.
#include "languages/cutedsl/entry_kind.hpp"

#include "languages/cutedsl/packer.hpp"

#include <map>
#include <mutex>

#include "languages/cutedsl/runtime.hpp"
#include "languages/record_json.hpp"
#include "zerojit/compiler.hpp"

namespace zerojit::languages {
namespace {

// The export ABI zerojit fills argument structs for (python/zerojit's compile worker checks the
// exported header against it before an entry is made).
constexpr std::string_view kExportAbi = "cute-dsl-export-c-1";
constexpr std::string_view kVersionPrefix = "cutedsl-";

void check_agreement(const CompiledArtifact& artifact) {
  constexpr std::string_view what = "the launch record";
  const OrderedJson record = parse_record_object(artifact.launch_record, what);
  require_only(record, {"prefix", "dsl_version", "abi"}, what);
  const std::string prefix = string_field(record, "prefix", what);
  const std::string version = string_field(record, "dsl_version", what);
  const std::string abi = string_field(record, "abi", what);
  const OrderedJson request = parse_record_object(artifact.compile_request, "the compile request");
  const auto requested = request.find("prefix");
  if (requested == request.end() || !requested->is_string() || *requested != prefix) {
    throw RecordProblem("the launch record's export prefix \"" + prefix +
                        "\" is not the one the compile request asked for");
  }
  if (std::string(kVersionPrefix) + version != artifact.compiler_version) {
    throw RecordProblem("the launch record says CuTeDSL " + version + " where the entry's " +
                        "compiler is " + artifact.compiler_version);
  }
  if (abi != kExportAbi) {
    throw RecordProblem("the launch record's export ABI is \"" + abi + "\"; zerojit fills \"" +
                        std::string(kExportAbi) + "\"");
  }
  if (artifact.lowered_names.size() != 1 || artifact.lowered_names.front().lowered != prefix) {
    throw RecordProblem("the export prefix \"" + prefix + "\" is not the entry the image loads");
  }
}

std::string check_record(const CompiledArtifact& artifact) {
  try {
    check_agreement(artifact);
    return {};
  } catch (const RecordProblem& problem) {
    return problem.what();
  }
}

std::string describe_launch(const CompiledArtifact& artifact) {
  const OrderedJson record = parse_record_object(artifact.launch_record, "the launch record");
  return "exported host entry " + string_field(record, "prefix", "the launch record") +
         " (host code, export ABI " + string_field(record, "abi", "the launch record") + ")";
}

// One CuTeDSL module per identity for the process, shared by the devices: the runtime loads
// the object's CUDA library when the module is made and the CUDA module when an entry is
// resolved, with the caller's (the backend's) device context current.
class CuteDslHostRuntime final : public HostObjectRuntime {
 public:
  void* load(const CompiledArtifact& artifact, std::string_view entry) override {
    const cutedsl::RuntimeApi& runtime = cutedsl::runtime();
    const std::string what = "kernel " + artifact.kernel_name + " [" + artifact.key_text + "]";
    std::lock_guard lock(mutex_);
    void*& module = modules_[artifact.identity];
    if (module == nullptr) {
      cutedsl::check(runtime.create_module(
                         &module, reinterpret_cast<const unsigned char*>(artifact.cubin.data()),
                         artifact.cubin.size(), nullptr, 0),
                     "loading the host object of " + what);
    }
    void* function = nullptr;
    const std::string prefix(entry);
    cutedsl::check(runtime.get_function(&function, module, prefix.c_str()),
                   "resolving " + prefix + " of " + what);
    return function;
  }

  void run(void* entry, void** args, std::size_t count) const override {
    cutedsl::check(cutedsl::runtime().run(entry, args, count), "CuteDSLRT_Function_Run");
  }

  void set_library(std::string path) override { cutedsl::set_runtime_library(std::move(path)); }
  std::string library() const override { return cutedsl::runtime_library(); }

 private:
  std::mutex mutex_;
  std::map<ProgramIdentity, void*> modules_;  // loaded for the life of the process
};

HostObjectRuntime* host_runtime() {
  static auto* runtime = new CuteDslHostRuntime();  // used by launches until exit
  return runtime;
}

}  // namespace

const EntryKind& cutedsl_entry_kind() {
  static const EntryKind kind{
      .language = Language::cutedsl,
      .name = "cutedsl",
      .compiler = "CuTeDSL",
      .compiled_by_nvrtc = false,
      .holds_host_code = true,
      .image = ImageForm::host_object,
      .launch = LaunchForm::host_entry,
      .host_runtime = &host_runtime,
      .check_record = &check_record,
      .describe_launch = &describe_launch,
      .adopt_record = nullptr,
      .make_packer = &make_cutedsl_packer,
  };
  return kind;
}

}  // namespace zerojit::languages
