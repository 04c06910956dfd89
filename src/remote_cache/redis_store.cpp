// zerojit::RedisStore (include/zerojit/redis_store.hpp): one connection, opened on first use and
// again after it breaks, shared by the calling threads under a mutex (a rank's main thread and
// its watch thread).
#include "zerojit/redis_store.hpp"

#include <algorithm>
#include <charconv>
#include <mutex>
#include <thread>

#include "remote_cache/hiredis.hpp"

namespace zerojit {

namespace detail {

using redis::Clock;
using redis::Connection;
using redis::Outcome;
using redis::Reply;

// A rank's record names every warmed key with its identity: a few megabytes for the largest
// manifests. Anything longer is not a record.
constexpr std::uint64_t kLargestValue = std::uint64_t{256} << 20;

struct RedisStoreImpl {
  RemoteCacheOptions options;
  std::chrono::milliseconds wait_timeout;
  RedisUrl url;
  std::string password;
  std::string shown;
  redis::ConnectionSettings settings;
  std::mutex mutex;
  std::unique_ptr<Connection> connection;

  RedisStoreImpl(RemoteCacheOptions o, std::chrono::milliseconds timeout)
      : options(std::move(o)), wait_timeout(timeout) {
    url = parse_redis_url(options.url, options.url_source);
    password = options.password ? *options.password : url.password;
    settings.connect_timeout = options.connect_timeout;
    settings.command_timeout = options.command_timeout;
    settings.tls_ca_file = options.tls_ca_file;
    settings.max_reply_bytes = kLargestValue;
    shown = url.redacted();
  }

  std::string describe() const {
    return "redis store " + shown + " (prefix " + options.prefix + ")";
  }

  std::string stored(std::string_view key) const {
    return options.prefix + ":store:" + std::string(key);
  }

  [[noreturn]] void fail(std::string_view command, std::string_view key,
                         const std::string& why) const {
    throw Error("zerojit.RedisStore " + shown + ": " + std::string(command) + " of key '" +
                std::string(key) + "' failed: " + why);
  }

  // One command; `repeatable` when sending it twice does no harm (every command but INCRBY):
  // such a command that fails on a connection opened earlier is sent once more on a fresh one,
  // since the server may have closed the old one while it sat idle.
  Reply run(const std::vector<std::string_view>& arguments, std::string_view key, bool repeatable) {
    std::lock_guard lock(mutex);
    const bool reused = connection != nullptr;
    Outcome outcome = send(arguments);
    if (!outcome.ok() && reused && repeatable && outcome.failure == redis::Failure::io) {
      outcome = send(arguments);
    }
    if (!outcome.ok()) fail(arguments.front(), key, outcome.error);
    if (outcome.reply.type == Reply::Type::error) {
      fail(arguments.front(), key, "the server replied " + outcome.reply.text);
    }
    return std::move(outcome.reply);
  }

  // Under the mutex. A connection whose command failed is dropped (it is broken).
  Outcome send(const std::vector<std::string_view>& arguments) {
    Outcome outcome;
    Clock::time_point deadline = Clock::now() + options.command_timeout;
    if (connection == nullptr) {
      connection = Connection::open(
          url, password, settings, Clock::now() + options.connect_timeout + options.command_timeout,
          deadline, outcome);
      if (connection == nullptr) return outcome;
    }
    outcome = connection->command(arguments, deadline);
    if (!outcome.ok()) connection.reset();
    return outcome;
  }

  std::optional<std::string> read(std::string_view key) {
    const std::string name = stored(key);
    Reply reply = run({"GET", name}, key, true);
    if (reply.type == Reply::Type::nil) return std::nullopt;
    if (reply.type != Reply::Type::string) fail("GET", key, "the reply is not a string");
    return std::move(reply.text);
  }

  std::int64_t integer(std::string_view key, const std::string& text) const {
    std::int64_t value = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error != std::errc() || end != text.data() + text.size()) {
      fail("GET", key, "the value '" + text.substr(0, 40) + "' is not a counter");
    }
    return value;
  }

  std::vector<std::string> missing(const std::vector<std::string>& keys) {
    std::vector<std::string> out;
    for (const std::string& key : keys) {
      const std::string name = stored(key);
      if (run({"EXISTS", name}, key, true).integer == 0) out.push_back(key);
    }
    return out;
  }
};

namespace {

// Polls `ready` until it holds or `timeout` passes: 2 ms at first, doubling to 50 ms, so a key
// set soon is seen soon and a long wait costs the server 20 commands a second.
template <typename Ready>
bool poll_until(std::chrono::milliseconds timeout, Ready ready) {
  const auto deadline = Clock::now() + timeout;
  std::chrono::milliseconds pause(2);
  while (!ready()) {
    const auto now = Clock::now();
    if (now >= deadline) return false;
    std::this_thread::sleep_for(
        std::min<Clock::duration>(pause, std::chrono::ceil<Clock::duration>(deadline - now)));
    pause = std::min(pause * 2, std::chrono::milliseconds(50));
  }
  return true;
}

std::string joined(const std::vector<std::string>& keys) {
  std::string out;
  for (const std::string& key : keys) out += (out.empty() ? "'" : ", '") + key + "'";
  return out;
}

}  // namespace

}  // namespace detail

RedisStore::RedisStore(RemoteCacheOptions options, std::chrono::milliseconds wait_timeout)
    : impl_(std::make_unique<detail::RedisStoreImpl>(std::move(options), wait_timeout)) {}

RedisStore::~RedisStore() = default;

std::string RedisStore::describe() const { return impl_->describe(); }

void RedisStore::set(std::string_view key, std::string_view value) {
  const std::string name = impl_->stored(key);
  impl_->run({"SET", name, value}, key, true);
}

std::optional<std::string> RedisStore::read(std::string_view key) { return impl_->read(key); }

std::string RedisStore::get(std::string_view key) {
  std::optional<std::string> value;
  if (!detail::poll_until(impl_->wait_timeout,
                          [&] { return (value = impl_->read(key)) != std::nullopt; })) {
    throw StoreTimeout("zerojit.RedisStore " + impl_->shown + ": key '" + std::string(key) +
                       "' not set within " + std::to_string(impl_->wait_timeout.count()) + " ms");
  }
  return std::move(*value);
}

std::int64_t RedisStore::add(std::string_view key, std::int64_t amount) {
  if (amount == 0) {
    const std::optional<std::string> value = impl_->read(key);
    return value ? impl_->integer(key, *value) : 0;
  }
  const std::string name = impl_->stored(key), text = std::to_string(amount);
  const detail::Reply reply = impl_->run({"INCRBY", name, text}, key, false);
  if (reply.type != detail::Reply::Type::integer) {
    impl_->fail("INCRBY", key, "the reply is not an integer");
  }
  return reply.integer;
}

bool RedisStore::check(const std::vector<std::string>& keys) {
  if (keys.empty()) return true;
  // One round trip whatever the number of keys: EXISTS counts each key named that is set.
  std::vector<std::string> names;
  names.reserve(keys.size());
  for (const std::string& key : keys) names.push_back(impl_->stored(key));
  std::vector<std::string_view> arguments{"EXISTS"};
  arguments.insert(arguments.end(), names.begin(), names.end());
  const detail::Reply reply = impl_->run(arguments, keys.front(), true);
  return reply.integer == static_cast<long long>(keys.size());
}

void RedisStore::wait(const std::vector<std::string>& keys,
                      std::optional<std::chrono::milliseconds> timeout) {
  const auto bound = timeout.value_or(impl_->wait_timeout);
  if (detail::poll_until(bound, [&] { return check(keys); })) return;
  const std::vector<std::string> missing = impl_->missing(keys);
  if (missing.empty()) return;  // set just now
  throw StoreTimeout("zerojit.RedisStore " + impl_->shown + ": keys not set within " +
                     std::to_string(bound.count()) + " ms: " + detail::joined(missing));
}

bool RedisStore::remove(std::string_view key) {
  const std::string name = impl_->stored(key);
  return impl_->run({"DEL", name}, key, true).integer > 0;
}

}  // namespace zerojit
