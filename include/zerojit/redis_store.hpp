// A key-value store in Redis for the ranks of a group: zerojit.RedisStore in Python, passed to
// zerojit.RankGroup where an engine has no torch.distributed store at hand, or wants the
// fleet's Redis (docs/PYTHON.md, "Ranks that agree"). It speaks to the server the remote tier
// does, through the same connection code (URL forms, password, TLS, timeouts:
// RemoteCacheOptions), but where the tier turns every failure into "compile here", a store
// that fails throws: a rank that cannot reach its group must say so, not agree with nobody.
//
// Semantics are torch.distributed's store's: set, get (waits until the key is set), add (an
// atomic counter), check and wait. Every wait has a bound (`wait_timeout`, or the call's own),
// and every command the remote tier's command timeout.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "zerojit/error.hpp"
#include "zerojit/ranks.hpp"
#include "zerojit/remote_cache.hpp"

namespace zerojit {

namespace detail {
struct RedisStoreImpl;
}

// What get and wait throw when the keys are not set in time (a TimeoutError in Python, as
// torch.distributed's stores raise).
class StoreTimeout : public Error {
 public:
  using Error::Error;
};

// A RankStore (zerojit/ranks.hpp), so that agree_across_ranks runs over Redis too.
class RedisStore : public RankStore {
 public:
  // Parses options.url (throws zerojit::Error naming options.url_source); connects on first
  // use. Keys live under "<options.prefix>:store:". `wait_timeout`: how long get and wait
  // wait for a key that is not set yet.
  explicit RedisStore(RemoteCacheOptions options,
                      std::chrono::milliseconds wait_timeout = std::chrono::minutes(5));
  ~RedisStore() override;
  RedisStore(const RedisStore&) = delete;
  RedisStore& operator=(const RedisStore&) = delete;

  // "redis store redis://:***@host:6379/0 (prefix zerojit)"
  std::string describe() const;

  // Each throws zerojit::Error naming the store, the command and the key when the server
  // cannot be reached in time or refuses.
  void set(std::string_view key, std::string_view value) override;
  // The value, or std::nullopt when the key is not set (never waits).
  std::optional<std::string> read(std::string_view key) override;
  // The value once the key is set: waits up to wait_timeout, then throws StoreTimeout naming
  // the key.
  std::string get(std::string_view key);
  // Adds `amount` to the integer at `key` (0 when unset) and returns the sum; add(key, 0)
  // reads the counter without creating the key.
  std::int64_t add(std::string_view key, std::int64_t amount) override;
  // Whether every key is set (never waits).
  bool check(const std::vector<std::string>& keys);
  // Returns once every key is set; throws StoreTimeout naming the missing keys after `timeout`
  // (default: wait_timeout).
  void wait(const std::vector<std::string>& keys,
            std::optional<std::chrono::milliseconds> timeout = std::nullopt);
  // Removes the key; false when it was not set.
  bool remove(std::string_view key);

 private:
  std::unique_ptr<detail::RedisStoreImpl> impl_;
};

}  // namespace zerojit
