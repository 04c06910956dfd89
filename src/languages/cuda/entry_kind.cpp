// CUDA C++ entries: cubins NVRTC compiled in the core; the kernel's plan owns the launch, so an
// entry carries no launch record and no compile request.
#include "languages/cuda/entry_kind.hpp"

#include "languages/cuda/packer.hpp"

#include "zerojit/compiler.hpp"

namespace zerojit::languages {
namespace {

std::string check_record(const CompiledArtifact& artifact) {
  if (!artifact.launch_record.empty()) {
    return "a CUDA C++ entry carries a launch record (" +
           std::to_string(artifact.launch_record.size()) +
           " bytes), which only other languages' "
           "entries have";
  }
  if (!artifact.compile_request.empty()) {
    return "a CUDA C++ entry carries a compile request, which only other languages' entries have";
  }
  return {};
}

std::string describe_launch(const CompiledArtifact&) {
  return "the plan's geometry (no launch record)";
}

}  // namespace

const EntryKind& cuda_entry_kind() {
  static const EntryKind kind{
      .language = Language::cuda,
      .name = "cuda",
      .compiler = "NVRTC",
      .compiled_by_nvrtc = true,
      .holds_host_code = false,
      .image = ImageForm::cubin,
      .launch = LaunchForm::plan,
      .host_runtime = nullptr,
      .check_record = &check_record,
      .describe_launch = &describe_launch,
      .adopt_record = nullptr,
      .make_packer = &make_cuda_packer,
  };
  return kind;
}

}  // namespace zerojit::languages
