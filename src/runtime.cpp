#include "zerojit/runtime.hpp"

#include <sys/stat.h>

#include <algorithm>

#include "zerojit/compiler.hpp"
#include "zerojit/disk_cache.hpp"

namespace zerojit {
namespace {

// Identifies the NVRTC library file by what changes when it is replaced, without reading it.
std::string library_fingerprint(const std::string& path) {
  struct stat info {};
  if (path.empty() || stat(path.c_str(), &info) != 0) return {};
  return "nvrtc:" + std::to_string(info.st_dev) + ":" + std::to_string(info.st_ino) + ":" +
         std::to_string(info.st_size) + ":" + std::to_string(info.st_mtim.tv_sec) + "." +
         std::to_string(info.st_mtim.tv_nsec);
}

}  // namespace

Runtime& Runtime::instance() {
  static Runtime runtime;
  return runtime;
}

// The disk cache is installed from the start (ZEROJIT_CACHE_DIR=off leaves memory only); it
// touches the disk only when first used.
Runtime::Runtime() : store_(make_default_artifact_store()) { set_backend(make_cuda_backend()); }

void Runtime::set_backend(std::shared_ptr<Backend> backend) {
  std::lock_guard lock(mutex_);
  backends_.push_back(backend);
  target_archs_.clear();
  backend_.store(backend.get(), std::memory_order_release);
}

std::shared_ptr<ArtifactStore> Runtime::artifact_store() const {
  std::lock_guard lock(mutex_);
  return store_;
}

void Runtime::set_artifact_store(std::shared_ptr<ArtifactStore> store) {
  std::lock_guard lock(mutex_);
  store_ = std::move(store);
}

std::string Runtime::nvrtc_version() {
  std::lock_guard lock(mutex_);
  if (!nvrtc_version_.empty()) return nvrtc_version_;
  if (nvrtc_loaded()) {
    nvrtc_version_ = zerojit::nvrtc_version();
    return nvrtc_version_;
  }
  const std::string fingerprint = library_fingerprint(nvrtc_library_path());
  if (store_ && !fingerprint.empty()) {
    if (auto remembered = store_->recall_nvrtc_version(fingerprint)) {
      nvrtc_version_ = *remembered;
      return nvrtc_version_;
    }
  }
  nvrtc_version_ = zerojit::nvrtc_version();  // loads NVRTC; throws UnavailableError without it
  if (store_ && !fingerprint.empty()) store_->remember_nvrtc_version(fingerprint, nvrtc_version_);
  return nvrtc_version_;
}

CompileExecutor* Runtime::compile_executor() const {
  std::lock_guard lock(mutex_);
  return compile_executors_.empty() ? nullptr : compile_executors_.back();
}

CompiledArtifact Runtime::compile(const Program& program, std::string_view arch,
                                  const ProgramIdentity& identity) {
  return compile_program(program, arch, identity, compile_executor());
}

Runtime::CompileExecutorInstallation::CompileExecutorInstallation(CompileExecutor& executor)
    : executor_(&executor) {
  Runtime& runtime = Runtime::instance();
  std::lock_guard lock(runtime.mutex_);
  runtime.compile_executors_.push_back(executor_);
}

Runtime::CompileExecutorInstallation::~CompileExecutorInstallation() {
  Runtime& runtime = Runtime::instance();
  std::lock_guard lock(runtime.mutex_);
  std::erase(runtime.compile_executors_, executor_);
}

std::string Runtime::target_arch(int device) {
  {
    std::lock_guard lock(mutex_);
    if (device >= 0 && static_cast<std::size_t>(device) < target_archs_.size() &&
        !target_archs_[static_cast<std::size_t>(device)].empty()) {
      return target_archs_[static_cast<std::size_t>(device)];
    }
  }
  const std::string arch = backend().target_arch(device);
  std::lock_guard lock(mutex_);
  if (static_cast<std::size_t>(device) >= target_archs_.size()) {
    target_archs_.resize(static_cast<std::size_t>(device) + 1);
  }
  target_archs_[static_cast<std::size_t>(device)] = arch;
  return arch;
}

void Runtime::register_kernel(KernelBase* kernel) {
  std::lock_guard lock(mutex_);
  kernels_.push_back(kernel);
}

void Runtime::unregister_kernel(KernelBase* kernel) {
  std::lock_guard lock(mutex_);
  kernels_.erase(std::remove(kernels_.begin(), kernels_.end(), kernel), kernels_.end());
}

std::vector<KernelBase*> Runtime::kernels() const {
  std::lock_guard lock(mutex_);
  return kernels_;
}

}  // namespace zerojit
