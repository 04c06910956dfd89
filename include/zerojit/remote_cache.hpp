// The remote tier of the compile cache: entries shared by a fleet through Redis, between the
// disk cache and NVRTC (memory -> disk and read-only layers -> Redis -> compile).
// docs/CACHE.md ("The remote tier") describes the keys, the lock protocol and the failure
// behaviour; docs/DESIGN.md says why hiredis is loaded at run time.
//
// Guarantees: an entry from Redis is the disk cache's entry format, verified (checksum and
// identity) before use and then published to the local disk; a bad one is counted, reported
// and never loaded. Of the hosts needing one identity, one compiles (a lock in Redis with an
// expiry, renewed while compiling, released only by its holder) and the others wait for its
// entry, within a bound. Every Redis operation has a timeout; Redis trouble is a warning and a
// counter, never a failure: the kernel is compiled here instead.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "zerojit/artifact_store.hpp"
#include "zerojit/compiler.hpp"

namespace zerojit {

namespace detail {
struct RemoteCacheImpl;
}

// A parsed ZEROJIT_REMOTE_CACHE / --remote-cache URL.
struct RedisUrl {
  enum class Transport { tcp, tls, unix_socket };
  Transport transport = Transport::tcp;
  std::string host;  // tcp, tls
  int port = 6379;
  std::string path;  // unix_socket
  std::string user;  // empty: the default user (AUTH with the password alone)
  std::string password;
  int database = 0;
  // The URL with the password replaced by "***": the only form ever printed.
  std::string redacted() const;
};

// redis://[user:password@]host[:port][/db], rediss://... (TLS), unix:///path[?db=N]
// (user and password percent-decoded). Throws zerojit::Error naming `source` (the option or
// variable the text came from) and saying what is wrong; the message never holds the password.
RedisUrl parse_redis_url(std::string_view text, std::string_view source);

struct RemoteCacheOptions {
  std::string url;  // see parse_redis_url
  // Where the URL came from, for messages ("--remote-cache", "ZEROJIT_REMOTE_CACHE").
  std::string url_source = "ZEROJIT_REMOTE_CACHE";
  // Replaces the URL's password when set (ZEROJIT_REMOTE_CACHE_PASSWORD), so that the secret
  // need not appear in a command line.
  std::optional<std::string> password;
  // Every key is "<prefix>:entry:{<identity>}" or "<prefix>:lock:{<identity>}": one namespace
  // per deployment.
  std::string prefix = "zerojit";
  std::chrono::milliseconds connect_timeout{250};
  std::chrono::milliseconds command_timeout{1000};
  // Entries larger than this are neither sent nor loaded.
  std::uint64_t max_entry_bytes = std::uint64_t{64} << 20;
  // The compile lock's expiry; its holder renews it every third of this while compiling, so
  // a holder that dies frees the identity after at most this long.
  std::chrono::milliseconds lock_ttl{10000};
  // The longest wait for another host's compile of an identity before compiling it here.
  std::chrono::milliseconds lock_wait{60000};
  // After this many consecutive failed operations the tier is left out for `backoff`.
  int failures_before_backoff = 3;
  std::chrono::milliseconds backoff{30000};
  // TLS (rediss://): a CA bundle file (ZEROJIT_REMOTE_CACHE_TLS_CA); empty: the system's.
  std::string tls_ca_file;
  // Whether entries that hold host code (an exported CuTeDSL object: loading one runs it) are
  // taken from and sent to Redis (ZEROJIT_REMOTE_CACHE_HOST_CODE=1). Off: any host of the fleet,
  // or anyone who can reach the server, could plant code (docs/CACHE.md, "Host code").
  bool host_code = false;
  // Where warnings go (one line each); default: zerojit's log (component "remote-cache").
  std::function<void(std::string_view)> warning_sink;
};

// From the environment: ZEROJIT_REMOTE_CACHE (empty url when unset), ..._PASSWORD, ..._PREFIX,
// ..._CONNECT_TIMEOUT_MS, ..._TIMEOUT_MS, ..._MAX_ENTRY (a size), ..._LOCK_TTL_MS,
// ..._LOCK_WAIT_S, ..._FAILURES, ..._BACKOFF_S, ..._TLS_CA. Throws zerojit::Error naming the
// variable when one is malformed.
RemoteCacheOptions default_remote_cache_options();

struct RemoteCacheCounters {
  std::uint64_t hits = 0;                // verified entries fetched
  std::uint64_t misses = 0;              // lookups that found no entry
  std::uint64_t bad_entries = 0;         // entries that failed verification (never loaded)
  std::uint64_t published = 0;           // entries sent
  std::uint64_t too_large = 0;           // entries over max_entry_bytes, not sent or not loaded
  std::uint64_t errors = 0;              // failed operations (connection, protocol, server errors)
  std::uint64_t timeouts = 0;            // operations that passed a timeout (counted in errors too)
  std::uint64_t lock_waits = 0;          // identities another host was compiling when asked for
  std::uint64_t lock_wait_timeouts = 0;  // waits that gave up and compiled here
  std::uint64_t backoffs = 0;            // times the tier was left out after repeated failures
  std::uint64_t skipped = 0;             // operations not tried: backing off, or the tier disabled
  std::uint64_t host_code_refused = 0;   // sound entries of host code not taken (host_code off)
};
// {"hits":..., "misses":..., ...}
std::string to_json(const RemoteCacheCounters& counters);

// What a check of the connection found (RemoteCache::probe).
struct RemoteProbe {
  enum class Status { ok, unreachable, misconfigured };
  Status status = Status::ok;
  // Why not ok, naming the redacted URL. `misconfigured`: the library is missing, TLS is not
  // supported, or the server refused the credentials or the database: retrying cannot help.
  std::string message;
};

// A held compile lock; released (compare-and-delete) when destroyed.
class RemoteLock {
 public:
  virtual ~RemoteLock() = default;
};

class RemoteCache {
 public:
  // Parses the URL (throws zerojit::Error naming options.url_source); connects on first use.
  explicit RemoteCache(RemoteCacheOptions options);
  ~RemoteCache();
  RemoteCache(const RemoteCache&) = delete;
  RemoteCache& operator=(const RemoteCache&) = delete;

  // "redis cache redis://:***@host:6379/0 (prefix zerojit)"
  std::string describe() const;
  const RemoteCacheOptions& options() const;
  const RedisUrl& url() const;
  RemoteProbe probe();

  // A verified artifact for the identity, or std::nullopt (absent, bad, too large, or Redis
  // unavailable: each counted).
  std::optional<CompiledArtifact> fetch(const ProgramIdentity& identity);
  // Sends an entry; false when it was not stored (too large, Redis unavailable).
  bool store(const CompiledArtifact& artifact) noexcept;

  // Fleet single flight: the verified entry if there is one; else the compile lock (the
  // caller compiles and stores, then drops the lock); else, after waiting up to lock_wait for
  // another host, or when Redis is unavailable, neither (compile here without the lock).
  struct Obtained {
    std::optional<CompiledArtifact> artifact;
    std::unique_ptr<RemoteLock> lock;
  };
  Obtained obtain(const ProgramIdentity& identity);

  RemoteCacheCounters counters() const;

 private:
  std::shared_ptr<detail::RemoteCacheImpl> impl_;
};

// The store the runtime uses when a remote is configured: `local` (the disk cache, or nullptr
// for memory only) in front of `remote`. The kernel core asks find, then lock and find again,
// then compiles and publishes (src/kernel.cpp); Redis is asked only in the second find, under
// the local cross-process lock, so N processes of one host make at most one remote request per
// identity.
class TieredStore final : public ArtifactStore {
 public:
  TieredStore(std::shared_ptr<ArtifactStore> local, std::shared_ptr<RemoteCache> remote);
  ~TieredStore() override;

  std::string describe() const override;
  std::optional<CompiledArtifact> find(const ProgramIdentity& identity) override;
  void publish(const CompiledArtifact& artifact) noexcept override;
  std::unique_ptr<CompileGuard> lock(const ProgramIdentity& identity) override;
  LockAttempt try_lock(const ProgramIdentity& identity) override;
  std::optional<std::string> recall_nvrtc_version(std::string_view fingerprint) override;
  void remember_nvrtc_version(std::string_view fingerprint,
                              std::string_view version) noexcept override;
  std::vector<std::string> recorded_compiler_versions(Language language,
                                                      std::string_view arch) override;

  const std::shared_ptr<ArtifactStore>& local() const { return local_; }
  const std::shared_ptr<RemoteCache>& remote() const { return remote_; }

  struct Pending;  // an identity between lock() and the guard's release

 private:
  std::unique_ptr<CompileGuard> guard_with(const ProgramIdentity& identity,
                                           std::unique_ptr<CompileGuard> local);

  std::shared_ptr<ArtifactStore> local_;
  std::shared_ptr<RemoteCache> remote_;
  std::shared_ptr<Pending> pending_;
};

// `local` behind the remote that ZEROJIT_REMOTE_CACHE (and the other variables of
// default_remote_cache_options) name, or `local` itself when none is set. Never throws: a
// malformed setting is a warning and the remote is left out.
std::shared_ptr<ArtifactStore> with_remote_cache_from_environment(
    std::shared_ptr<ArtifactStore> local);

// The local store of `store`: the store itself, or a TieredStore's local one.
ArtifactStore* local_store_of(ArtifactStore* store);
// The remote of `store` when it is a TieredStore, else nullptr.
RemoteCache* remote_cache_of(ArtifactStore* store);

}  // namespace zerojit
