// The store: find, publish and the cross-process compile lock (docs/CACHE.md, "Lookup,
// publish, single flight").
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <thread>

#include "disk_cache/impl.hpp"

namespace zerojit {

namespace detail {

using namespace disk;

namespace {

std::string seconds_text(std::chrono::duration<double> seconds) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.1f", seconds.count());
  return buffer;
}

}  // namespace

std::chrono::milliseconds DiskCacheImpl::entry_lock_bound() const {
  return std::min<std::chrono::milliseconds>(options.lock_timeout, kEntryLockBound);
}

bool DiskCacheImpl::is_skipped(const ProgramIdentity& identity) {
  std::lock_guard lock(skipped_mutex);
  return skipped.count(identity) != 0;
}

void DiskCacheImpl::skip(const ProgramIdentity& identity, const std::string& why) {
  {
    std::lock_guard lock(skipped_mutex);
    if (!skipped.insert(identity).second) return;
  }
  skipped_identities.fetch_add(1, std::memory_order_relaxed);
  warn(why + "; this process compiles identity " + identity.hex() +
       " itself and does not use the disk cache for it");
}

DiskCacheImpl::ReadResult DiskCacheImpl::read_entry(const Layer& layer, const std::string& name,
                                                    const ProgramIdentity* expected, bool touch) {
  ReadResult result;
  Fd file = open_at(layer.entries.get(), name, O_RDONLY | O_NONBLOCK | O_NOCTTY);
  if (!file.valid()) {
    const int error = errno;
    result.have_info =
        ::fstatat(layer.entries.get(), name.c_str(), &result.info, AT_SYMLINK_NOFOLLOW) == 0;
    if (error == ENOENT) {
      result.absent = true;
    } else if (error == ELOOP) {
      result.decoded.problem = EntryProblem::not_regular_file;
      result.decoded.detail = "it is a symbolic link; links inside a cache root are never followed";
    } else {
      result.decoded.problem = EntryProblem::unreadable;
      result.decoded.detail = "it cannot be opened (" + error_text(error) + ")";
    }
    return result;
  }
  if (::fstat(file.get(), &result.info) != 0) {
    result.decoded.problem = EntryProblem::unreadable;
    result.decoded.detail = "it cannot be examined (" + error_text(errno) + ")";
    return result;
  }
  result.have_info = true;
  if (!S_ISREG(result.info.st_mode)) {
    result.decoded.problem = EntryProblem::not_regular_file;
    result.decoded.detail = "it is not a regular file";
    return result;
  }
  const auto size = static_cast<std::uint64_t>(result.info.st_size);
  if (size > kMaxCacheEntryBytes) {
    result.decoded.problem = EntryProblem::too_large;
    result.decoded.detail = "it is " + human_bytes(size) + ", more than any entry zerojit writes";
    return result;
  }
  // An identity this process skipped (its entry held past the bound) is never waited for
  // again: one wait per held entry, however often it is asked for (a pack build reads the
  // root's entry of every key after the warmup that skipped it).
  if (expected != nullptr && is_skipped(*expected)) {
    result.busy = true;
    result.decoded.detail =
        "this process met it held locked by another process earlier and stopped using the "
        "disk for it (not waited for again)";
    return result;
  }
  // A shared lock while reading: eviction takes an exclusive one without waiting and skips
  // the entry when it cannot. A writer holds an exclusive one from its rename to its close;
  // one stopped there must not stop us.
  if (!flock_within(file.get(), LOCK_SH, entry_lock_bound())) {
    if (errno == EWOULDBLOCK) {
      result.busy = true;
      result.decoded.detail = "another process has held it locked for more than " +
                              seconds_text(entry_lock_bound()) + " s";
      return result;
    }
    result.decoded.problem = EntryProblem::unreadable;
    result.decoded.detail = "it cannot be locked (" + error_text(errno) + ")";
    return result;
  }
  // The lock may have been granted on a file an evicter or a set-aside unlinked (or a writer
  // replaced) while we waited: only the file the name still names counts.
  struct stat named {};
  if (::fstatat(layer.entries.get(), name.c_str(), &named, AT_SYMLINK_NOFOLLOW) != 0 ||
      !same_file(named, result.info)) {
    result.absent = true;
    return result;
  }
  // The header first: a damaged file (a sparse gigabyte of zeros under an entry's name) is
  // told apart without reading it whole.
  std::byte header[kCacheEntryHeaderBytes];
  const ssize_t header_read = ::pread(file.get(), header, sizeof header, 0);
  if (header_read >= 0) {
    result.decoded =
        check_entry_header(std::span(header, static_cast<std::size_t>(header_read)), size);
    if (!result.decoded.ok()) return result;
  }
  std::string bytes;
  if (!read_all(file.get(), static_cast<std::size_t>(size) + 1, bytes)) {
    result.decoded.problem = EntryProblem::unreadable;
    result.decoded.detail = "it cannot be read (" + error_text(errno) + ")";
    return result;
  }
  result.decoded = decode_entry(
      std::span(reinterpret_cast<const std::byte*>(bytes.data()), bytes.size()), expected);
  // The file's modification time is its last use, for least-recently-used eviction.
  if (touch && result.decoded.ok() && layer.writable) ::futimens(file.get(), nullptr);
  return result;
}

void DiskCacheImpl::handle_bad(std::size_t layer_index, const std::string& name,
                               const ReadResult& read) {
  {
    std::lock_guard lock(reported_mutex);
    const auto key = std::tuple{layer_index,
                                read.have_info ? read.info.st_dev : dev_t{},
                                read.have_info ? read.info.st_ino : ino_t{},
                                read.have_info ? read.info.st_size : off_t{},
                                read.have_info ? std::int64_t{read.info.st_mtim.tv_sec} : 0,
                                read.have_info ? std::int64_t{read.info.st_mtim.tv_nsec} : 0};
    if (!reported.insert(key).second) return;
  }
  bad_entries.fetch_add(1, std::memory_order_relaxed);
  Layer& layer = layers[layer_index];
  const std::string action = set_aside(layer, name, read);
  warn("bad entry " + layer.path + "/" + kEntriesDir + "/" + name + " (" +
       std::string(to_string(read.decoded.problem)) + "): " + read.decoded.detail + "; " + action +
       "; it is treated as a miss and compiled again");
}

bool DiskCacheImpl::may_serve(std::size_t layer_index, const std::string& name,
                              const ReadResult& read) {
  const CompiledArtifact& artifact = *read.decoded.artifact;
  if (!entry_kind(artifact.language).holds_host_code) return true;
  // Host code (an exported CuTeDSL object) is code execution: never from a root others may
  // write, nor from a file another user can change (docs/CACHE.md, "Host code").
  const std::optional<std::string> why =
      shared ? std::optional<std::string>("this cache accepts roots others can write (" +
                                          std::string(kAllowSharedVariable) + ")")
             : untrusted_host_code_because(read.info);
  if (!why) return true;
  {
    std::lock_guard lock(refused_host_code_mutex);
    if (!refused_host_code.insert({layer_index, read.info.st_dev, read.info.st_ino}).second) {
      return false;
    }
  }
  warn("not loading " + artifact.kernel_name + " [" + artifact.key_text + "] from " +
       layers[layer_index].path + "/" + kEntriesDir + "/" + name + ": it is host code, and " +
       *why + "; compiling it instead");
  return false;
}

void DiskCacheImpl::report_write_failure(const std::string& what, int error) {
  write_failures.fetch_add(1, std::memory_order_relaxed);
  if (write_failure_reported.exchange(true)) return;
  warn("could not save " + what + " in " + options.root.string() + " (" + error_text(error) +
       "); the compiled kernel is used, but other processes will compile it again. Further "
       "write failures are counted, not reported");
}

int DiskCacheImpl::publish_file(int directory, const std::string& name, std::string_view bytes) {
  const std::string temporary = std::string(kTemporaryPrefix) + name + "." +
                                std::to_string(::getpid()) + "." +
                                std::to_string(temporary_counter.fetch_add(1));
  Fd file = open_at(directory, temporary, O_WRONLY | O_CREAT | O_EXCL, file_mode);
  if (!file.valid()) return errno;
  int error = 0;
  // Nobody else can hold a file just created with O_EXCL (cleaners take only unlocked
  // temporaries older than a second: clear's age, gc's is a minute): not waiting is enough.
  if (!flock_retrying(file.get(), LOCK_EX | LOCK_NB) || !write_all(file.get(), bytes) ||
      ::fsync(file.get()) != 0 ||
      ::renameat(directory, temporary.c_str(), directory, name.c_str()) != 0) {
    error = errno;
    ::unlinkat(directory, temporary.c_str(), 0);
    return error;
  }
  file.reset();
  ::fsync(directory);
  return 0;
}

}  // namespace detail

namespace {

using namespace detail::disk;

// Holds an identity's lock file locked; unlinks it before unlocking, so that the next holder
// works on a fresh file (see DiskCache::lock for why that is safe).
class FileLockGuard final : public CompileGuard {
 public:
  FileLockGuard(std::shared_ptr<detail::DiskCacheImpl> impl, Fd file, std::string name)
      : impl_(std::move(impl)), file_(std::move(file)), name_(std::move(name)) {}
  ~FileLockGuard() override {
    ::unlinkat(impl_->locks.get(), name_.c_str(), 0);
    file_.reset();
  }

 private:
  std::shared_ptr<detail::DiskCacheImpl> impl_;
  Fd file_;
  std::string name_;
};

}  // namespace

std::string_view to_string(CacheRootState state) {
  switch (state) {
    case CacheRootState::writable:
      return "writable";
    case CacheRootState::read_only:
      return "read-only";
    case CacheRootState::unusable:
      return "unusable";
  }
  return "?";
}

DiskCache::DiskCache(DiskCacheOptions options)
    : impl_(std::make_shared<detail::DiskCacheImpl>(std::move(options))) {}

DiskCache::~DiskCache() = default;

const DiskCacheOptions& DiskCache::options() const { return impl_->options; }

CacheRootState DiskCache::state() {
  impl_->ensure_open();
  return impl_->state;
}

std::string DiskCache::state_reason() {
  impl_->ensure_open();
  return impl_->reason;
}

DiskCacheCounters DiskCache::counters() const {
  const detail::DiskCacheImpl& s = *impl_;
  DiskCacheCounters c;
  c.hits = s.hits.load(std::memory_order_relaxed);
  c.misses = s.misses.load(std::memory_order_relaxed);
  c.bad_entries = s.bad_entries.load(std::memory_order_relaxed);
  c.published = s.published.load(std::memory_order_relaxed);
  c.write_failures = s.write_failures.load(std::memory_order_relaxed);
  c.evicted = s.evicted.load(std::memory_order_relaxed);
  c.lock_waits = s.lock_waits.load(std::memory_order_relaxed);
  c.lock_timeouts = s.lock_timeouts.load(std::memory_order_relaxed);
  c.skipped_identities = s.skipped_identities.load(std::memory_order_relaxed);
  c.not_saved = s.not_saved.load(std::memory_order_relaxed);
  return c;
}

std::string DiskCache::describe() const {
  std::string out = "disk cache " + (impl_->options.root.empty() ? std::string("(no writable root)")
                                                                 : impl_->options.root.string());
  out += ", quota " + human_bytes(impl_->options.max_bytes);
  const std::size_t layers = impl_->options.read_only_layers.size();
  if (layers != 0) {
    out += ", " + std::to_string(layers) + " read-only layer" + (layers == 1 ? "" : "s");
  }
  return out;
}

std::optional<CompiledArtifact> DiskCache::find(const ProgramIdentity& identity) {
  detail::DiskCacheImpl& s = *impl_;
  s.ensure_open();
  const std::string name = entry_name(identity);
  // Marked in use before the root is read, so that this process's own evictions (other
  // threads publishing) cannot remove the entry between our read and the mark; unmarked
  // again if the root does not serve it.
  const bool newly_marked = s.writable_layer() != nullptr && s.mark_in_use(name);
  for (std::size_t i = 0; i < s.layers.size() && !s.is_skipped(identity); ++i) {
    detail::DiskCacheImpl::ReadResult read = s.read_entry(s.layers[i], name, &identity, true);
    if (read.absent) continue;
    if (read.busy) {
      s.skip(identity, "entry " + s.layers[i].path + "/" + kEntriesDir + "/" + name + ": " +
                           read.decoded.detail + " (a writer or evicter that is stopped?)");
      break;
    }
    if (read.decoded.ok() && !s.may_serve(i, name, read)) continue;
    if (read.decoded.ok()) {
      s.hits.fetch_add(1, std::memory_order_relaxed);
      // A root written before versions were recorded learns its version from its entries.
      if (s.layers[i].writable) {
        s.record_compiler_version(*read.decoded.artifact);
      } else if (newly_marked) {
        s.unmark_in_use(name);  // served by a read-only layer: the root's name is not used
      }
      return std::move(read.decoded.artifact);
    }
    s.handle_bad(i, name, read);
  }
  if (newly_marked) s.unmark_in_use(name);
  s.misses.fetch_add(1, std::memory_order_relaxed);
  return std::nullopt;
}

void DiskCache::publish(const CompiledArtifact& artifact) noexcept {
  detail::DiskCacheImpl& s = *impl_;
  try {
    s.ensure_open();
    detail::DiskCacheImpl::Layer* layer = s.writable_layer();
    if (layer == nullptr || s.is_skipped(artifact.identity)) {
      // Read-only or unusable (reported once when opened), or skipped (reported then).
      s.not_saved.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    const std::string what = artifact.kernel_name + " [" + artifact.key_text + "]";
    const std::string bytes = encode_entry(artifact);
    if (bytes.size() > s.options.max_bytes) {
      s.report_write_failure(
          what + " (" + human_bytes(bytes.size()) + ", larger than the whole quota)", EFBIG);
      return;
    }
    const std::string name = entry_name(artifact.identity);
    // Marked before the file appears: another thread's eviction that lists the new file
    // then finds it in use (a parallel warmup under a quota once lost a key that way).
    const bool newly_marked = s.mark_in_use(name);
    if (const int error = s.publish_file(layer->entries.get(), name, bytes)) {
      if (newly_marked) s.unmark_in_use(name);
      s.report_write_failure(what, error);
      return;
    }
    s.published.fetch_add(1, std::memory_order_relaxed);
    s.record_compiler_version(artifact);
    const CacheGcReport evicted = s.evict(s.options.max_bytes, true);
    if (evicted.kept_bytes > s.options.max_bytes && evicted.busy == 0 &&
        !s.over_quota_reported.exchange(true)) {
      s.warn("the entries in " + s.options.root.string() + " (" + human_bytes(evicted.kept_bytes) +
             ") stay over its quota of " + human_bytes(s.options.max_bytes) +
             ": this process uses " + std::to_string(s.in_use_count()) +
             " of them, and never evicts what it uses; raise ZEROJIT_CACHE_MAX_BYTES "
             "(DiskCacheOptions::max_bytes) to hold them");
    }
  } catch (...) {
    s.write_failures.fetch_add(1, std::memory_order_relaxed);  // e.g. out of memory
  }
}

// Cross-process single flight. Each identity has a lock file under locks/, held with flock:
// the kernel releases it when its holder dies, so a crashed compiler never blocks the others.
// The holder unlinks the file before releasing it; a waiter that then gets the lock finds the
// name gone or naming another file, and starts over on the current one. So at any moment one
// file per identity is the lock, and gc may remove a lock file that it can lock itself.
std::unique_ptr<CompileGuard> DiskCache::lock(const ProgramIdentity& identity) {
  return lock_identity(identity, true).guard;
}

// A holder is never waited for: warmup moves on to other keys and comes back (kernel.cpp).
LockAttempt DiskCache::try_lock(const ProgramIdentity& identity) {
  return lock_identity(identity, false);
}

LockAttempt DiskCache::lock_identity(const ProgramIdentity& identity, bool wait) {
  detail::DiskCacheImpl& s = *impl_;
  s.ensure_open();
  if (s.writable_layer() == nullptr || !s.locks.valid() || s.is_skipped(identity)) return {};
  const std::string name = identity.hex() + ".lock";
  const std::string path = s.options.root.string() + "/" + kLocksDir + "/" + name;
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + s.options.lock_timeout;
  bool waited = false;
  auto pause = std::chrono::milliseconds(2);
  while (true) {
    // O_NONBLOCK: opening a FIFO planted under the name would otherwise wait for a writer.
    Fd file = open_at(s.locks.get(), name, O_RDONLY | O_CREAT | O_NONBLOCK | O_NOCTTY, s.file_mode);
    if (!file.valid()) {
      if (errno == ELOOP) {
        s.skip(identity, "lock file " + path +
                             " is a symbolic link; links inside a cache root are never followed");
      } else if (errno == EISDIR) {
        s.skip(identity, "lock file " + path + " is not a regular file (a directory); remove it");
      }
      return {};  // cannot lock: compile without waiting
    }
    struct stat opened {};
    if (::fstat(file.get(), &opened) != 0) return {};
    if (!S_ISREG(opened.st_mode)) {
      s.skip(identity, "lock file " + path + " is not a regular file (" +
                           (S_ISFIFO(opened.st_mode)  ? "a FIFO"
                            : S_ISDIR(opened.st_mode) ? "a directory"
                                                      : "a device or socket") +
                           "); remove it");
      return {};
    }
    while (!flock_retrying(file.get(), LOCK_EX | LOCK_NB)) {
      if (errno != EWOULDBLOCK) return {};
      if (!wait) return {.guard = nullptr, .held_elsewhere = true};
      if (!waited) {
        waited = true;
        s.lock_waits.fetch_add(1, std::memory_order_relaxed);
      }
      if (std::chrono::steady_clock::now() >= deadline) {
        s.lock_timeouts.fetch_add(1, std::memory_order_relaxed);
        s.warn("waited " + detail::seconds_text(std::chrono::steady_clock::now() - start) +
               " s for another process to compile identity " + identity.hex() + " (lock " + path +
               "); compiling it in this process instead");
        return {};
      }
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::milliseconds(50));
    }
    struct stat held {
    }, current{};
    if (::fstat(file.get(), &held) == 0 &&
        ::fstatat(s.locks.get(), name.c_str(), &current, AT_SYMLINK_NOFOLLOW) == 0 &&
        same_file(held, current)) {
      return {.guard = std::make_unique<FileLockGuard>(impl_, std::move(file), name)};
    }
    // The previous holder unlinked it on release: take the lock on the current file.
  }
}

}  // namespace zerojit
