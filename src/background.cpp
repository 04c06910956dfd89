#include "zerojit/background.hpp"

#include <thread>

namespace zerojit {

BackgroundCompiles& BackgroundCompiles::instance() {
  // Never destroyed: its thread may be compiling when static destructors run.
  static auto* queue = new BackgroundCompiles();
  return *queue;
}

void BackgroundCompiles::start() {
  std::lock_guard lock(mutex_);
  start_locked();
}

void BackgroundCompiles::start_locked() {
  if (started_) return;
  started_ = true;
  std::thread([this] { work(); }).detach();
}

bool BackgroundCompiles::submit(std::function<void()> job) {
  std::lock_guard lock(mutex_);
  if (jobs_.size() >= kQueueLimit) return false;
  jobs_.push_back(std::move(job));
  start_locked();
  changed_.notify_all();
  return true;
}

void BackgroundCompiles::work() {
  std::unique_lock lock(mutex_);
  while (true) {
    changed_.wait(lock, [this] { return !jobs_.empty(); });
    std::function<void()> job = std::move(jobs_.front());
    jobs_.pop_front();
    running_ = true;
    lock.unlock();
    job();  // a job reports its own failure; it never throws (KernelBase::serve_with_fallback)
    lock.lock();
    running_ = false;
    changed_.notify_all();
  }
}

bool BackgroundCompiles::wait_idle(std::chrono::milliseconds bound) {
  std::unique_lock lock(mutex_);
  return changed_.wait_for(lock, bound, [this] { return jobs_.empty() && !running_; });
}

std::size_t BackgroundCompiles::queued() const {
  std::lock_guard lock(mutex_);
  return jobs_.size();
}

}  // namespace zerojit
