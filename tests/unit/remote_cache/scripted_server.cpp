#include "unit/remote_cache/scripted_server.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

#include "unit/remote_cache/redis_server.hpp"

namespace zerojit::test {

ScriptedServer::ScriptedServer(std::string reply, std::chrono::milliseconds interval)
    : reply_(std::move(reply)), interval_(interval) {
  listener_ = listen_on_loopback(port_);
  acceptor_ = std::thread([this] { accept_loop(); });
}

ScriptedServer::~ScriptedServer() {
  stopping_ = true;
  acceptor_.join();
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(mutex_);
    threads = std::move(threads_);
  }
  for (std::thread& thread : threads) thread.join();
  ::close(listener_);
}

bool ScriptedServer::pause(std::chrono::milliseconds duration) const {
  const auto until = std::chrono::steady_clock::now() + duration;
  while (!stopping_) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= until) return true;
    std::this_thread::sleep_for(
        std::min<std::chrono::steady_clock::duration>(until - now, std::chrono::milliseconds(10)));
  }
  return false;
}

void ScriptedServer::accept_loop() {
  while (!stopping_) {
    pollfd ready{listener_, POLLIN, 0};
    if (::poll(&ready, 1, 20) != 1) continue;
    const int fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    ++connections_;
    std::lock_guard lock(mutex_);
    threads_.emplace_back([this, fd] { serve(fd); });
  }
}

void ScriptedServer::serve(int fd) {
  char buffer[4096];
  bool open = true;
  while (open && !stopping_) {
    pollfd ready{fd, POLLIN, 0};
    if (::poll(&ready, 1, 20) != 1) continue;
    if (::recv(fd, buffer, sizeof buffer, 0) <= 0) break;  // the client is gone
    if (interval_.count() == 0) {
      open = ::send(fd, reply_.data(), reply_.size(), MSG_NOSIGNAL) ==
             static_cast<ssize_t>(reply_.size());
      continue;
    }
    for (std::size_t i = 0; open && i < reply_.size(); ++i) {
      open = pause(interval_) && ::send(fd, &reply_[i], 1, MSG_NOSIGNAL) == 1;
    }
  }
  ::close(fd);
}

std::string resp_bulk(std::size_t length) {
  return "$" + std::to_string(length) + "\r\n" + std::string(length, 'x') + "\r\n";
}

}  // namespace zerojit::test
