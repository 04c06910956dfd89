// A stand-in for a Redis that misbehaves, on a free port of 127.0.0.1: it answers every
// command (every read that brings bytes) with the same reply, all at once or trickled one byte
// at a time, whatever the command was. A lying server (a reply announcing 2^31 elements) and a
// trickling one (a valid reply, a byte every 100 ms) are both this. Everything it does is
// bounded: it stops, and its threads are joined, when the object dies.
#pragma once

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace zerojit::test {

class ScriptedServer {
 public:
  // `interval`: the pause before each byte of a reply (zero: the reply in one write).
  explicit ScriptedServer(std::string reply,
                          std::chrono::milliseconds interval = std::chrono::milliseconds(0));
  ~ScriptedServer();
  ScriptedServer(const ScriptedServer&) = delete;
  ScriptedServer& operator=(const ScriptedServer&) = delete;

  int port() const { return port_; }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_) + "/0"; }
  int connections() const { return connections_.load(); }

 private:
  void accept_loop();
  void serve(int fd);
  // Sleeps `duration` in short slices; false when the server is stopping.
  bool pause(std::chrono::milliseconds duration) const;

  std::string reply_;
  std::chrono::milliseconds interval_;
  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int> connections_{0};
  std::mutex mutex_;
  std::vector<std::thread> threads_;  // one a connection
  std::thread acceptor_;
};

// A RESP bulk string of `length` bytes: a valid reply to any command, as long as wanted.
std::string resp_bulk(std::size_t length);

}  // namespace zerojit::test
