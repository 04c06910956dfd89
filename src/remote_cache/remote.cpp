// The Redis side of the remote tier: a pool of connections, the failure accounting and
// backoff, and the scripts of the fleet single flight (docs/CACHE.md, "The remote tier").
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <limits>
#include <map>
#include <mutex>
#include <span>
#include <thread>
#include <utility>

#include "disk_cache/impl.hpp"
#include "remote_cache/hiredis.hpp"
#include "zerojit/bytes.hpp"
#include "zerojit/cache_entry.hpp"
#include "zerojit/log.hpp"

namespace zerojit {

namespace detail {

using redis::Connection;
using redis::Failure;
using redis::Outcome;
using redis::Reply;

namespace {

// One round trip per poll, atomic on the server: the entry when there is one (unless the
// caller has just found it bad), else the compile lock when no one holds it, else how long
// the holder's lock has left. STRLEN first, so that an entry over the limit is refused
// without being sent. Reply: {1, bytes} entry | {3, length} entry too large | {2} locked |
// {4, pttl} held by another | {5, ttl} held, but it had no expiry | {0} no entry (no lock
// asked for: token ""). A lock that already holds the caller's token is the caller's ({2}): a
// step sent again over a fresh connection after its first connection died may have run.
// zerojit never makes a lock without an expiry (SET ... PX), so one without is not a live
// holder's (planted, or made persistent by hand): it is given the lock TTL, after which it
// expires unless someone renews it, as a dead holder's lock does; waiting for it costs one TTL,
// not the whole lock wait.
// KEYS: entry, lock. ARGV: max bytes, token, ttl ms, "1" to skip the entry.
constexpr std::string_view kObtainScript = R"lua(
if ARGV[4] ~= '1' then
  local n = redis.call('STRLEN', KEYS[1])
  if n > tonumber(ARGV[1]) then return {3, n} end
  if n > 0 then return {1, redis.call('GET', KEYS[1])} end
end
if ARGV[2] == '' then return {0} end
if redis.call('SET', KEYS[2], ARGV[2], 'NX', 'PX', ARGV[3]) then return {2} end
if redis.call('GET', KEYS[2]) == ARGV[2] then return {2} end
local left = redis.call('PTTL', KEYS[2])
if left == -1 then
  redis.call('PEXPIRE', KEYS[2], ARGV[3])
  return {5, tonumber(ARGV[3])}
end
return {4, left}
)lua";
// Compare-and-act on the lock: only its holder (who knows the token) renews or releases it.
constexpr std::string_view kRenewScript = R"lua(
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
)lua";
constexpr std::string_view kReleaseScript = R"lua(
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
)lua";

// What a reply may hold beyond the entry itself: an array header, a status integer, lengths.
constexpr std::uint64_t kReplyFraming = 4096;

std::string seconds(std::chrono::milliseconds ms) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.1f", static_cast<double>(ms.count()) / 1000.0);
  return buffer;
}

}  // namespace

struct RemoteCacheImpl {
  RemoteCacheOptions options;
  RedisUrl url;
  std::string password;
  std::string shown;  // the redacted URL
  redis::ConnectionSettings connection_settings;

  std::mutex pool_mutex;
  std::vector<std::unique_ptr<Connection>> idle;

  std::atomic<std::uint64_t> hits{0}, misses{0}, bad_entries{0}, published{0}, too_large{0},
      errors{0}, timeouts{0}, lock_waits{0}, lock_wait_timeouts{0}, backoffs{0}, skipped{0},
      host_code_refused{0};

  std::mutex state_mutex;
  int consecutive_failures = 0;
  std::chrono::steady_clock::time_point backoff_until{};
  bool disabled = false;
  bool error_reported = false;
  bool too_large_reported = false;
  bool unexpiring_reported = false;

  // Locks held by this process, renewed by one thread while any is held.
  std::mutex renew_mutex;
  std::condition_variable renew_wake;
  std::map<std::string, std::string> held;  // lock key -> token
  std::thread renewer;
  bool stopping = false;
  std::atomic<std::uint64_t> token_counter{0};

  explicit RemoteCacheImpl(RemoteCacheOptions o) : options(std::move(o)) {
    url = parse_redis_url(options.url, options.url_source);
    connection_settings.connect_timeout = options.connect_timeout;
    connection_settings.command_timeout = options.command_timeout;
    connection_settings.tls_ca_file = options.tls_ca_file;
    // An entry and its framing (the obtain script's array around it); nothing else replied
    // comes near it.
    constexpr std::uint64_t kLargest = std::numeric_limits<std::uint64_t>::max();
    connection_settings.max_reply_bytes = options.max_entry_bytes > kLargest - kReplyFraming
                                              ? kLargest
                                              : options.max_entry_bytes + kReplyFraming;
    password = options.password ? *options.password : url.password;
    if (options.password && !options.password->empty()) url.password = *options.password;
    shown = url.redacted();
  }

  ~RemoteCacheImpl() {
    {
      std::lock_guard lock(renew_mutex);
      stopping = true;
    }
    renew_wake.notify_all();
    if (renewer.joinable()) renewer.join();
  }

  void warn(const std::string& text) const {
    const std::string line = "remote cache " + shown + ": " + text;
    if (options.warning_sink) {
      options.warning_sink("zerojit remote-cache: " + line);
    } else {
      log_warning("remote-cache", line);
    }
  }

  std::string key(std::string_view kind, const ProgramIdentity& identity) const {
    return options.prefix + ":" + std::string(kind) + ":{" + identity.hex() + "}";
  }

  void record_failure(const Outcome& outcome) {
    errors.fetch_add(1, std::memory_order_relaxed);
    if (outcome.failure == Failure::timeout) timeouts.fetch_add(1, std::memory_order_relaxed);
    std::string message;
    {
      std::lock_guard lock(state_mutex);
      if (outcome.failure == Failure::misconfigured) {
        if (disabled) return;
        disabled = true;
        message = outcome.error +
                  "; the remote cache is not used by this process (kernels are "
                  "compiled or found on disk as without it)";
      } else {
        ++consecutive_failures;
        if (!error_reported) {
          error_reported = true;
          message = outcome.error + "; compiling here instead (further errors are counted)";
        }
        // Operations already in flight when a backoff starts fail too; they do not start
        // another one.
        const auto now = std::chrono::steady_clock::now();
        if (consecutive_failures >= options.failures_before_backoff && now >= backoff_until) {
          backoff_until = now + options.backoff;
          backoffs.fetch_add(1, std::memory_order_relaxed);
          message += (message.empty() ? "" : "; ") + std::to_string(consecutive_failures) +
                     " operations in a row failed (last: " + outcome.error +
                     "); not asking it for " + seconds(options.backoff) + " s";
        }
      }
    }
    if (!message.empty()) warn(message);
  }

  // One command through a pooled connection, with the failure accounting. It ends within the
  // command timeout on a pooled connection, and within the connect timeout plus the command
  // timeout when it opens one, whatever the server sends (Connection::command).
  Outcome run(const std::vector<std::string_view>& arguments) {
    {
      std::lock_guard lock(state_mutex);
      if (disabled || std::chrono::steady_clock::now() < backoff_until) {
        skipped.fetch_add(1, std::memory_order_relaxed);
        Outcome out;
        out.failure = Failure::skipped;
        out.error = disabled ? "disabled" : "backing off";
        return out;
      }
    }
    const auto start = redis::Clock::now();
    std::unique_ptr<Connection> connection;
    {
      std::lock_guard lock(pool_mutex);
      if (!idle.empty()) {
        connection = std::move(idle.back());
        idle.pop_back();
      }
    }
    Outcome outcome;
    if (connection) {
      outcome = connection->command(arguments, start + options.command_timeout);
      if (outcome.failure == Failure::io) {
        // A pooled connection the server closed while it sat idle (a restart, an idle
        // timeout): the others in the pool are as old, so they go too, and the command is
        // sent once more on a fresh connection before anything counts as a failure. (Every
        // command here may run twice: reads, SET of the same bytes, and compare-and-act
        // scripts; see kObtainScript.)
        std::lock_guard lock(pool_mutex);
        idle.clear();
        connection.reset();
      }
    }
    if (!connection) {
      redis::Clock::time_point deadline;
      connection = Connection::open(url, password, connection_settings,
                                    start + options.connect_timeout + options.command_timeout,
                                    deadline, outcome);
      if (!connection) {
        record_failure(outcome);
        return outcome;
      }
      outcome = connection->command(arguments, deadline);
    }
    if (!outcome.ok()) {
      record_failure(outcome);  // the connection is broken: dropped
      return outcome;
    }
    {
      std::lock_guard lock(pool_mutex);
      idle.push_back(std::move(connection));
    }
    if (outcome.reply.type == Reply::Type::error) {
      const std::string& text = outcome.reply.text;
      const bool refused =
          text.starts_with("NOAUTH") || text.starts_with("WRONGPASS") || text.starts_with("NOPERM");
      outcome.failure = refused ? Failure::misconfigured : Failure::server;
      outcome.error = "the server refused " + std::string(arguments.front()) + ": " + text;
      record_failure(outcome);
      return outcome;
    }
    std::lock_guard lock(state_mutex);
    consecutive_failures = 0;
    return outcome;
  }

  Outcome obtain_step(const ProgramIdentity& identity, const std::string& token, bool skip_entry) {
    const std::string entry = key("entry", identity), lock = key("lock", identity);
    const std::string limit = std::to_string(options.max_entry_bytes);
    const std::string ttl = std::to_string(options.lock_ttl.count());
    return run(
        {"EVAL", kObtainScript, "2", entry, lock, limit, token, ttl, skip_entry ? "1" : "0"});
  }

  // Whether a sound entry may be taken: host code only where the deployment opts in. A refused
  // one is counted (not as a hit) and reported once per identity.
  bool may_take(const CompiledArtifact& artifact) {
    if (options.host_code || !entry_kind(artifact.language).holds_host_code) return true;
    host_code_refused.fetch_add(1, std::memory_order_relaxed);
    warn("not loading " + artifact.kernel_name + " [" + artifact.key_text +
         "] from the remote cache: it is host code (a " +
         std::string(entry_kind(artifact.language).compiler) +
         " object), which is taken from Redis only with ZEROJIT_REMOTE_CACHE_HOST_CODE=1; "
         "compiling it here");
    return false;
  }

  // The verified artifact of a {1, bytes} reply, or nothing (counted and reported as bad, or
  // as refused host code: `refused` is then set).
  std::optional<CompiledArtifact> verify(const ProgramIdentity& identity, const std::string& bytes,
                                         bool* refused = nullptr) {
    DecodedEntry decoded = decode_entry(
        std::span(reinterpret_cast<const std::byte*>(bytes.data()), bytes.size()), &identity);
    if (decoded.ok() && !may_take(*decoded.artifact)) {
      if (refused != nullptr) *refused = true;
      return std::nullopt;
    }
    if (decoded.ok()) {
      hits.fetch_add(1, std::memory_order_relaxed);
      return std::move(decoded.artifact);
    }
    bad_entries.fetch_add(1, std::memory_order_relaxed);
    warn("bad entry " + key("entry", identity) + " (" + std::string(to_string(decoded.problem)) +
         "): " + decoded.detail + "; not loaded; it is compiled again and replaced");
    return std::nullopt;
  }

  void refuse_large(const ProgramIdentity& identity, long long length, const char* what) {
    too_large.fetch_add(1, std::memory_order_relaxed);
    bool first = false;
    {
      std::lock_guard lock(state_mutex);
      first = !std::exchange(too_large_reported, true);
    }
    if (first) {
      warn(std::string(what) + " " + key("entry", identity) + " is " +
           disk::human_bytes(static_cast<std::uint64_t>(length)) + ", over the entry limit of " +
           disk::human_bytes(options.max_entry_bytes) +
           " (ZEROJIT_REMOTE_CACHE_MAX_ENTRY); refused (further ones are counted)");
    }
  }

  void report_unexpiring(const std::string& lock_key) {
    bool first = false;
    {
      std::lock_guard lock(state_mutex);
      first = !std::exchange(unexpiring_reported, true);
    }
    if (first) {
      warn("the compile lock " + lock_key +
           " had no expiry, so no zerojit process holds it (a key planted or made persistent "
           "by hand); it was given the lock TTL of " +
           seconds(options.lock_ttl) +
           " s (ZEROJIT_REMOTE_CACHE_LOCK_TTL_MS), after which it is taken over (further ones "
           "are treated alike, not reported)");
    }
  }

  void hold(const std::string& lock_key, const std::string& token) {
    std::lock_guard lock(renew_mutex);
    held[lock_key] = token;
    if (!renewer.joinable()) renewer = std::thread([this] { renew_loop(); });
    renew_wake.notify_all();
  }

  void release(const std::string& lock_key, const std::string& token) noexcept {
    try {
      {
        std::lock_guard lock(renew_mutex);
        if (auto it = held.find(lock_key); it != held.end() && it->second == token) held.erase(it);
      }
      run({"EVAL", kReleaseScript, "1", lock_key, token});
    } catch (...) {
      // Out of memory: the lock then expires by itself within its TTL.
    }
  }

  // Renews every held lock each third of its expiry, so that a long compile keeps it and a
  // dead process (no renewals) loses it after at most one expiry.
  // A renewal that finds the lock gone counts as lost only if this process still holds it
  // under that token: one released (or released and taken again) since the snapshot is not.
  void renew_loop() noexcept {
    std::unique_lock lock(renew_mutex);
    while (!stopping) {
      renew_wake.wait_for(lock, options.lock_ttl / 3);
      if (stopping) break;
      try {
        const std::map<std::string, std::string> now = held;
        lock.unlock();
        for (const auto& [lock_key, token] : now) {
          const std::string ttl = std::to_string(options.lock_ttl.count());
          const Outcome done = run({"EVAL", kRenewScript, "1", lock_key, token, ttl});
          if (done.ok() && done.reply.type == Reply::Type::integer && done.reply.integer == 0) {
            bool lost = false;
            {
              std::lock_guard relock(renew_mutex);
              if (auto it = held.find(lock_key); it != held.end() && it->second == token) {
                held.erase(it);
                lost = true;
              }
            }
            if (lost) {
              warn("lost the compile lock " + lock_key +
                   " (it expired before it was renewed); another host may compile it too");
            }
          }
        }
      } catch (...) {
        // Out of memory: this pass is given up; the next one tries again.
      }
      if (!lock.owns_lock()) lock.lock();
    }
  }
};

}  // namespace detail

namespace {

class HeldRemoteLock final : public RemoteLock {
 public:
  HeldRemoteLock(std::shared_ptr<detail::RemoteCacheImpl> impl, std::string key, std::string token)
      : impl_(std::move(impl)), key_(std::move(key)), token_(std::move(token)) {}
  ~HeldRemoteLock() override { impl_->release(key_, token_); }

 private:
  std::shared_ptr<detail::RemoteCacheImpl> impl_;
  std::string key_, token_;
};

}  // namespace

RemoteCache::RemoteCache(RemoteCacheOptions options)
    : impl_(std::make_shared<detail::RemoteCacheImpl>(std::move(options))) {}

RemoteCache::~RemoteCache() = default;

std::string RemoteCache::describe() const {
  return "redis cache " + impl_->shown + " (prefix " + impl_->options.prefix + ")";
}

const RemoteCacheOptions& RemoteCache::options() const { return impl_->options; }
const RedisUrl& RemoteCache::url() const { return impl_->url; }

RemoteProbe RemoteCache::probe() {
  RemoteProbe probe;
  const detail::redis::Outcome done = impl_->run({"PING"});
  if (done.ok()) return probe;
  probe.status = done.failure == detail::redis::Failure::misconfigured
                     ? RemoteProbe::Status::misconfigured
                     : RemoteProbe::Status::unreachable;
  probe.message = "remote cache " + impl_->shown + ": " + done.error;
  return probe;
}

std::optional<CompiledArtifact> RemoteCache::fetch(const ProgramIdentity& identity) {
  detail::RemoteCacheImpl& s = *impl_;
  const detail::redis::Outcome done = s.obtain_step(identity, "", false);
  if (!done.ok() || done.reply.elements.empty()) return std::nullopt;
  const auto& e = done.reply.elements;
  if (e[0].integer == 1 && e.size() == 2) return s.verify(identity, e[1].text);
  if (e[0].integer == 3 && e.size() == 2) {
    s.refuse_large(identity, e[1].integer, "entry");
    return std::nullopt;
  }
  s.misses.fetch_add(1, std::memory_order_relaxed);
  return std::nullopt;
}

bool RemoteCache::store(const CompiledArtifact& artifact) noexcept {
  detail::RemoteCacheImpl& s = *impl_;
  try {
    if (!s.options.host_code && entry_kind(artifact.language).holds_host_code) return false;
    const std::string bytes = encode_entry(artifact);
    if (bytes.size() > s.options.max_entry_bytes) {
      s.refuse_large(artifact.identity, static_cast<long long>(bytes.size()), "not sending");
      return false;
    }
    const detail::redis::Outcome done = s.run({"SET", s.key("entry", artifact.identity), bytes});
    if (!done.ok()) return false;
    s.published.fetch_add(1, std::memory_order_relaxed);
    return true;
  } catch (...) {
    return false;  // out of memory: the kernel is used either way
  }
}

RemoteCache::Obtained RemoteCache::obtain(const ProgramIdentity& identity) {
  detail::RemoteCacheImpl& s = *impl_;
  Obtained obtained;
  // Unique per holder across the fleet: host name, process, counter, clock.
  char host[64] = {};
  ::gethostname(host, sizeof host - 1);
  const std::string token =
      std::string(host) + "-" + std::to_string(::getpid()) + "-" +
      std::to_string(s.token_counter.fetch_add(1)) + "-" +
      std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + s.options.lock_wait;
  auto pause = std::chrono::milliseconds(5);
  bool first = true, waited = false, bad_seen = false;
  bool skip_entry = false;
  while (true) {
    const detail::redis::Outcome done = s.obtain_step(identity, token, skip_entry);
    skip_entry = false;
    if (!done.ok() || done.reply.elements.empty()) return obtained;  // compile here
    const auto& e = done.reply.elements;
    long long status = e[0].integer;
    if (status == 1 && e.size() == 2) {
      if (!bad_seen) {
        bool refused = false;
        if (auto artifact = s.verify(identity, e[1].text, &refused)) {
          obtained.artifact = std::move(artifact);
          return obtained;
        }
        if (refused) return obtained;  // host code not taken: compile here, without the lock
        bad_seen = true;
      } else {
        DecodedEntry again = decode_entry(
            std::span(reinterpret_cast<const std::byte*>(e[1].text.data()), e[1].text.size()),
            &identity);
        if (again.ok() && !s.may_take(*again.artifact)) return obtained;
        if (again.ok()) {
          s.hits.fetch_add(1, std::memory_order_relaxed);
          obtained.artifact = std::move(again.artifact);
          return obtained;
        }
      }
      skip_entry = true;  // bad: ask again for the lock alone
      if (std::chrono::steady_clock::now() >= deadline) return obtained;  // a server that insists
      continue;
    }
    if (status == 3) {
      if (!bad_seen) s.refuse_large(identity, e.size() > 1 ? e[1].integer : 0, "entry");
      bad_seen = true;
      skip_entry = true;
      if (std::chrono::steady_clock::now() >= deadline) return obtained;
      continue;
    }
    if (first && !bad_seen) s.misses.fetch_add(1, std::memory_order_relaxed);
    first = false;
    if (status == 5) {
      s.report_unexpiring(s.key("lock", identity));
      status = 4;  // an ordinary held lock from now on, expiring after the TTL
    }
    if (status == 2) {
      const std::string lock_key = s.key("lock", identity);
      s.hold(lock_key, token);
      obtained.lock = std::make_unique<HeldRemoteLock>(impl_, lock_key, token);
      return obtained;
    }
    if (status != 4) return obtained;
    if (!waited) {
      waited = true;
      s.lock_waits.fetch_add(1, std::memory_order_relaxed);
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      s.lock_wait_timeouts.fetch_add(1, std::memory_order_relaxed);
      s.warn("waited " +
             detail::seconds(std::chrono::duration_cast<std::chrono::milliseconds>(now - start)) +
             " s for another host to compile identity " + identity.hex() +
             " (ZEROJIT_REMOTE_CACHE_LOCK_WAIT_S); compiling it here instead");
      return obtained;
    }
    // Not past the holder's expiry (plus a little) nor the deadline.
    auto sleep = pause;
    if (e.size() > 1 && e[1].integer > 0) {
      sleep = std::min(sleep, std::chrono::milliseconds(e[1].integer + 5));
    }
    sleep = std::min(sleep, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now) +
                                std::chrono::milliseconds(1));
    std::this_thread::sleep_for(sleep);
    pause = std::min(pause * 2, std::chrono::milliseconds(100));
  }
}

RemoteCacheCounters RemoteCache::counters() const {
  const detail::RemoteCacheImpl& s = *impl_;
  RemoteCacheCounters c;
  c.hits = s.hits.load();
  c.misses = s.misses.load();
  c.bad_entries = s.bad_entries.load();
  c.published = s.published.load();
  c.too_large = s.too_large.load();
  c.errors = s.errors.load();
  c.timeouts = s.timeouts.load();
  c.lock_waits = s.lock_waits.load();
  c.lock_wait_timeouts = s.lock_wait_timeouts.load();
  c.backoffs = s.backoffs.load();
  c.skipped = s.skipped.load();
  c.host_code_refused = s.host_code_refused.load();
  return c;
}

}  // namespace zerojit
