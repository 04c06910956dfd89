// The remote tier's settings: the URL (parsed, and printed only with its password hidden) and
// the environment variables (docs/CACHE.md, "The remote tier").
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "environment.hpp"
#include "zerojit/bytes.hpp"
#include "zerojit/error.hpp"
#include "zerojit/remote_cache.hpp"

namespace zerojit {
namespace {

// The text with anything between "://" and the last '@' of the authority replaced, for
// messages about a URL that did not parse (it may still hold a password).
std::string hide_userinfo(std::string_view text) {
  const std::size_t scheme = text.find("://");
  if (scheme == std::string_view::npos) return std::string(text.substr(0, 200));
  const std::size_t start = scheme + 3;
  const std::size_t at = text.rfind('@');
  if (at == std::string_view::npos || at < start) return std::string(text.substr(0, 200));
  return std::string(text.substr(0, start)) + "***" + std::string(text.substr(at, 200));
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::optional<std::string> percent_decode(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out += text[i];
      continue;
    }
    if (i + 2 >= text.size()) return std::nullopt;
    const int high = hex_digit(text[i + 1]), low = hex_digit(text[i + 2]);
    if (high < 0 || low < 0) return std::nullopt;
    out += static_cast<char>(high * 16 + low);
    i += 2;
  }
  return out;
}

std::optional<long long> whole_number(std::string_view text, long long low, long long high) {
  if (text.empty() || text.size() > 18) return std::nullopt;
  long long value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + (c - '0');
  }
  if (value < low || value > high) return std::nullopt;
  return value;
}

}  // namespace

std::string RedisUrl::redacted() const {
  std::string out = transport == Transport::tcp   ? "redis://"
                    : transport == Transport::tls ? "rediss://"
                                                  : "unix://";
  if (!user.empty() || !password.empty()) {
    out += user;
    if (!password.empty()) out += ":***";
    out += "@";
  }
  if (transport == Transport::unix_socket) {
    out += path;
    if (database != 0) out += "?db=" + std::to_string(database);
  } else {
    out += (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" +
           std::to_string(port) + "/" + std::to_string(database);
  }
  return out;
}

RedisUrl parse_redis_url(std::string_view text, std::string_view source) {
  const std::string shown = hide_userinfo(text);
  auto fail = [&](const std::string& why) -> Error {
    return Error(std::string(source) + "=\"" + shown + "\" is not a Redis URL: " + why +
                 " (the forms are redis://[user:password@]host[:port][/db], rediss://... for "
                 "TLS, unix://[user:password@]/path[?db=N])");
  };
  RedisUrl url;
  std::string_view rest;
  if (text.starts_with("redis://")) {
    rest = text.substr(8);
  } else if (text.starts_with("rediss://")) {
    url.transport = RedisUrl::Transport::tls;
    rest = text.substr(9);
  } else if (text.starts_with("unix://")) {
    url.transport = RedisUrl::Transport::unix_socket;
    rest = text.substr(7);
  } else {
    throw fail(text.empty() ? "it is empty" : "it must start with redis://, rediss:// or unix://");
  }
  // user:password@ ends at the last '@' before the path (a password may hold '@' only
  // percent-encoded, but a raw one is still taken whole).
  const std::size_t slash =
      url.transport == RedisUrl::Transport::unix_socket
          ? rest.find('/')
          : rest.find('/', rest.rfind('@') == std::string_view::npos ? 0 : rest.rfind('@'));
  const std::string_view authority_part = rest.substr(0, slash);
  const std::size_t at = authority_part.rfind('@');
  if (at != std::string_view::npos) {
    const std::string_view userinfo = authority_part.substr(0, at);
    const std::size_t colon = userinfo.find(':');
    const auto user = percent_decode(userinfo.substr(0, colon));
    const auto password = colon == std::string_view::npos
                              ? std::optional<std::string>(std::string())
                              : percent_decode(userinfo.substr(colon + 1));
    if (!user || !password) throw fail("a bad %-escape in the user or password");
    url.user = *user;
    url.password = *password;
  }
  const std::string_view host_port =
      at == std::string_view::npos ? authority_part : authority_part.substr(at + 1);
  const std::string_view tail =
      slash == std::string_view::npos ? std::string_view{} : rest.substr(slash);
  if (url.transport == RedisUrl::Transport::unix_socket) {
    if (!host_port.empty()) throw fail("a unix:// URL names a path, not a host");
    const std::size_t query = tail.find('?');
    url.path = std::string(tail.substr(0, query));
    if (url.path.size() < 2) throw fail("no socket path (unix:///run/redis.sock)");
    if (query != std::string_view::npos) {
      const std::string_view q = tail.substr(query + 1);
      const auto db = q.starts_with("db=") ? whole_number(q.substr(3), 0, 1 << 20) : std::nullopt;
      if (!db) throw fail("the only query is ?db=N, a database number");
      url.database = static_cast<int>(*db);
    }
    return url;
  }
  if (host_port.empty()) throw fail("no host");
  std::string_view port_text;
  if (host_port.front() == '[') {
    const std::size_t close = host_port.find(']');
    if (close == std::string_view::npos) throw fail("an IPv6 host lacks its ']'");
    url.host = std::string(host_port.substr(1, close - 1));
    const std::string_view after = host_port.substr(close + 1);
    if (!after.empty() && after.front() != ':') throw fail("text after the IPv6 host");
    if (!after.empty()) port_text = after.substr(1);
  } else {
    const std::size_t colon = host_port.rfind(':');
    url.host = std::string(host_port.substr(0, colon));
    if (colon != std::string_view::npos) port_text = host_port.substr(colon + 1);
    if (colon != std::string_view::npos && port_text.empty()) throw fail("an empty port");
  }
  if (url.host.empty()) throw fail("no host");
  if (!port_text.empty()) {
    const auto port = whole_number(port_text, 1, 65535);
    if (!port) throw fail("the port \"" + std::string(port_text) + "\" is not in 1..65535");
    url.port = static_cast<int>(*port);
  }
  if (tail.size() > 1) {
    if (tail.find('?') != std::string_view::npos) throw fail("query options are not supported");
    const auto db = whole_number(tail.substr(1), 0, 1 << 20);
    if (!db) throw fail("the database \"" + std::string(tail.substr(1)) + "\" is not a number");
    url.database = static_cast<int>(*db);
  }
  return url;
}

RemoteCacheOptions default_remote_cache_options() {
  RemoteCacheOptions options;
  const auto text = detail::environment_text;
  auto number = [&](const char* name, long long low, long long high) -> std::optional<long long> {
    const char* value = text(name);
    if (value == nullptr) return std::nullopt;
    const auto parsed = whole_number(value, low, high);
    if (!parsed) {
      throw Error(std::string(name) + "=\"" + value + "\" is not a whole number in [" +
                  std::to_string(low) + ", " + std::to_string(high) + "]");
    }
    return parsed;
  };
  if (const char* url = text("ZEROJIT_REMOTE_CACHE")) options.url = url;
  // Empty counts as unset (a template that leaves it blank): the URL's own password, if any.
  if (const char* password = text("ZEROJIT_REMOTE_CACHE_PASSWORD")) options.password = password;
  if (const char* prefix = text("ZEROJIT_REMOTE_CACHE_PREFIX")) {
    for (const char* c = prefix; *c; ++c) {
      if (*c <= ' ' || *c == '{' || *c == '}' || static_cast<unsigned char>(*c) >= 0x7f) {
        throw Error(std::string("ZEROJIT_REMOTE_CACHE_PREFIX=\"") + prefix +
                    "\" may not hold spaces, braces or control characters");
      }
    }
    options.prefix = prefix;
  }
  using ms = std::chrono::milliseconds;
  if (auto v = number("ZEROJIT_REMOTE_CACHE_CONNECT_TIMEOUT_MS", 1, 600000)) {
    options.connect_timeout = ms(*v);
  }
  if (auto v = number("ZEROJIT_REMOTE_CACHE_TIMEOUT_MS", 1, 600000)) {
    options.command_timeout = ms(*v);
  }
  if (const char* size = text("ZEROJIT_REMOTE_CACHE_MAX_ENTRY")) {
    options.max_entry_bytes = parse_byte_size_or_throw(size, "ZEROJIT_REMOTE_CACHE_MAX_ENTRY");
  }
  if (auto v = number("ZEROJIT_REMOTE_CACHE_LOCK_TTL_MS", 100, 3600000)) {
    options.lock_ttl = ms(*v);
  }
  if (auto v = number("ZEROJIT_REMOTE_CACHE_LOCK_WAIT_S", 0, 86400)) {
    options.lock_wait = ms(*v * 1000);
  }
  if (auto v = number("ZEROJIT_REMOTE_CACHE_FAILURES", 1, 1000000)) {
    options.failures_before_backoff = static_cast<int>(*v);
  }
  if (auto v = number("ZEROJIT_REMOTE_CACHE_BACKOFF_S", 0, 86400)) {
    options.backoff = ms(*v * 1000);
  }
  if (const char* ca = text("ZEROJIT_REMOTE_CACHE_TLS_CA")) options.tls_ca_file = ca;
  options.host_code = detail::environment_flag("ZEROJIT_REMOTE_CACHE_HOST_CODE");
  return options;
}

std::string to_json(const RemoteCacheCounters& c) {
  const nlohmann::json out = {{"hits", c.hits},
                              {"misses", c.misses},
                              {"bad_entries", c.bad_entries},
                              {"published", c.published},
                              {"too_large", c.too_large},
                              {"errors", c.errors},
                              {"timeouts", c.timeouts},
                              {"lock_waits", c.lock_waits},
                              {"lock_wait_timeouts", c.lock_wait_timeouts},
                              {"backoffs", c.backoffs},
                              {"skipped", c.skipped},
                              {"host_code_refused", c.host_code_refused}};
  return out.dump();
}

}  // namespace zerojit
