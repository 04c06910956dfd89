#include "zerojit/kernel.hpp"

#include <algorithm>
#include <chrono>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "zerojit/log.hpp"
#include "zerojit/misses.hpp"

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

using ArtifactPtr = std::shared_ptr<const CompiledArtifact>;
using ArtifactFutures = std::map<ProgramIdentity, std::shared_future<ArtifactPtr>>;

// Single flight within the process: the first thread for an identity claims it (installs a
// future) and must settle the claim, with the artifact or with its failure; the others wait
// on the future.
class ArtifactClaim {
 public:
  ArtifactClaim(std::mutex& mutex, ArtifactFutures& artifacts, const ProgramIdentity& identity)
      : mutex_(mutex), artifacts_(artifacts), identity_(identity) {
    {
      std::lock_guard lock(mutex_);
      if (auto it = artifacts_.find(identity_); it != artifacts_.end()) {
        pending_ = it->second;
      } else {
        promise_.emplace();
        artifacts_.emplace(identity_, promise_->get_future().share());
      }
    }
    if (promise_) claimed_here_.emplace(identity_);
  }
  ArtifactClaim(const ArtifactClaim&) = delete;
  ArtifactClaim& operator=(const ArtifactClaim&) = delete;

  // Whether this call owns the claim (else another call does, and wait_for_owner applies).
  bool owned() const { return promise_.has_value(); }

  // The owner is this very thread, further up its stack, and has not settled yet.
  bool would_wait_for_itself() const {
    return !promise_ && ClaimedHere::holds(identity_) &&
           pending_.wait_for(std::chrono::seconds(0)) != std::future_status::ready;
  }

  // Null when the owner withdrew (a deferred warm): the caller claims again.
  ArtifactPtr wait_for_owner() const { return pending_.get(); }

  void fulfil(const ArtifactPtr& artifact) {
    if (!promise_) return;
    promise_->set_value(artifact);
    promise_.reset();
  }

  // Gives the claim up unsettled (its warm was deferred): the waiters see no artifact and
  // claim again, so that a runtime call of the same key waits for the other process itself.
  void withdraw() {
    if (!promise_) return;
    {
      std::lock_guard lock(mutex_);
      artifacts_.erase(identity_);
    }
    promise_->set_value(nullptr);
    promise_.reset();
  }

  // Lets waiters see the failure in flight, and forgets it so that a later call can try again.
  void abandon() {
    if (!promise_) return;
    promise_->set_exception(std::current_exception());
    promise_.reset();
    std::lock_guard lock(mutex_);
    artifacts_.erase(identity_);
  }

 private:
  std::mutex& mutex_;
  ArtifactFutures& artifacts_;
  const ProgramIdentity& identity_;
  std::optional<std::promise<ArtifactPtr>> promise_;
  std::shared_future<ArtifactPtr> pending_;
  std::optional<ClaimedHere> claimed_here_;
};

// The miss is counted before the capture check so that a refused launch still shows as one.
void count_launch_miss(KernelStats& stats, Runtime& runtime, const std::string& kernel,
                       const Program& program, cuda::Stream stream,
                       const DescriptorText& descriptors) {
  stats.misses.fetch_add(1, std::memory_order_relaxed);
  if (runtime.backend().is_capturing(stream)) {
    throw RuntimeJitError(kernel, program.key_text, descriptors(),
                          "a compile or module load was requested while the stream is "
                          "capturing a CUDA graph; warm this key up before capturing");
  }
}

// Reported before the work is done, so that the monitor's error mode refuses it undone.
void report_runtime_jit(KernelStats& stats, JitEventKind kind, const std::string& kernel,
                        const std::string& key_text, const DescriptorText& descriptors) {
  Monitor& monitor = Monitor::instance();
  if (!monitor.armed()) return;
  stats.runtime_jit.fetch_add(1, std::memory_order_relaxed);
  monitor.on_jit(JitEvent{kind, kernel, key_text, descriptors()});
}

// Null when the store holds no verified artifact for the identity.
ArtifactPtr load_from_store(ArtifactStore& store, const ProgramIdentity& identity,
                            KernelStats& stats) {
  std::optional<CompiledArtifact> found = store.find(identity);
  if (!found) return nullptr;
  auto artifact = std::make_shared<const CompiledArtifact>(std::move(*found));
  stats.disk_loads.fetch_add(1, std::memory_order_relaxed);
  return artifact;
}

ArtifactPtr compile_and_publish(Runtime& runtime, ArtifactStore* store, const Program& program,
                                std::string_view arch, const ProgramIdentity& identity,
                                KernelStats& stats) {
  auto compiled = std::make_shared<CompiledArtifact>(runtime.compile(program, arch, identity));
  stats.compiles.fetch_add(1, std::memory_order_relaxed);
  stats.compile_nanoseconds.fetch_add(static_cast<std::uint64_t>(compiled->compile_seconds * 1e9),
                                      std::memory_order_relaxed);
  if (store) store->publish(*compiled);
  return compiled;
}

thread_local bool defer_held_keys = false;

}  // namespace

DeferHeldKeys::DeferHeldKeys() : previous_(defer_held_keys) { defer_held_keys = true; }
DeferHeldKeys::~DeferHeldKeys() { defer_held_keys = previous_; }
bool DeferHeldKeys::active() { return defer_held_keys; }

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
    // Learned before anything may refuse it: the next boot warms the key (misses.hpp).
    if (Monitor::instance().armed()) {
      record_miss(name_, program.key_text, key_json(request.key), request.descriptors());
    }
    count_launch_miss(stats_, runtime, name_, program, request.stream, request.descriptors);
  }
  validate_arch(request.arch);
  const ProgramIdentity identity = compute_identity(
      program, request.arch, runtime.compiler_version(program.language, request.arch));

  Acquired acquired;
  std::optional<ArtifactClaim> claim;
  while (true) {
    claim.emplace(artifacts_mutex_, artifacts_, identity);
    if (claim->would_wait_for_itself()) {
      throw Error("kernel " + name_ + " [" + program.key_text +
                  "]: acquired again by the thread that is compiling it (from a monitor, log or "
                  "progress callback?); it would wait for itself");
    }
    if (claim->owned()) break;
    // rethrows the owner's failure; null when the owner deferred its warm: claim again
    if ((acquired.artifact = claim->wait_for_owner())) {
      acquired.origin = ArtifactOrigin::memory;
      break;
    }
  }

  std::shared_ptr<ArtifactStore> store = runtime.artifact_store();
  try {
    if (!acquired.artifact && store &&
        (acquired.artifact = load_from_store(*store, identity, stats_))) {
      acquired.origin = ArtifactOrigin::disk;
      claim->fulfil(acquired.artifact);
    }

    const bool must_compile = acquired.artifact == nullptr;
    // Cross-process single flight. A warm under DeferHeldKeys does not wait for another
    // process compiling this identity: it gives the key back (before the monitor hears of a
    // compile that may never happen here) and warmup returns to it after the unheld keys.
    std::unique_ptr<CompileGuard> guard;
    bool locked = false;
    if (must_compile && store && request.may_defer && DeferHeldKeys::active()) {
      LockAttempt attempt = store->try_lock(identity);
      if (attempt.held_elsewhere) {
        claim->withdraw();
        acquired.deferred = true;
        return acquired;
      }
      guard = std::move(attempt.guard);
      locked = true;
    }

    const bool must_load =
        request.device >= 0 && find_executor(request.key, request.device) == nullptr;
    if (must_compile || must_load) {
      report_runtime_jit(stats_, must_compile ? JitEventKind::compile : JitEventKind::load, name_,
                         program.key_text, request.descriptors);
    }

    if (must_compile) {
      // Otherwise wait (bounded by the store's lock timeout) for another process compiling this
      // identity; either way look again before compiling here.
      if (store && !locked) guard = store->lock(identity);
      if (store && (acquired.artifact = load_from_store(*store, identity, stats_))) {
        acquired.origin = ArtifactOrigin::disk;
      } else {
        acquired.artifact =
            compile_and_publish(runtime, store.get(), program, request.arch, identity, stats_);
        acquired.origin = ArtifactOrigin::compiled;
      }
      claim->fulfil(acquired.artifact);
    }
  } catch (...) {
    claim->abandon();
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

void KernelBase::launch_loaded(const LoadedFunction& function, PackedCall& call,
                               cuda::Stream stream) const {
  Backend& backend = Runtime::instance().backend();
  switch (function.form) {
    case LaunchForm::plan:
      check_arguments(function, call.args);
      backend.launch(function, call.geometry, call.args, stream);
      return;
    case LaunchForm::recorded: {
      for (std::uint32_t i = 0; i < function.trailing_null_pointers; ++i) {
        call.args.push(static_cast<void*>(nullptr));
      }
      check_arguments(function, call.args);
      LaunchGeometry geometry;
      geometry.grid = {call.geometry.grid.x * function.grid_x_multiplier, call.geometry.grid.y,
                       call.geometry.grid.z};
      geometry.block = {function.block_threads, 1, 1};
      geometry.shared_bytes = function.shared_bytes;
      geometry.attributes = function.attributes;
      backend.launch(function, geometry, call.args, stream);
      return;
    }
    case LaunchForm::host_entry: {
      if (call.host_count == 0)
        throw LaunchError("kernel " + name_ +
                          ": a host entry's call "
                          "has no return code");
      auto* status = static_cast<std::int32_t*>(call.host_args[call.host_count - 1]);
      *status = 0;
      backend.run_host(function, call.host_args, call.host_count);
      if (*status != 0) {
        throw LaunchError("kernel " + name_ + ": the exported host entry returned CUDA error " +
                          std::to_string(*status));
      }
      return;
    }
  }
}

bool KernelBase::serve_with_fallback(const std::string& key_text, const std::string& key_json,
                                     const std::string& descriptors, bool capturing,
                                     std::function<void()> compile) {
  std::unique_lock lock(background_mutex_);
  const auto found = background_.find(key_text);
  if (found != background_.end() && found->second == BackgroundState::ready && !capturing) {
    return false;  // ready: the caller's miss loads it
  }
  stats_.misses.fetch_add(1, std::memory_order_relaxed);
  if (found == background_.end() && !capturing) {
    // One compile per key: queued once, settled once.
    auto job = [this, key_text, compile = std::move(compile)] {
      std::string failure;
      try {
        compile();
      } catch (const std::exception& error) {
        failure = error.what();
      } catch (...) {
        failure = "an unknown error";
      }
      std::lock_guard settled(background_mutex_);
      background_[key_text] = failure.empty() ? BackgroundState::ready : BackgroundState::failed;
      (failure.empty() ? stats_.background_compiles : stats_.background_failures)
          .fetch_add(1, std::memory_order_relaxed);
      if (!failure.empty()) {
        log_warning("monitor", "kernel " + name_ + " [" + key_text +
                                   "]: its background compile failed; its fallback keeps "
                                   "serving its calls: " +
                                   failure);
      }
    };
    if (BackgroundCompiles::instance().submit(std::move(job))) {
      background_.emplace(key_text, BackgroundState::queued);
    }
  }
  lock.unlock();
  record_miss(name_, key_text, key_json, descriptors);
  return true;
}

void KernelBase::reset_base_for_testing() {
  {
    std::lock_guard lock(background_mutex_);
    background_.clear();
  }
  {
    std::lock_guard lock(artifacts_mutex_);
    artifacts_.clear();
  }
  stats_.reset();
}

}  // namespace zerojit
