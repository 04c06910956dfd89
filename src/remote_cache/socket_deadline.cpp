#include "remote_cache/socket_deadline.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <system_error>
#include <thread>

namespace zerojit::detail::redis {

using Clock = SocketDeadline::Clock;

// The sockets being watched, and the thread that shuts each down at its deadline.
class SocketWatchdog {
 public:
  explicit SocketWatchdog(pid_t owner) : owner_(owner) {}

  pid_t owner() const { return owner_; }

  std::uint64_t add(int fd, Clock::time_point deadline) {
    std::lock_guard lock(mutex_);
    if (!started_) {
      try {
        // Detached, and the watchdog is never destroyed: nothing has to stop it at exit.
        std::thread([this] { run(); }).detach();
        started_ = true;
      } catch (const std::system_error&) {
        // No thread now (a process at its thread limit): each read and write keeps its own
        // timeout, and the next command tries again.
      }
    }
    const std::uint64_t id = ++last_id_;
    watches_.emplace(id, Watch{fd, deadline, false});
    if (deadline < next_wake_) wake_.notify_one();  // else it wakes in time anyway
    return id;
  }

  void remove(std::uint64_t id) {
    std::lock_guard lock(mutex_);
    watches_.erase(id);
  }

  bool expired(std::uint64_t id) {
    std::lock_guard lock(mutex_);
    const auto it = watches_.find(id);
    return it != watches_.end() && it->second.expired;
  }

 private:
  struct Watch {
    int fd;
    Clock::time_point deadline;
    bool expired;
  };

  // Shuts down every watched socket past its deadline (a blocked recv then returns 0 and a
  // blocked send fails, in hiredis and in OpenSSL alike), then sleeps until the next deadline
  // or a new watch. Under the mutex, so that a socket is never touched after remove().
  void run() {
    std::unique_lock lock(mutex_);
    while (true) {
      const Clock::time_point now = Clock::now();
      Clock::time_point next = Clock::time_point::max();
      for (auto& [id, watch] : watches_) {
        if (watch.expired) continue;
        if (watch.deadline <= now) {
          ::shutdown(watch.fd, SHUT_RDWR);
          watch.expired = true;
        } else {
          next = std::min(next, watch.deadline);
        }
      }
      next_wake_ = next;
      if (next == Clock::time_point::max()) {
        wake_.wait(lock);
      } else {
        wake_.wait_until(lock, next);
      }
    }
  }

  const pid_t owner_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::map<std::uint64_t, Watch> watches_;
  std::uint64_t last_id_ = 0;
  Clock::time_point next_wake_ = Clock::time_point::min();  // when the thread wakes next
  bool started_ = false;
};

namespace {

// The process's watchdog. A child forked since it was made gets one of its own: the thread
// did not come across the fork, and its mutex may have been held when it happened. The old
// one is left as it is and never touched again (a few hundred bytes).
SocketWatchdog& watchdog() {
  static std::atomic<SocketWatchdog*> current{nullptr};
  const pid_t pid = ::getpid();
  SocketWatchdog* seen = current.load(std::memory_order_acquire);
  while (seen == nullptr || seen->owner() != pid) {
    auto* fresh = new SocketWatchdog(pid);
    if (current.compare_exchange_strong(seen, fresh, std::memory_order_acq_rel)) return *fresh;
    delete fresh;  // another thread was first; `seen` now holds its watchdog
  }
  return *seen;
}

}  // namespace

SocketDeadline::SocketDeadline(int fd, Clock::time_point deadline)
    : watchdog_(&watchdog()), id_(watchdog_->add(fd, deadline)) {}

SocketDeadline::~SocketDeadline() { watchdog_->remove(id_); }

bool SocketDeadline::expired() const { return watchdog_->expired(id_); }

}  // namespace zerojit::detail::redis
