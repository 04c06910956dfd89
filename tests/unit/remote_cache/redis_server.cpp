#include "unit/remote_cache/redis_server.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <stdexcept>
#include <thread>

namespace zerojit::test {
namespace {

int connect_to(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    ::close(fd);
    return -1;
  }
  timeval timeout{5, 0};  // a test never waits on the server for longer
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  return fd;
}

std::string find_redis_server() {
  if (const char* named = std::getenv("ZEROJIT_TEST_REDIS_SERVER")) return named;
  const char* path = std::getenv("PATH");
  std::string rest = path != nullptr ? path : "/usr/bin:/bin";
  rest += ":/usr/sbin:/usr/bin";
  std::size_t start = 0;
  while (start <= rest.size()) {
    const std::size_t colon = rest.find(':', start);
    const std::string dir = rest.substr(start, colon - start);
    const std::string candidate = (dir.empty() ? "." : dir) + "/redis-server";
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  return {};
}

}  // namespace

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address);
  socklen_t length = sizeof address;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  ::close(fd);
  return ntohs(address.sin_port);
}

RespClient::RespClient(int port) : fd_(connect_to(port)) {
  if (fd_ < 0) throw std::runtime_error("cannot connect to redis on port " + std::to_string(port));
}

RespClient::~RespClient() {
  if (fd_ >= 0) ::close(fd_);
}

RespValue RespClient::command(const std::vector<std::string>& arguments) {
  std::string out = "*" + std::to_string(arguments.size()) + "\r\n";
  for (const std::string& a : arguments) {
    out += "$" + std::to_string(a.size()) + "\r\n" + a + "\r\n";
  }
  std::size_t sent = 0;
  while (sent < out.size()) {
    const ssize_t n = ::send(fd_, out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) throw std::runtime_error("send to redis failed");
    sent += static_cast<std::size_t>(n);
  }
  return read_value();
}

char RespClient::read_byte() {
  if (position_ == buffer_.size()) {
    char chunk[65536];
    const ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
    if (n <= 0) throw std::runtime_error("redis closed the connection or timed out");
    buffer_.assign(chunk, static_cast<std::size_t>(n));
    position_ = 0;
  }
  return buffer_[position_++];
}

std::string RespClient::read_line() {
  std::string line;
  while (true) {
    const char c = read_byte();
    if (c == '\r') {
      read_byte();  // '\n'
      return line;
    }
    line += c;
  }
}

RespValue RespClient::read_value() {
  RespValue value;
  const char kind = read_byte();
  const std::string line = read_line();
  switch (kind) {
    case '+':
      value.type = RespValue::Type::status;
      value.text = line;
      break;
    case '-':
      value.type = RespValue::Type::error;
      value.text = line;
      break;
    case ':':
      value.type = RespValue::Type::integer;
      value.integer = std::stoll(line);
      break;
    case '$': {
      const long long length = std::stoll(line);
      if (length < 0) break;  // nil
      value.type = RespValue::Type::string;
      value.text.reserve(static_cast<std::size_t>(length));
      for (long long i = 0; i < length; ++i) value.text += read_byte();
      read_byte();
      read_byte();
      break;
    }
    case '*': {
      const long long count = std::stoll(line);
      if (count < 0) break;
      value.type = RespValue::Type::array;
      for (long long i = 0; i < count; ++i) value.elements.push_back(read_value());
      break;
    }
    default:
      throw std::runtime_error("unexpected reply from redis");
  }
  return value;
}

RedisServer::RedisServer(const std::filesystem::path& directory,
                         const std::vector<std::string>& extra) {
  const std::string program = find_redis_server();
  if (program.empty()) {
    why_ =
        "redis-server is not installed (Debian: apt-get install redis-server; "
        "scripts/setup.sh installs it)";
    return;
  }
  std::filesystem::create_directories(directory);
  for (int attempt = 0; attempt < 5 && pid_ <= 0; ++attempt) {
    port_ = free_port();
    std::vector<std::string> args = {program,
                                     "--port",
                                     std::to_string(port_),
                                     "--bind",
                                     "127.0.0.1",
                                     "--save",
                                     "",
                                     "--appendonly",
                                     "no",
                                     "--dir",
                                     directory.string(),
                                     "--daemonize",
                                     "no",
                                     "--logfile",
                                     (directory / "redis.log").string(),
                                     "--protected-mode",
                                     "no"};
    args.insert(args.end(), extra.begin(), extra.end());
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const pid_t parent = ::getpid();
    const pid_t child = ::fork();
    if (child == 0) {
      // Dies with the test process, however that ends.
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(1);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    if (child < 0) break;
    // Ready when it answers PING (within 5 s).
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    bool ready = false;
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (::waitpid(child, &status, WNOHANG) == child) break;  // exited: the port was taken?
      try {
        RespClient client(port_);
        if (client.command({"PING"}).text == "PONG") {
          ready = true;
          break;
        }
      } catch (const std::exception&) {
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (ready) {
      pid_ = child;
    } else {
      ::kill(child, SIGKILL);
      ::waitpid(child, nullptr, 0);
      why_ = "redis-server did not start (see " + (directory / "redis.log").string() + ")";
    }
  }
}

RedisServer::~RedisServer() { kill_now(); }

void RedisServer::kill_now() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

RespValue RedisServer::command(const std::vector<std::string>& arguments) {
  RespClient client(port_);
  return client.command(arguments);
}

std::vector<std::string> RedisServer::keys(const std::string& pattern) {
  std::vector<std::string> out;
  for (const RespValue& v : command({"KEYS", pattern}).elements) out.push_back(v.text);
  return out;
}

std::optional<std::string> RedisServer::get(const std::string& key) {
  RespValue v = command({"GET", key});
  if (v.type != RespValue::Type::string) return std::nullopt;
  return v.text;
}

int listen_on_loopback(int& port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address);
  ::listen(fd, 64);
  socklen_t length = sizeof address;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  port = ntohs(address.sin_port);
  return fd;
}

SilentServer::SilentServer() { fd_ = listen_on_loopback(port_); }

SilentServer::~SilentServer() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace zerojit::test
