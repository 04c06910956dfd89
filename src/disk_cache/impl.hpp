// The disk cache's shared state and the helpers its files share. Private to src/disk_cache/:
// root.cpp opens and checks the root, store.cpp finds, locks and publishes, nvrtc_memo.cpp
// keeps the NVRTC version memo, maintenance.cpp lists, verifies and trims, explain.cpp
// explains misses, report.cpp writes the reports, environment.cpp reads the environment.
#pragma once

#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "disk_cache/posix.hpp"
#include "zerojit/disk_cache.hpp"

namespace zerojit::detail {

namespace disk {

// The root's layout (docs/CACHE.md). Every name below the root is opened relative to a
// directory descriptor and without following symbolic links.
inline constexpr const char* kEntriesDir = "entries";
inline constexpr const char* kLocksDir = "locks";
inline constexpr const char* kQuarantineDir = "quarantine";
inline constexpr const char* kMemoDir = "nvrtc-version";
inline constexpr std::string_view kEntrySuffix = ".zjc";
inline constexpr std::string_view kTemporaryPrefix = ".tmp-";
// Damaged entries kept for inspection; older ones are deleted.
inline constexpr std::size_t kQuarantineLimit = 16;
// An entry's time may be this far ahead of the clock (a clock stepped back a little) and
// still count as its last use; further ahead, it counts as never used.
inline constexpr auto kClockSkewAllowance = std::chrono::seconds(60);
// A temporary file this old that no process holds locked was left by a dead writer.
inline constexpr auto kAbandonedAge = std::chrono::seconds(60);
// The longest wait for an entry's own lock (a reader for a writer or an evicter, which hold it
// for one rename or unlink), within the lock timeout: longer means the holder is stuck.
inline constexpr auto kEntryLockBound = std::chrono::seconds(10);
inline constexpr std::size_t kMaxMemoBytes = 4096;
inline constexpr std::string_view kMemoHeader = "zerojit-nvrtc-version 1";
inline constexpr const char* kAllowSharedVariable = "ZEROJIT_CACHE_ALLOW_SHARED";
// nvrtc-version/compiled-with-<version>: some entries of the root were compiled with that NVRTC
// (beside the memos, which are named by 16 hex digits). A layer copied from a root has them.
inline constexpr std::string_view kVersionRecordPrefix = "compiled-with-";

std::string human_bytes(std::uint64_t bytes);
std::string hash_text(std::uint64_t hash);
std::string entry_name(const ProgramIdentity& identity);
// The identity an entry file name stands for, if it is "<32 lower-case hex digits>.zjc".
std::optional<ProgramIdentity> identity_of_entry_name(std::string_view name);

// Why a directory must not be trusted, or nothing. Trusted: owned by this user or root, and
// writable by no one else, except that a sticky directory (others may add names but not
// rename or remove ours) is accepted where `sticky_is_enough`.
std::optional<std::string> untrusted_because(const struct stat& info, bool sticky_is_enough);
std::string refusal_advice();
// Why an entry file must not be loaded as host code (an exported CuTeDSL object), or nothing:
// its directories are trusted, but host code is code execution, so the file itself must also be
// a regular file with one link, owned by this user or root and writable by no one else (a pack
// copied with `cp -a` from another account, or a root made under umask 0 and tightened later,
// keeps others' files).
std::optional<std::string> untrusted_host_code_because(const struct stat& info);

}  // namespace disk

// The cache's state, shared with the lock guards it hands out.
struct DiskCacheImpl {
  struct Layer {
    std::string path;
    disk::Fd entries;
    bool writable = false;  // only the root, when it can be written
    disk::Fd versions;      // its nvrtc-version/ directory, when it has a trusted one
  };

  // What reading one entry file found.
  struct ReadResult {
    bool absent = false;
    DecodedEntry decoded;
    struct stat info {};
    bool have_info = false;
    bool busy = false;  // another process held it locked past the entry lock bound
  };

  struct ScannedEntry {
    std::string name;
    struct stat info {};
  };

  // Removes an entry unless another process holds it (reading or writing) or it was replaced
  // since it was listed.
  enum class RemoveOutcome { removed, busy, gone, spared };

  explicit DiskCacheImpl(DiskCacheOptions opts);

  DiskCacheOptions options;
  bool shared = false;
  mode_t directory_mode = 0755;
  mode_t file_mode = 0644;

  std::once_flag open_once;
  std::vector<Layer> layers;  // read-only layers first, the root last
  std::optional<std::size_t> root_layer;
  disk::Fd root, locks, quarantine, memo;
  CacheRootState state = CacheRootState::unusable;
  std::string reason;

  std::atomic<std::uint64_t> hits{0}, misses{0}, bad_entries{0}, published{0}, write_failures{0},
      evicted{0}, lock_waits{0}, lock_timeouts{0}, skipped_identities{0}, not_saved{0};
  std::atomic<bool> write_failure_reported{false};
  std::atomic<std::uint64_t> temporary_counter{0};

  // Host-code entries refused (layer, device, inode), so each is reported once.
  std::mutex refused_host_code_mutex;
  std::set<std::tuple<std::size_t, dev_t, ino_t>> refused_host_code;

  std::mutex reported_mutex;
  // Bad files already reported (layer, device, inode, size, mtime), so each is reported once
  // even where it cannot be moved aside (read-only layers).
  std::set<std::tuple<std::size_t, dev_t, ino_t, off_t, std::int64_t, std::int64_t>> reported;

  // Identities this process serves without the disk tier: their entry was held locked past
  // the bound, or their lock file is not a regular file. Never waited for again.
  std::mutex skipped_mutex;
  std::set<ProgramIdentity> skipped;
  // NVRTC versions this process has seen recorded in the root (so each is written once).
  std::mutex recorded_mutex;
  std::set<std::string> recorded;
  // The root's entries this process published or served: its evictions leave them (a pack
  // being built must not evict its own first keys), `gc` and `clear` do not.
  std::mutex in_use_mutex;
  std::set<std::string> in_use;
  // One eviction at a time in this process: two from the same listing would each remove
  // down to the quota, together past it.
  std::mutex evict_mutex;
  std::atomic<bool> over_quota_reported{false};

  void warn(const std::string& text) const;
  void ensure_open();
  Layer* writable_layer();

  // root.cpp
  void open();
  void open_read_only_layer(const std::filesystem::path& path);
  void become_unusable(std::string why);
  void open_root();

  // store.cpp
  std::chrono::milliseconds entry_lock_bound() const;
  bool is_skipped(const ProgramIdentity& identity);
  // Stops using the disk for `identity` in this process; the first time, warns with `why`.
  void skip(const ProgramIdentity& identity, const std::string& why);
  ReadResult read_entry(const Layer& layer, const std::string& name,
                        const ProgramIdentity* expected, bool touch);
  // Reports a bad entry once (per file) and sets it aside.
  void handle_bad(std::size_t layer_index, const std::string& name, const ReadResult& read);
  void report_write_failure(const std::string& what, int error);
  // Whether the sound entry `read` found in layer `layer_index` may be served: host code only
  // from a cache that trusts its roots and from a file nobody else can write; refused ones are
  // reported once (per file) and compiled instead.
  bool may_serve(std::size_t layer_index, const std::string& name, const ReadResult& read);
  // Writes `bytes` under `name` in `directory` atomically: a temporary file in the same
  // directory, written, flushed to disk, renamed over the name, and the directory flushed.
  // The temporary is locked while written, so a cleaner can tell a live writer from a dead
  // one. Returns 0 or the errno of the step that failed.
  int publish_file(int directory, const std::string& name, std::string_view bytes);

  // maintenance.cpp
  // Moves a bad entry of the root to quarantine/ (or removes it), unless the name has been
  // replaced since it was read. Returns what was done, for the report.
  std::string set_aside(Layer& layer, const std::string& name, const ReadResult& read);
  std::size_t trim_quarantine(std::size_t keep);
  std::vector<ScannedEntry> scan_entries(const Layer& layer);
  // Removes `name` if it is still the `listed` file and nobody holds it; with `spare_in_use`,
  // also leaves it when this process has marked it in use by the time the lock is held (a
  // find marks before it reads, so a read either precedes the lock and is seen here, or waits
  // for it and then finds the name gone).
  RemoveOutcome remove_entry_if_idle(int directory, const std::string& name,
                                     const struct stat& listed, bool spare_in_use = false);
  // Sets aside (and reports once) a listed entry of `layer_index` whose header already shows
  // damage, without reading it whole; returns whether it did. Eviction leaves such files out
  // of the quota: a damaged file must not push good entries out.
  bool set_aside_if_damaged(std::size_t layer_index, const ScannedEntry& entry);
  // Least-recently-used eviction down to `max_bytes`; with `spare_in_use`, the names this
  // process uses stay (asked as each candidate comes up, not from a copy taken before the
  // listing: a concurrent publish marks its name before the file appears).
  CacheGcReport evict(std::uint64_t max_bytes, bool spare_in_use);
  // Notes that this process uses the root's entry `name` (publishes or served it), so that
  // its own evictions never remove it. Returns whether the name was new.
  bool mark_in_use(const std::string& name);
  void unmark_in_use(const std::string& name);
  bool is_in_use(const std::string& name);
  std::size_t in_use_count();
  // The entry of `name` in `layer`, read and verified against its name, not touched.
  CacheEntryInfo describe_entry(const Layer& layer, const std::string& name,
                                const struct stat& listed, bool& absent);
  // Temporaries of dead writers (unlocked and old) and lock files no process holds.
  std::size_t remove_abandoned_files(bool all_temporaries);

  // nvrtc_memo.cpp
  std::string memo_name(std::string_view fingerprint) const;
  static std::string memo_text(std::string_view fingerprint, std::string_view version);
  // Records in the root that its entries include some compiled by the artifact's compiler
  // (language, arch, version).
  void record_compiler_version(const CompiledArtifact& artifact);
  // Removes the root's version records (clear, once no entry is left).
  std::size_t remove_version_records();
};

}  // namespace zerojit::detail
