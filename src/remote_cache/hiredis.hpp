// hiredis, loaded with dlopen at first use (docs/DESIGN.md, "Loading at run time"): neither
// the library nor the tool links it, so both start where it is missing, and only a configured
// remote reports that it is. Replies are copied out of hiredis's structs into Reply, so that
// nothing else depends on its ABI.
#pragma once

#include <chrono>
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

class Connection {
 public:
  // Connects, sets the command timeout, authenticates and selects the database. On failure
  // returns nullptr with `outcome` saying why.
  static std::unique_ptr<Connection> open(const RedisUrl& url, const std::string& password,
                                          std::chrono::milliseconds connect_timeout,
                                          std::chrono::milliseconds command_timeout,
                                          const std::string& tls_ca_file, Outcome& outcome);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // One command, arguments as binary-safe strings. After an io or timeout failure the
  // connection is broken and must be dropped.
  Outcome command(const std::vector<std::string_view>& arguments);

 private:
  explicit Connection(void* context) : context_(context) {}
  void* context_;
};

}  // namespace zerojit::detail::redis
