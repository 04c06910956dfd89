// hiredis, loaded with dlopen at first use (docs/DESIGN.md, "Loading at run time"): neither
// the library nor the tool links it, so both start where it is missing, and only a configured
// remote reports that it is. Replies are copied out of hiredis's structs into Reply, so that
// nothing else depends on its ABI.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "zerojit/remote_cache.hpp"

namespace zerojit::detail::redis {

struct Reply {
  enum class Type { string, array, integer, nil, status, error, other };
  Type type = Type::nil;
  long long integer = 0;
  std::string text;  // string, status, error
  std::vector<Reply> elements;
};

enum class Failure {
  none,
  io,             // connection refused or lost, protocol error
  timeout,        // connect or command timeout
  server,         // an error reply to a command (the connection stays usable)
  misconfigured,  // no library, no TLS support, credentials or database refused
  skipped,        // not tried: the tier is backing off or disabled
};

struct Outcome {
  Failure failure = Failure::none;
  std::string error;  // why, when failure != none
  Reply reply;
  bool ok() const { return failure == Failure::none; }
};

// Why hiredis (or its TLS part) cannot be used, or empty when it can.
std::string library_problem(bool tls);

using Clock = std::chrono::steady_clock;

struct ConnectionSettings {
  std::chrono::milliseconds connect_timeout{250};
  std::chrono::milliseconds command_timeout{1000};
  std::string tls_ca_file;
  // The longest reply accepted (an entry and its framing); longer ones are refused unread.
  std::uint64_t max_reply_bytes = 0;
};

class Connection {
 public:
  // Connects (TCP, then TLS) within the connect timeout, then authenticates and selects the
  // database within the command timeout, neither past `limit`; `command_deadline` is then
  // that second deadline, for the command the connection was opened for. On failure returns
  // nullptr with `outcome` saying why.
  static std::unique_ptr<Connection> open(const RedisUrl& url, const std::string& password,
                                          const ConnectionSettings& settings,
                                          Clock::time_point limit,
                                          Clock::time_point& command_deadline, Outcome& outcome);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // One command, arguments as binary-safe strings, sent and answered by `deadline` (a timeout
  // failure otherwise, however the server trickles), its reply checked against the limits
  // before it is parsed. After an io or timeout failure the connection is broken and must be
  // dropped.
  Outcome command(const std::vector<std::string_view>& arguments, Clock::time_point deadline);

 private:
  Connection(void* context, std::uint64_t max_reply_bytes)
      : context_(context), max_reply_bytes_(max_reply_bytes) {}
  int fd() const;
  Outcome exchange(const std::vector<std::string_view>& arguments);
  void* context_;
  std::uint64_t max_reply_bytes_;
};

}  // namespace zerojit::detail::redis
