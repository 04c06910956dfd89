// A real redis-server for the remote-cache tests: started on a free port of 127.0.0.1 in its
// own directory (no persistence), stopped when the object dies, also when a test fails; it
// dies with the test process (PR_SET_PDEATHSIG) if that is killed. A small client speaking
// RESP over a socket lets the tests read and damage what the tool stored, without hiredis.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace zerojit::test {

struct RespValue {
  enum class Type { string, status, error, integer, nil, array };
  Type type = Type::nil;
  std::string text;
  long long integer = 0;
  std::vector<RespValue> elements;
};

// One connection; every call throws std::runtime_error on a socket error.
class RespClient {
 public:
  explicit RespClient(int port);
  ~RespClient();
  RespClient(const RespClient&) = delete;
  RespClient& operator=(const RespClient&) = delete;
  RespValue command(const std::vector<std::string>& arguments);

 private:
  RespValue read_value();
  char read_byte();
  std::string read_line();
  int fd_ = -1;
  std::string buffer_;
  std::size_t position_ = 0;
};

class RedisServer {
 public:
  // Starts one; `extra`: more redis-server options. ok() is false (and why() says why) when
  // redis-server is not installed or does not start.
  explicit RedisServer(const std::filesystem::path& directory,
                       const std::vector<std::string>& extra = {});
  ~RedisServer();
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  bool ok() const { return pid_ > 0; }
  const std::string& why() const { return why_; }
  int port() const { return port_; }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_) + "/0"; }
  void kill_now();  // SIGKILL, waited for

  RespValue command(const std::vector<std::string>& arguments);
  // Keys matching a pattern (KEYS; the test servers are small).
  std::vector<std::string> keys(const std::string& pattern);
  std::optional<std::string> get(const std::string& key);

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  std::string why_;
};

// A TCP port that accepts connections (the kernel completes them from the backlog) and never
// answers: a Redis that hangs.
class SilentServer {
 public:
  SilentServer();
  ~SilentServer();
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

// A port on 127.0.0.1 that nothing listens on (bound and released).
int free_port();

// A TCP socket listening on a free port of 127.0.0.1, which `port` is set to.
int listen_on_loopback(int& port);

}  // namespace zerojit::test
