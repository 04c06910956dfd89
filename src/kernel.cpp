#include "zerojit/kernel.hpp"

#include <algorithm>
#include <chrono>
#include <optional>
#include <vector>

namespace zerojit {

namespace {

// The identities this thread has claimed and not yet settled: a second acquire of one of them
// from this thread (a monitor or log callback that runs inside the compile and asks for the same
// key) would wait for itself forever, so it is refused instead.
thread_local std::vector<ProgramIdentity> claims_of_this_thread;

class ClaimedHere {
 public:
  explicit ClaimedHere(const ProgramIdentity& identity) {
    claims_of_this_thread.push_back(identity);
  }
  ~ClaimedHere() { claims_of_this_thread.pop_back(); }
  ClaimedHere(const ClaimedHere&) = delete;
  ClaimedHere& operator=(const ClaimedHere&) = delete;

  static bool holds(const ProgramIdentity& identity) {
    return std::find(claims_of_this_thread.begin(), claims_of_this_thread.end(), identity) !=
           claims_of_this_thread.end();
  }
};

}  // namespace

KernelBase::KernelBase(std::string name, const EmbeddedFileSet* files)
    : name_(std::move(name)), files_(files) {
  Runtime::instance().register_kernel(this);
  Monitor::instance().track(&name_, &stats_);
}

KernelBase::~KernelBase() {
  Monitor::instance().untrack(&stats_);
  Runtime::instance().unregister_kernel(this);
}

KernelBase::Acquired KernelBase::acquire(const Acquire& request) {
  Runtime& runtime = Runtime::instance();
  const Program& program = *request.program;
  if (request.launching) {
    stats_.misses.fetch_add(1, std::memory_order_relaxed);
    if (runtime.backend().is_capturing(request.stream)) {
      throw RuntimeJitError(name_, program.key_text, request.descriptors(),
                            "a compile or module load was requested while the stream is "
                            "capturing a CUDA graph; warm this key up before capturing");
    }
  }
  validate_arch(request.arch);
  const ProgramIdentity identity = compute_identity(
      program, request.arch, runtime.compiler_version(program.language, request.arch));

  // Single flight within the process: the first thread for an identity claims it (installs a
  // future) and finds or compiles the artifact; the others wait on the future.
  Acquired acquired;
  std::optional<std::promise<std::shared_ptr<const CompiledArtifact>>> claim;
  std::shared_future<std::shared_ptr<const CompiledArtifact>> pending;
  {
    std::lock_guard lock(artifacts_mutex_);
    if (auto it = artifacts_.find(identity); it != artifacts_.end()) {
      pending = it->second;
    } else {
      claim.emplace();
      artifacts_.emplace(identity, claim->get_future().share());
    }
  }
  if (!claim && ClaimedHere::holds(identity) &&
      pending.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
    throw Error("kernel " + name_ + " [" + program.key_text +
                "]: acquired again by the thread that is compiling it (from a monitor, log or "
                "progress callback?); it would wait for itself");
  }
  std::optional<ClaimedHere> claimed_here;
  if (claim) claimed_here.emplace(identity);
  // Lets waiters see a failure, and forgets it so that a later call can try again.
  auto abandon_claim = [&] {
    if (!claim) return;
    claim->set_exception(std::current_exception());
    claim.reset();
    std::lock_guard lock(artifacts_mutex_);
    artifacts_.erase(identity);
  };
  auto fulfil_claim = [&] {
    if (!claim) return;
    claim->set_value(acquired.artifact);
    claim.reset();
  };

  std::shared_ptr<ArtifactStore> store = runtime.artifact_store();
  try {
    if (!claim) {
      acquired.artifact = pending.get();  // rethrows the owner's failure
      acquired.origin = ArtifactOrigin::memory;
    } else if (store) {
      if (auto found = store->find(identity)) {
        acquired.artifact = std::make_shared<const CompiledArtifact>(std::move(*found));
        acquired.origin = ArtifactOrigin::disk;
        stats_.disk_loads.fetch_add(1, std::memory_order_relaxed);
        fulfil_claim();
      }
    }

    const bool must_compile = acquired.artifact == nullptr;
    const bool must_load =
        request.device >= 0 && find_executor(request.key, request.device) == nullptr;
    Monitor& monitor = Monitor::instance();
    if ((must_compile || must_load) && monitor.armed()) {
      stats_.runtime_jit.fetch_add(1, std::memory_order_relaxed);
      monitor.on_jit(JitEvent{must_compile ? JitEventKind::compile : JitEventKind::load, name_,
                              program.key_text, request.descriptors()});
    }

    if (must_compile) {
      // Cross-process single flight: wait for another process compiling this identity, then
      // look again before compiling here.
      std::unique_ptr<CompileGuard> guard;
      if (store) {
        guard = store->lock(identity);
        if (auto after_wait = store->find(identity)) {
          acquired.artifact = std::make_shared<const CompiledArtifact>(std::move(*after_wait));
          acquired.origin = ArtifactOrigin::disk;
          stats_.disk_loads.fetch_add(1, std::memory_order_relaxed);
        }
      }
      if (!acquired.artifact) {
        auto compiled =
            std::make_shared<CompiledArtifact>(runtime.compile(program, request.arch, identity));
        stats_.compiles.fetch_add(1, std::memory_order_relaxed);
        stats_.compile_nanoseconds.fetch_add(
            static_cast<std::uint64_t>(compiled->compile_seconds * 1e9), std::memory_order_relaxed);
        if (store) store->publish(*compiled);
        acquired.artifact = std::move(compiled);
        acquired.origin = ArtifactOrigin::compiled;
      }
      fulfil_claim();
    }
  } catch (...) {
    abandon_claim();
    throw;
  }

  if (request.device >= 0) acquired.function = &load_on_device(request, *acquired.artifact);
  return acquired;
}

const LoadedFunction& KernelBase::load_on_device(const Acquire& request,
                                                 const CompiledArtifact& artifact) {
  std::lock_guard lock(load_mutex_);
  if (const LoadedFunction* function = find_executor(request.key, request.device)) {
    return *function;
  }
  const std::string& entry = artifact.lowered(request.program->name_expressions.front());
  const LoadedFunction function =
      Runtime::instance().backend().load(artifact, entry, request.device);
  stats_.loads.fetch_add(1, std::memory_order_relaxed);
  return insert_executor(request.key, request.device, function);
}

void KernelBase::refuse_specialization(const std::string& key_text, const std::string& argument,
                                       const std::string& detail, const std::string& descriptors) {
  stats_.misses.fetch_add(1, std::memory_order_relaxed);
  Monitor& monitor = Monitor::instance();
  if (monitor.armed()) stats_.runtime_jit.fetch_add(1, std::memory_order_relaxed);
  monitor.on_jit(JitEvent{JitEventKind::specialization, name_, key_text, descriptors,
                          "argument '" + argument + "' " + detail});
  throw InvalidArgument(name_, argument,
                        detail + ", but its key [" + key_text +
                            "] compiles no such specialization; dispatch must return a key whose "
                            "program covers the call (nothing was compiled or launched)");
}

void KernelBase::refuse_arguments(const LoadedFunction& function, const KernelArgs& args) const {
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
  throw LaunchError("kernel " + name_ + ": launch refused: " + problem +
                    " (the host-side argument block and the kernel source disagree)");
}

void KernelBase::reset_base_for_testing() {
  {
    std::lock_guard lock(artifacts_mutex_);
    artifacts_.clear();
  }
  stats_.reset();
}

}  // namespace zerojit
