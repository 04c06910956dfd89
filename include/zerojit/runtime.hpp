// The process-wide state zerojit keeps, in one documented singleton: the backend that loads
// and launches, the artifact store behind the in-memory tier, where NVRTC runs (the compile
// executor), and the list of live kernels.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "zerojit/artifact_store.hpp"
#include "zerojit/backend.hpp"
#include "zerojit/compiler.hpp"

namespace zerojit {

class KernelBase;

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
  std::string nvrtc_version();

  // Where compiles run: the latest installed executor still alive, or nullptr (this process).
  CompileExecutor* compile_executor() const;
  // Compiles `program` through the current executor (see compile_program).
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
  std::vector<std::string> target_archs_;
  std::vector<KernelBase*> kernels_;
  std::vector<CompileExecutor*> compile_executors_;  // installed, the latest last
};

}  // namespace zerojit
