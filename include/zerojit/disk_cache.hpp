// The persistent compile cache: an ArtifactStore of content-addressed entry files under a
// cache root, shared by every process that names the same root. docs/CACHE.md describes the
// layout, the entry format, the locking protocol and the safety rules.
//
// Guarantees: a process never loads a partial, damaged, foreign or misnamed entry (each is
// reported once, set aside and treated as a miss); of N processes needing one identity, one
// compiles and the others wait and load (a dead holder's lock is taken over, a waiter that
// times out compiles itself); trouble with the disk is a warning, never a failure.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "zerojit/artifact_store.hpp"
#include "zerojit/cache_entry.hpp"
#include "zerojit/program.hpp"

namespace zerojit {

namespace detail {
struct DiskCacheImpl;
}

inline constexpr std::uint64_t kDefaultCacheQuotaBytes = std::uint64_t{1} << 30;

struct DiskCacheOptions {
  // The writable cache root (created when missing, if create_root). Empty: no writable root.
  std::filesystem::path root;
  // Searched before the root and never written, e.g. an ahead-of-time pack in an image.
  std::vector<std::filesystem::path> read_only_layers;
  // Least-recently-used entries of the root are evicted beyond this many bytes.
  std::uint64_t max_bytes = kDefaultCacheQuotaBytes;
  // The longest any wait on another process lasts. A process waits this long for another one
  // compiling the same identity before compiling it itself, and at most 10 s of it for an
  // entry another process holds locked (writing or evicting it); past that, it compiles the
  // identity itself and leaves the disk out for it (DiskCacheCounters::skipped_identities).
  std::chrono::milliseconds lock_timeout{std::chrono::minutes(2)};
  // Accept a root (or layer) that other users can write. They could plant compiled code, so
  // this is for caches shared by users who trust each other. ZEROJIT_CACHE_ALLOW_SHARED=1 in
  // the environment sets it too.
  bool allow_shared_root = false;
  // Create a missing root (and its missing parents, mode 0700). The tool's read-only commands
  // turn it off so that a mistyped --cache-dir is not created.
  bool create_root = true;
  // Where warnings go (one line each, no trailing newline); default: standard error.
  std::function<void(std::string_view)> warning_sink;
};

// What the cache can do with its root, decided when it is first used.
enum class CacheRootState {
  writable,   // read and write
  read_only,  // entries are read (root and layers), nothing is written
  unusable,   // no disk tier: memory only
};
std::string_view to_string(CacheRootState state);

// Counters since the cache was created.
struct DiskCacheCounters {
  std::uint64_t hits = 0;            // lookups served by a verified entry
  std::uint64_t misses = 0;          // lookups that found no usable entry
  std::uint64_t bad_entries = 0;     // damaged, foreign or misnamed entries met (reported once)
  std::uint64_t published = 0;       // entries written
  std::uint64_t write_failures = 0;  // entries not written (disk full, quota, permissions, ...)
  std::uint64_t evicted = 0;         // entries removed to stay under the quota
  std::uint64_t lock_waits = 0;      // lookups that waited for another process's compile
  std::uint64_t lock_timeouts = 0;   // waits that gave up and compiled here
  // Identities served without the disk tier: their entry was held locked by another process
  // past the bound, or their lock file is not a regular file (reported once each).
  std::uint64_t skipped_identities = 0;
  // Compiled artifacts handed to publish and not written because the root cannot be written
  // (read-only, unusable) or the identity was skipped: with hits and write_failures, what a
  // caller needs to tell "nothing needed saving" from "something was lost".
  std::uint64_t not_saved = 0;
};

// One entry file, as listed by the management API.
struct CacheEntryInfo {
  std::string path;   // the file
  std::string layer;  // the root or read-only layer that holds it
  bool read_only = false;
  std::string identity;  // from the file name
  std::string kernel;    // the rest from its content (empty when it does not decode)
  std::string key;
  std::string arch;
  Language language = kNvrtcLanguage;
  std::string compiler_version;
  std::string launch;  // what a sound entry fixes about its launch (EntryKind::describe_launch)
  std::uint64_t size_bytes = 0;
  double age_seconds = 0.0;  // since it was last used (or written)
  EntryProblem problem = EntryProblem::none;
  std::string detail;  // what is wrong with it, when something is
  // Another process held it locked past the bound, so it was not read: neither ok nor bad.
  bool busy = false;
};
// [{"identity":..., "kernel":..., "key":..., "arch":..., "nvrtc":..., "size":...,
//   "age_seconds":..., "layer":..., "read_only":..., "status":"ok"|"busy"|<problem>, ...}]
std::string to_json(const std::vector<CacheEntryInfo>& entries);

struct CacheVerifyReport {
  std::size_t checked = 0;  // valid + bad + busy
  std::size_t valid = 0;
  std::vector<CacheEntryInfo> bad;   // with their problem and detail
  std::vector<CacheEntryInfo> busy;  // held locked by another process: not checked
  bool set_aside = false;            // bad entries of the root were moved to quarantine/
  bool ok() const { return bad.empty(); }
  std::string to_json() const;
};

struct CacheGcReport {
  std::uint64_t quota_bytes = 0;
  std::size_t removed = 0;  // entries removed
  std::uint64_t removed_bytes = 0;
  std::size_t kept = 0;  // entries left
  std::uint64_t kept_bytes = 0;
  std::size_t busy = 0;                 // entries another process was reading: left in place
  std::size_t other_files_removed = 0;  // abandoned temporaries, stale locks, quarantine
  std::string to_json() const;
};

// How a wanted identity differs from the nearest entry of the same kernel.
struct IdentityDifference {
  std::string component;  // format | source | names | options | key | arch | compiler
  std::string wanted;     // readable where the entry records the text, else the hash
  std::string found;
};

struct MissExplanation {
  std::string kernel;
  std::string key;
  std::string arch;
  Language language = kNvrtcLanguage;
  std::string compiler_version;  // NVRTC's for CUDA C++
  std::string identity;
  bool present = false;  // a verified entry with this identity exists: a hit, not a miss
  std::string present_layer;
  std::string present_problem;                  // an entry with this name exists but is bad
  std::optional<CacheEntryInfo> nearest;        // the closest entry of the same kernel
  std::vector<IdentityDifference> differences;  // what differs from `nearest`
  std::size_t same_kernel_entries = 0;          // how many entries of the kernel were compared

  // One paragraph: hit, or miss and what differs from the nearest entry.
  std::string summary() const;
  std::string to_json() const;
};

class DiskCache final : public ArtifactStore {
 public:
  // Touches nothing on disk: the root is opened, checked and created on first use.
  explicit DiskCache(DiskCacheOptions options);
  ~DiskCache() override;
  DiskCache(const DiskCache&) = delete;
  DiskCache& operator=(const DiskCache&) = delete;

  // "disk cache <root> (writable), 1 read-only layer, quota 1.0 GiB"
  std::string describe() const override;
  std::optional<CompiledArtifact> find(const ProgramIdentity& identity) override;
  void publish(const CompiledArtifact& artifact) noexcept override;
  std::unique_ptr<CompileGuard> lock(const ProgramIdentity& identity) override;
  LockAttempt try_lock(const ProgramIdentity& identity) override;
  std::optional<std::string> recall_nvrtc_version(std::string_view fingerprint) override;
  void remember_nvrtc_version(std::string_view fingerprint,
                              std::string_view version) noexcept override;
  // The versions recorded in the entries/ directory of every layer and of the root (each
  // publish records its artifact's language, arch and compiler version there), sorted, each
  // once.
  std::vector<std::string> recorded_compiler_versions(Language language,
                                                      std::string_view arch) override;

  const DiskCacheOptions& options() const;
  // Opens the root if not yet done. `state_reason` says why it is not writable.
  CacheRootState state();
  std::string state_reason();
  DiskCacheCounters counters() const;

  // Management (the `zerojit cache` tool). Every entry of every layer, read-only layers first.
  std::vector<CacheEntryInfo> list();
  // The root's own entry for `identity` (not a layer's), read and verified, not touched:
  // std::nullopt when the root has none; else with `problem` or `busy` set when it cannot be
  // used. What a pack built into the root will serve (`zerojit warmup --compile-only
  // --cache-dir` checks every key of its manifest with it).
  std::optional<CacheEntryInfo> root_entry(const ProgramIdentity& identity);
  // Reads and checks every entry; with `set_aside`, bad entries of the root go to quarantine/.
  CacheVerifyReport verify(bool set_aside = false);
  // Trims the root to `max_bytes` (default: the quota), least recently used first, skipping
  // entries being read; also removes abandoned temporaries and stale lock files.
  CacheGcReport gc(std::optional<std::uint64_t> max_bytes = std::nullopt);
  // Removes every entry of the root that no process is reading, and the rest of its files.
  CacheGcReport clear();
  // Why `program` for (arch, compiler_version) is (or is not) a hit: the nearest entry of the
  // same kernel and the identity components that differ from it. `compiler_version` is the
  // version of the program's language's compiler (NVRTC's for CUDA C++).
  MissExplanation explain(const Program& program, std::string_view arch,
                          std::string_view compiler_version);
  // The same for many programs, reading the entries once; `compiler_version(language)` names
  // each language's compiler version.
  std::vector<MissExplanation> explain(
      const std::vector<Program>& programs, std::string_view arch,
      const std::function<std::string(Language language)>& compiler_version);

 private:
  // lock (wait: up to the lock timeout) and try_lock (no wait) in one.
  LockAttempt lock_identity(const ProgramIdentity& identity, bool wait);

  // Shared with the lock guards handed out, which may outlive a store being replaced.
  std::shared_ptr<detail::DiskCacheImpl> impl_;
};

// The default cache root: $ZEROJIT_CACHE_DIR, else $XDG_CACHE_HOME/zerojit, else
// $HOME/.cache/zerojit. std::nullopt when ZEROJIT_CACHE_DIR=off (the disk tier is disabled);
// an empty path when none of them is set.
std::optional<std::filesystem::path> default_cache_root();

// Options from the environment: the default root, ZEROJIT_CACHE_READONLY_DIRS (read-only
// layers, ':'-separated; read whatever the root is, ZEROJIT_CACHE_DIR=off included),
// ZEROJIT_CACHE_MAX_BYTES (quota; parse_byte_size's forms), ZEROJIT_CACHE_LOCK_TIMEOUT_S and
// ZEROJIT_CACHE_ALLOW_SHARED. Each variable is read on its own: a malformed one is left at its
// default and named in `problems` (one line each, saying what is wrong), and every other
// variable still applies.
DiskCacheOptions default_disk_cache_options(std::vector<std::string>& problems);

// What a malformed cache variable does to default_disk_cache_options below.
enum class MalformedVariable {
  throw_error,  // zerojit::Error naming every malformed variable (the tool's usage error)
  warn,         // one warning each in zerojit's log (once per process), its default used
};
DiskCacheOptions default_disk_cache_options(
    MalformedVariable on_malformed = MalformedVariable::throw_error);

// The store Runtime installs at start: a DiskCache with default_disk_cache_options() (each
// malformed variable warned about once, the others applied), or nullptr (memory only) when
// ZEROJIT_CACHE_DIR=off and no read-only layer is named. Never throws.
std::shared_ptr<ArtifactStore> make_default_artifact_store();

}  // namespace zerojit
