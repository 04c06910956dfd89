// A deadline for everything done on one socket (docs/CACHE.md, "The remote tier"). hiredis
// blocks in recv/send (and OpenSSL inside SSL_read, which reads a record in as many pieces as
// the server sends), and a socket timeout bounds each of those calls, not the command: a server
// sending one byte every 0.1 s never trips a 300 ms timeout and holds a command for as long as
// it likes. So while a SocketDeadline lives, one watchdog thread (shared by the process) shuts
// the socket down when the deadline passes; every call blocked on it returns at once, and the
// connection, now unusable, is dropped by its owner.
#pragma once

#include <chrono>
#include <cstdint>

namespace zerojit::detail::redis {

class SocketWatchdog;

class SocketDeadline {
 public:
  using Clock = std::chrono::steady_clock;

  // Watches `fd` until destroyed. The socket must stay open for that long.
  SocketDeadline(int fd, Clock::time_point deadline);
  // After it returns the watchdog never touches the socket again.
  ~SocketDeadline();
  SocketDeadline(const SocketDeadline&) = delete;
  SocketDeadline& operator=(const SocketDeadline&) = delete;

  // Whether the deadline passed and the socket was shut down.
  bool expired() const;

 private:
  SocketWatchdog* watchdog_;
  std::uint64_t id_ = 0;
};

}  // namespace zerojit::detail::redis
