#include "zerojit/runtime.hpp"

#include <sys/stat.h>

#include <algorithm>

#include "zerojit/compiler.hpp"
#include "zerojit/disk_cache.hpp"
#include "zerojit/error.hpp"

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
  try {
    nvrtc_version_ = zerojit::nvrtc_version();  // loads NVRTC; throws UnavailableError without it
  } catch (const UnavailableError& error) {
    // No NVRTC on this host (a serving image with only an ahead-of-time pack): nothing can be
    // compiled, but entries compiled elsewhere can be found under the version they record,
    // when they record exactly one. With several, no choice is safe: say so.
    const std::vector<std::string> recorded =
        store_ ? store_->recorded_compiler_versions(kNvrtcLanguage, {})
               : std::vector<std::string>{};
    if (recorded.size() == 1) {
      nvrtc_version_ = recorded.front();
      return nvrtc_version_;
    }
    if (recorded.empty()) throw;
    std::string versions;
    for (const std::string& version : recorded)
      versions += (versions.empty() ? "" : ", ") + version;
    throw UnavailableError(std::string(error.what()) + "; the cache (" + store_->describe() +
                           ") records entries of several NVRTC versions (" + versions +
                           "), so none can be chosen without NVRTC");
  }
  if (store_ && !fingerprint.empty()) store_->remember_nvrtc_version(fingerprint, nvrtc_version_);
  return nvrtc_version_;
}

CompileExecutor* Runtime::compile_executor() const {
  std::lock_guard lock(mutex_);
  return compile_executors_.empty() ? nullptr : compile_executors_.back();
}

std::string Runtime::compiler_version(Language language, std::string_view arch) {
  if (entry_kind(language).compiled_by_nvrtc) return nvrtc_version();
  const std::pair<Language, std::string> slot{language, std::string(arch)};
  std::shared_ptr<LanguageCompiler> compiler;
  std::shared_ptr<ArtifactStore> store;
  {
    std::lock_guard lock(mutex_);
    if (auto known = compiler_versions_.find(slot); known != compiler_versions_.end()) {
      return known->second;
    }
    if (auto found = language_compilers_.find(language); found != language_compilers_.end()) {
      compiler = found->second;
    }
    store = store_;
  }
  // Asked without the lock: the compiler may call into Python, whose lock another thread may
  // hold while it waits for this one.
  std::string version;
  std::string missing = "no " + std::string(to_string(language)) + " compiler is installed";
  if (compiler) {
    try {
      version = compiler->version(arch);
    } catch (const UnavailableError& error) {
      missing = error.what();
    }
  }
  if (version.empty()) {
    // Entries compiled elsewhere are found under the version they record, when they record
    // exactly one for this language and arch (a pack served where the compiler is absent).
    const std::vector<std::string> recorded =
        store ? store->recorded_compiler_versions(language, arch) : std::vector<std::string>{};
    if (recorded.size() != 1) {
      std::string versions;
      for (const std::string& each : recorded) versions += (versions.empty() ? "" : ", ") + each;
      throw UnavailableError(
          missing +
          (recorded.empty()
               ? "; and the cache records no " + std::string(to_string(language)) +
                     " entries for " + std::string(arch)
               : "; and the cache (" + store->describe() + ") records entries of several " +
                     std::string(to_string(language)) + " versions for " + std::string(arch) +
                     " (" + versions + "), so none can be chosen"));
    }
    version = recorded.front();
  }
  std::lock_guard lock(mutex_);
  return compiler_versions_.emplace(slot, version).first->second;
}

void Runtime::set_language_compiler(Language language, std::shared_ptr<LanguageCompiler> compiler) {
  std::lock_guard lock(mutex_);
  if (compiler) {
    language_compilers_[language] = std::move(compiler);
  } else {
    language_compilers_.erase(language);
  }
  std::erase_if(compiler_versions_,
                [language](const auto& known) { return known.first.first == language; });
}

std::shared_ptr<LanguageCompiler> Runtime::language_compiler(Language language) const {
  std::lock_guard lock(mutex_);
  const auto found = language_compilers_.find(language);
  return found == language_compilers_.end() ? nullptr : found->second;
}

CompiledArtifact Runtime::compile(const Program& program, std::string_view arch,
                                  const ProgramIdentity& identity) {
  if (entry_kind(program.language).compiled_by_nvrtc) {
    return compile_program(program, arch, identity, compile_executor());
  }
  const std::shared_ptr<LanguageCompiler> compiler = language_compiler(program.language);
  if (!compiler) {
    throw UnavailableError("kernel " + program.kernel_name + " [" + program.key_text + "]: no " +
                           std::string(to_string(program.language)) +
                           " compiler is installed in this process (the Python module installs "
                           "it; import zerojit with the compiler's package installed)");
  }
  CompiledArtifact artifact = compiler->compile(program, arch);
  artifact.identity = identity;
  artifact.language = program.language;
  artifact.kernel_name = program.kernel_name;
  artifact.key_text = program.key_text;
  artifact.arch = std::string(arch);
  artifact.compiler_version = compiler_version(program.language, arch);
  artifact.components = identity_components(program, arch, artifact.compiler_version);
  artifact.compile_request = program.compile_request;
  artifact.program_options = program.options;
  return artifact;
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
