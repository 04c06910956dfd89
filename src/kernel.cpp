#include "zerojit/kernel.hpp"

#include <chrono>

namespace zerojit {

KernelBase::KernelBase(std::string name) : name_(std::move(name)) {
  Runtime::instance().register_kernel(this);
}

KernelBase::~KernelBase() { Runtime::instance().unregister_kernel(this); }

KernelCounters KernelBase::counters() const {
  KernelCounters c;
  c.kernel = name_;
  c.hits = stats_.hits.load(std::memory_order_relaxed);
  c.misses = stats_.misses.load(std::memory_order_relaxed);
  c.compiles = stats_.compiles.load(std::memory_order_relaxed);
  c.compile_seconds =
      static_cast<double>(stats_.compile_nanoseconds.load(std::memory_order_relaxed)) * 1e-9;
  c.disk_loads = stats_.disk_loads.load(std::memory_order_relaxed);
  c.loads = stats_.loads.load(std::memory_order_relaxed);
  c.runtime_jit = stats_.runtime_jit.load(std::memory_order_relaxed);
  return c;
}

bool KernelBase::has_artifact_in_memory(const Program& program, std::string_view arch) {
  const ProgramIdentity identity =
      compute_identity(program, arch, Runtime::instance().nvrtc_version());
  std::lock_guard lock(artifacts_mutex_);
  return artifacts_.count(identity) != 0;
}

std::shared_ptr<const CompiledArtifact> KernelBase::obtain_artifact(
    const Program& program, std::string_view arch, ArtifactOrigin& origin, bool runtime_jit_checked,
    const std::string& descriptors) {
  validate_arch(arch);
  Runtime& runtime = Runtime::instance();
  const ProgramIdentity identity = compute_identity(program, arch, runtime.nvrtc_version());

  // Single flight within the process: the first thread for an identity installs a future and
  // does the work; the others wait on it.
  std::promise<std::shared_ptr<const CompiledArtifact>> promise;
  std::shared_future<std::shared_ptr<const CompiledArtifact>> future;
  bool owner = false;
  {
    std::lock_guard lock(artifacts_mutex_);
    auto it = artifacts_.find(identity);
    if (it == artifacts_.end()) {
      future = promise.get_future().share();
      artifacts_.emplace(identity, future);
      owner = true;
    } else {
      future = it->second;
    }
  }
  if (!owner) {
    origin = ArtifactOrigin::memory;
    return future.get();  // rethrows the owner's failure
  }

  try {
    std::shared_ptr<ArtifactStore> store = runtime.artifact_store();
    std::shared_ptr<const CompiledArtifact> artifact;
    std::unique_ptr<CompileGuard> guard;
    if (store) {
      if (auto found = store->find(identity)) {
        artifact = std::make_shared<const CompiledArtifact>(std::move(*found));
      } else {
        // Cross-process single flight: wait for another process compiling this identity,
        // then look again before compiling ourselves.
        guard = store->lock(identity);
        if (auto after_wait = store->find(identity)) {
          artifact = std::make_shared<const CompiledArtifact>(std::move(*after_wait));
        }
      }
    }
    if (artifact) {
      origin = ArtifactOrigin::disk;
      stats_.disk_loads.fetch_add(1, std::memory_order_relaxed);
    } else {
      if (!runtime_jit_checked && Monitor::instance().armed()) {
        stats_.runtime_jit.fetch_add(1, std::memory_order_relaxed);
        Monitor::instance().on_jit(
            JitEvent{JitEventKind::compile, name_, program.key_text, descriptors});
      }
      auto compiled = std::make_shared<CompiledArtifact>(compile_program(program, arch, identity));
      stats_.compiles.fetch_add(1, std::memory_order_relaxed);
      stats_.compile_nanoseconds.fetch_add(
          static_cast<std::uint64_t>(compiled->compile_seconds * 1e9), std::memory_order_relaxed);
      if (store) store->publish(*compiled);
      artifact = std::move(compiled);
      origin = ArtifactOrigin::compiled;
    }
    promise.set_value(artifact);
    return artifact;
  } catch (...) {
    // Let waiters see the failure, and forget it so that a later call can try again.
    promise.set_exception(std::current_exception());
    std::lock_guard lock(artifacts_mutex_);
    artifacts_.erase(identity);
    throw;
  }
}

void KernelBase::check_arguments(const LoadedFunction& function, const KernelArgs& args,
                                 const std::string& key_text) const {
  std::string problem;
  if (function.param_count != args.count()) {
    problem = "the plan packed " + std::to_string(args.count()) +
              " arguments but the compiled kernel takes " + std::to_string(function.param_count);
  } else {
    for (int i = 0; i < args.count(); ++i) {
      const auto expected = function.param_sizes[static_cast<std::size_t>(i)];
      if (expected != args.size(i)) {
        problem = "argument " + std::to_string(i) + " is " + std::to_string(args.size(i)) +
                  " bytes but the compiled kernel's parameter " + std::to_string(i) + " is " +
                  std::to_string(expected) + " bytes";
        break;
      }
    }
  }
  throw LaunchError("kernel " + name_ + (key_text.empty() ? "" : " [" + key_text + "]") +
                    ": launch refused: " + problem +
                    " (the host-side argument block and the kernel source disagree)");
}

void KernelBase::reset_base_for_testing() {
  {
    std::lock_guard lock(artifacts_mutex_);
    artifacts_.clear();
  }
  stats_.hits = 0;
  stats_.misses = 0;
  stats_.compiles = 0;
  stats_.compile_nanoseconds = 0;
  stats_.disk_loads = 0;
  stats_.loads = 0;
  stats_.runtime_jit = 0;
}

}  // namespace zerojit
