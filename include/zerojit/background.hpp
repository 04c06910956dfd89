// Where a missed key compiles while its kernel's fallback serves the calls (the monitor's
// fallback mode): one worker thread of the process, never a calling thread, with a bounded
// queue. A job is the compile of one key (its artifact, into memory and the caches); the calling
// thread that next misses that key loads it (a module load never runs beside a graph capture
// elsewhere in the process: kernel.hpp, JitKernel::operator()).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>

namespace zerojit {

class BackgroundCompiles {
 public:
  // The process's queue; its thread starts with the first job and lives until the process ends.
  static BackgroundCompiles& instance();

  // At most this many jobs wait at once: a workload of ever-new shapes is served by fallbacks
  // without an unbounded backlog of compiles.
  static constexpr std::size_t kQueueLimit = 64;

  // Starts the worker thread if it has not started (the monitor's fallback mode does, so that
  // the first miss a fallback serves does not pay for a thread's start on the calling thread).
  void start();
  // Queues `job`; false (nothing queued) when the queue is full.
  bool submit(std::function<void()> job);
  // Waits until no job is queued or running, at most `bound`; whether it became idle. For
  // tests, benchmarks and a process that wants its compiles done before it exits.
  bool wait_idle(std::chrono::milliseconds bound);
  std::size_t queued() const;

 private:
  BackgroundCompiles() = default;
  void start_locked();  // start() with mutex_ held
  void work();

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::function<void()>> jobs_;
  bool running_ = false;  // a job is being run
  bool started_ = false;
};

}  // namespace zerojit
