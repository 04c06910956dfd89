// The process-wide state zerojit keeps, in one documented singleton: the backend that loads
// and launches, the artifact store behind the in-memory tier, where NVRTC runs (the compile
// executor), and the list of live kernels.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "zerojit/artifact_store.hpp"
#include "zerojit/backend.hpp"
#include "zerojit/compiler.hpp"

namespace zerojit {

class KernelBase;

// The compiler of a language other than CUDA C++ (Triton, CuTeDSL). Its compiles need Python,
// so the Python module installs one per language (Runtime::set_language_compiler); it runs
// them in worker processes, never on the serving thread.
class LanguageCompiler {
 public:
  virtual ~LanguageCompiler() = default;
  // The compiler's version for an arch as identities name it (e.g. "triton-3.6.0+ptxas-12.8.93":
  // Triton picks ptxas by arch). Throws UnavailableError when the compiler is not installed.
  virtual std::string version(std::string_view arch) = 0;
  // Compiles `program` for `arch`: the artifact's image, lowered names, launch record, log and
  // compile time (the Runtime fills in the identity and what the program says). Throws
  // CompileError (the compiler's message) or UnavailableError.
  virtual CompiledArtifact compile(const Program& program, std::string_view arch) = 0;
};

class Runtime {
 public:
  static Runtime& instance();

  // The backend kernels load and launch through. Defaults to the CUDA driver.
  Backend& backend() { return *backend_.load(std::memory_order_acquire); }
  // Replaces the backend (tests install a recording one). Kernels keep functions loaded by the
  // previous backend until their executors are cleared; swap only when no launch is running.
  void set_backend(std::shared_ptr<Backend> backend);

  // The artifact store (nullptr: memory only).
  std::shared_ptr<ArtifactStore> artifact_store() const;
  void set_artifact_store(std::shared_ptr<ArtifactStore> store);

  // The NVRTC version that goes into every identity. Once NVRTC is loaded, its own answer;
  // before that, the store's memo for the library file NVRTC would be loaded from (so a
  // process served entirely from disk never loads NVRTC); else NVRTC is loaded to ask it.
  // Where NVRTC cannot be loaded at all, the one version the store records for its entries
  // (ArtifactStore::recorded_compiler_versions), so that a pack serves; UnavailableError when it
  // records none or several.
  std::string nvrtc_version();

  // The version of `language`'s compiler for `arch`, as identities use it: NVRTC's for CUDA C++
  // (nvrtc_version); otherwise the installed language compiler's, asked once per arch. Where
  // that compiler is not installed (a serving image with a pack and no Triton), the one version
  // the store records for the language and arch; UnavailableError when it records none or
  // several.
  std::string compiler_version(Language language, std::string_view arch);

  // The identity of `program` on `arch`, with its language's compiler version.
  ProgramIdentity identity_of(const Program& program, std::string_view arch) {
    return compute_identity(program, arch, compiler_version(program.language, arch));
  }

  // Installs the compiler of a language other than CUDA C++ (nullptr removes it). The versions
  // asked of the previous one are forgotten.
  void set_language_compiler(Language language, std::shared_ptr<LanguageCompiler> compiler);
  std::shared_ptr<LanguageCompiler> language_compiler(Language language) const;

  // Where compiles run: the latest installed executor still alive, or nullptr (this process).
  CompileExecutor* compile_executor() const;
  // Compiles `program`: CUDA C++ through the current executor (see compile_program), another
  // language through its installed compiler (UnavailableError when there is none).
  CompiledArtifact compile(const Program& program, std::string_view arch,
                           const ProgramIdentity& identity);

  // Installs an executor for as long as it lives. Installations may end in any order (two
  // warmups on two threads): the latest one still alive is the one used, and one that ended
  // never comes back.
  class CompileExecutorInstallation {
   public:
    explicit CompileExecutorInstallation(CompileExecutor& executor);
    ~CompileExecutorInstallation();
    CompileExecutorInstallation(const CompileExecutorInstallation&) = delete;
    CompileExecutorInstallation& operator=(const CompileExecutorInstallation&) = delete;

   private:
    CompileExecutor* executor_;
  };

  // The target arch of a device, asked once per device.
  std::string target_arch(int device);

  void register_kernel(KernelBase* kernel);
  void unregister_kernel(KernelBase* kernel);
  std::vector<KernelBase*> kernels() const;

 private:
  Runtime();

  std::atomic<Backend*> backend_{nullptr};
  std::vector<std::shared_ptr<Backend>> backends_;  // every backend ever set: kept alive
  mutable std::mutex mutex_;
  std::shared_ptr<ArtifactStore> store_;
  std::string nvrtc_version_;
  std::map<Language, std::shared_ptr<LanguageCompiler>> language_compilers_;
  std::map<std::pair<Language, std::string>, std::string> compiler_versions_;  // (language, arch)
  std::vector<std::string> target_archs_;
  std::vector<KernelBase*> kernels_;
  std::vector<CompileExecutor*> compile_executors_;  // installed, the latest last
};

}  // namespace zerojit
