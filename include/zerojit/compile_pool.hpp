// NVRTC compiles in worker processes, for warmup.
//
// NVRTC does not scale across the threads of one process: on a 16-core host, 8 warmup threads
// spent 1.5-1.7x the single-thread compile time in total, while 8 processes compiling at once
// spent 1.15x each (docs/BENCHMARKS.md section 3). A CompileProcessPool forks its workers at
// its first compile (every compile of the pool waits for that, so none of its own is inside
// NVRTC during the fork) and each worker serves one request at a time over a socket:
// NvrtcInput in (sources by content, so nothing of the parent's memory is needed), NvrtcOutput
// or the compile error out. Caching, identities and loading stay in this process.
//
// A pool is a CompileExecutor: while it is installed on the Runtime
// (Runtime::CompileExecutorInstallation), every compile goes to it. When a worker cannot be
// used (it died, the socket broke, or it used no CPU time for `stalled_after` while a request
// was outstanding: stopped by a signal, or stuck; it is then killed), that compile runs in this
// process instead and the worker is not used again: the warmup never fails because of the
// pool, and never waits on a worker without a bound.
//
// Forking duplicates only the calling thread; the workers then use nothing but malloc and
// NVRTC, which no other thread of theirs can hold (glibc's malloc is fork-safe). A compile
// that another thread of the application runs outside the pool at that very moment is the one
// case left: the warmup registry uses a pool only when asked (WarmupOptions::compile_processes;
// the zerojit tool does, being single-threaded otherwise). A worker exits when its socket
// closes: when the pool is destroyed, or when this process ends in any way.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <vector>

#include "zerojit/compiler.hpp"

namespace zerojit {

class CompileProcessPool final : public CompileExecutor {
 public:
  // How long a worker may go without CPU time while a request of ours is outstanding.
  static constexpr std::chrono::seconds kDefaultStalledAfter{60};

  // Up to `workers` (>= 1) processes, forked at the first run(). If none can be forked, every
  // compile runs in this process.
  explicit CompileProcessPool(int workers,
                              std::chrono::milliseconds stalled_after = kDefaultStalledAfter);
  ~CompileProcessPool() override;  // closes the sockets and reaps the workers
  CompileProcessPool(const CompileProcessPool&) = delete;
  CompileProcessPool& operator=(const CompileProcessPool&) = delete;

  // Runs NVRTC on `input` in an idle worker (waits for one); thread-safe. Throws what
  // run_nvrtc would: CompileError with the log, or Error.
  NvrtcOutput run(const NvrtcInput& input) override;

  int workers() const;    // forked so far (0 before the first run)
  int fallbacks() const;  // compiles that ran in this process because a worker failed

 private:
  struct Worker {
    pid_t pid = -1;
    int socket = -1;
    bool busy = false;
    bool broken = false;
  };
  void start();
  Worker* acquire();
  void release(Worker* worker, bool broken);

  int wanted_;
  std::chrono::milliseconds stalled_after_;
  std::once_flag started_;
  std::vector<Worker> workers_;
  mutable std::mutex mutex_;
  std::condition_variable idle_;
  int fallbacks_ = 0;
};

}  // namespace zerojit
