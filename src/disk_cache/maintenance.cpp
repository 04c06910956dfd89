// Maintenance: quarantine, eviction, leftovers, and the management calls behind `zerojit
// cache` (list, verify, gc, clear). docs/CACHE.md, "Quota and eviction" and "The tool".
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>

#include "disk_cache/impl.hpp"

namespace zerojit {

namespace detail {

using namespace disk;

std::string DiskCacheImpl::set_aside(Layer& layer, const std::string& name,
                                     const ReadResult& read) {
  if (!layer.writable) return "left in place (read-only layer)";
  struct stat now {};
  if (::fstatat(layer.entries.get(), name.c_str(), &now, AT_SYMLINK_NOFOLLOW) != 0) {
    return "already gone";
  }
  if (read.have_info && !same_file(now, read.info)) return "already replaced";
  timespec time{};
  ::clock_gettime(CLOCK_REALTIME, &time);
  char nanoseconds[16];
  std::snprintf(nanoseconds, sizeof nanoseconds, "%09ld", static_cast<long>(time.tv_nsec));
  const std::string aside = name.substr(0, name.size() - kEntrySuffix.size()) + "." +
                            std::string(to_string(read.decoded.problem)) + "." +
                            std::to_string(::getpid()) + "." + std::to_string(time.tv_sec) +
                            nanoseconds;
  // Its time becomes the time it was set aside, so that trimming keeps the newest arrivals (a
  // bad entry's own time may be anything, even in the future). Set before the move, so that a
  // trim running meanwhile never sees it in quarantine/ with its old time; and given
  // explicitly: "now" would be the kernel's coarse clock (a 4 ms tick before Linux 6.13),
  // equal for arrivals a millisecond apart.
  if (quarantine.valid()) {
    const timespec times[2] = {time, time};
    ::utimensat(layer.entries.get(), name.c_str(), times, AT_SYMLINK_NOFOLLOW);
    if (::renameat(layer.entries.get(), name.c_str(), quarantine.get(), aside.c_str()) == 0) {
      trim_quarantine(kQuarantineLimit);
      return "moved to " + options.root.string() + "/" + kQuarantineDir + "/" + aside;
    }
  }
  if (::unlinkat(layer.entries.get(), name.c_str(), 0) == 0) return "removed";
  return "left in place (" + error_text(errno) + ")";
}

std::size_t DiskCacheImpl::trim_quarantine(std::size_t keep) {
  if (!quarantine.valid()) return 0;
  std::vector<DirectoryEntry> files = list_directory(quarantine.get());
  if (files.size() <= keep) return 0;
  // Newest first; equal times (a filesystem with coarse times) by the time in the name, the
  // digits after its last dot (seconds, then nine of nanoseconds: longer is later).
  const auto name_time = [](const std::string& name) {
    const std::size_t dot = name.rfind('.');
    return dot == std::string::npos ? std::string_view() : std::string_view(name).substr(dot + 1);
  };
  std::sort(files.begin(), files.end(), [&](const DirectoryEntry& a, const DirectoryEntry& b) {
    if (mtime_before(a.info, b.info) != mtime_before(b.info, a.info)) {
      return mtime_before(b.info, a.info);
    }
    const std::string_view ta = name_time(a.name), tb = name_time(b.name);
    if (ta.size() != tb.size()) return ta.size() > tb.size();
    return ta > tb;
  });
  std::size_t removed = 0;
  for (std::size_t i = keep; i < files.size(); ++i) {
    // A directory set aside (one planted under an entry name) goes with all it holds.
    if (remove_tree_at(quarantine.get(), files[i].name)) ++removed;
  }
  return removed;
}

std::vector<DiskCacheImpl::ScannedEntry> DiskCacheImpl::scan_entries(const Layer& layer) {
  std::vector<ScannedEntry> out;
  for (DirectoryEntry& item : list_directory(layer.entries.get())) {
    if (!item.name.ends_with(kEntrySuffix) || item.name.starts_with(".")) continue;
    out.push_back({std::move(item.name), item.info});
  }
  return out;
}

DiskCacheImpl::RemoveOutcome DiskCacheImpl::remove_entry_if_idle(int directory,
                                                                 const std::string& name,
                                                                 const struct stat& listed,
                                                                 bool spare_in_use) {
  Fd file = open_at(directory, name, O_RDONLY | O_NONBLOCK | O_NOCTTY);
  if (!file.valid()) {
    // A link is nothing anyone can be reading or holding: it goes. A file that cannot be
    // opened (another user's, in a shared root) might be held: it stays.
    if (errno != ELOOP) return errno == ENOENT ? RemoveOutcome::gone : RemoveOutcome::busy;
    return ::unlinkat(directory, name.c_str(), 0) == 0 ? RemoveOutcome::removed
                                                       : RemoveOutcome::gone;
  }
  if (!flock_retrying(file.get(), LOCK_EX | LOCK_NB)) return RemoveOutcome::busy;
  if (spare_in_use && is_in_use(name)) return RemoveOutcome::spared;
  struct stat opened {
  }, now{};
  if (::fstat(file.get(), &opened) != 0 || !same_file(opened, listed) ||
      ::fstatat(directory, name.c_str(), &now, AT_SYMLINK_NOFOLLOW) != 0 ||
      !same_file(now, opened)) {
    return RemoveOutcome::gone;
  }
  return ::unlinkat(directory, name.c_str(), 0) == 0 ? RemoveOutcome::removed : RemoveOutcome::gone;
}

bool DiskCacheImpl::mark_in_use(const std::string& name) {
  std::lock_guard lock(in_use_mutex);
  return in_use.insert(name).second;
}

void DiskCacheImpl::unmark_in_use(const std::string& name) {
  std::lock_guard lock(in_use_mutex);
  in_use.erase(name);
}

bool DiskCacheImpl::is_in_use(const std::string& name) {
  std::lock_guard lock(in_use_mutex);
  return in_use.count(name) != 0;
}

std::size_t DiskCacheImpl::in_use_count() {
  std::lock_guard lock(in_use_mutex);
  return in_use.size();
}

bool DiskCacheImpl::set_aside_if_damaged(std::size_t layer_index, const ScannedEntry& entry) {
  Layer& layer = layers[layer_index];
  Fd file = open_at(layer.entries.get(), entry.name, O_RDONLY | O_NONBLOCK | O_NOCTTY);
  if (!file.valid()) return false;  // gone, or not ours to read: eviction decides
  std::byte header[kCacheEntryHeaderBytes];
  const ssize_t read = ::pread(file.get(), header, sizeof header, 0);
  if (read < 0) return false;
  ReadResult result;
  result.info = entry.info;
  result.have_info = true;
  result.decoded = check_entry_header(std::span(header, static_cast<std::size_t>(read)),
                                      static_cast<std::uint64_t>(entry.info.st_size));
  if (result.decoded.ok()) return false;
  handle_bad(layer_index, entry.name, result);
  return true;
}

CacheGcReport DiskCacheImpl::evict(std::uint64_t max_bytes, bool spare_in_use) {
  CacheGcReport report;
  report.quota_bytes = max_bytes;
  Layer* layer = writable_layer();
  if (layer == nullptr) return report;
  std::lock_guard serial(evict_mutex);
  std::vector<ScannedEntry> entries = scan_entries(*layer);
  std::erase_if(entries, [&](const ScannedEntry& entry) {
    return S_ISREG(entry.info.st_mode) && set_aside_if_damaged(*root_layer, entry);
  });
  std::uint64_t total = 0;
  for (const ScannedEntry& entry : entries) {
    if (S_ISREG(entry.info.st_mode)) total += static_cast<std::uint64_t>(entry.info.st_size);
  }
  // An entry dated in the future (a clock that was ahead, a copy that kept another host's
  // times) has no meaningful last use: it counts as never used, so that it goes first rather
  // than outliving the entries in use. Its first use sets its time to now.
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  for (ScannedEntry& entry : entries) {
    if (entry.info.st_mtim.tv_sec > now.tv_sec + kClockSkewAllowance.count()) {
      entry.info.st_mtim = timespec{};
    }
  }
  std::sort(entries.begin(), entries.end(), [](const ScannedEntry& a, const ScannedEntry& b) {
    if (mtime_before(a.info, b.info) != mtime_before(b.info, a.info)) {
      return mtime_before(a.info, b.info);
    }
    return a.name < b.name;
  });
  std::set<std::string> removed;
  std::set<std::string> gone;
  for (const ScannedEntry& entry : entries) {
    if (total <= max_bytes) break;
    if (spare_in_use && is_in_use(entry.name)) continue;
    const auto size = static_cast<std::uint64_t>(entry.info.st_size);
    switch (remove_entry_if_idle(layer->entries.get(), entry.name, entry.info, spare_in_use)) {
      case RemoveOutcome::removed:
        total -= std::min(total, size);
        ++report.removed;
        report.removed_bytes += size;
        removed.insert(entry.name);
        evicted.fetch_add(1, std::memory_order_relaxed);
        break;
      case RemoveOutcome::busy:
        ++report.busy;
        break;
      case RemoveOutcome::gone:
        // Removed (or replaced) by another process since the listing: it no longer counts
        // toward the quota, so nothing older is removed in its place.
        total -= std::min(total, size);
        gone.insert(entry.name);
        break;
      case RemoveOutcome::spared:
        break;
    }
  }
  for (const ScannedEntry& entry : entries) {
    if (removed.count(entry.name) == 0 && gone.count(entry.name) == 0 &&
        S_ISREG(entry.info.st_mode)) {
      ++report.kept;
      report.kept_bytes += static_cast<std::uint64_t>(entry.info.st_size);
    }
  }
  return report;
}

std::size_t DiskCacheImpl::remove_abandoned_files(bool all_temporaries) {
  std::size_t removed = 0;
  auto sweep = [&](int directory, bool temporaries) {
    for (const DirectoryEntry& item : list_directory(directory)) {
      const bool temporary =
          item.name.starts_with(kTemporaryPrefix) || item.name.starts_with(".probe-");
      if (temporaries != temporary) continue;
      // A writer locks its temporary right after creating it; the age keeps a cleaner from
      // taking one in between. clear() waits a second, gc() a minute.
      if (temporary && !older_than(item.info.st_mtim,
                                   all_temporaries ? std::chrono::seconds(1) : kAbandonedAge)) {
        continue;
      }
      if (remove_entry_if_idle(directory, item.name, item.info) == RemoveOutcome::removed) {
        ++removed;
      }
    }
  };
  Layer* layer = writable_layer();
  if (layer != nullptr) sweep(layer->entries.get(), true);
  if (memo.valid()) sweep(memo.get(), true);
  if (locks.valid() && layer != nullptr) sweep(locks.get(), false);
  return removed;
}

CacheEntryInfo DiskCacheImpl::describe_entry(const Layer& layer, const std::string& name,
                                             const struct stat& listed, bool& absent) {
  CacheEntryInfo info;
  info.layer = layer.path;
  info.read_only = !layer.writable;
  info.path = layer.path + "/" + kEntriesDir + "/" + name;
  info.identity = name.substr(0, name.size() - kEntrySuffix.size());
  const std::optional<ProgramIdentity> named = identity_of_entry_name(name);
  ReadResult read;
  if (named) {
    read = read_entry(layer, name, &*named, false);
  } else {
    read.decoded.problem = EntryProblem::foreign;
    read.decoded.detail = "its name is not <32 hex digits>.zjc";
    read.info = listed;
    read.have_info = true;
  }
  absent = read.absent;
  const struct stat& stat_info = read.have_info ? read.info : listed;
  info.size_bytes = static_cast<std::uint64_t>(stat_info.st_size);
  info.age_seconds = std::max(0.0, seconds_since(stat_info.st_mtim));
  info.problem = read.decoded.problem;
  info.detail = read.decoded.detail;
  info.busy = read.busy;
  if (read.decoded.artifact) {
    info.kernel = read.decoded.artifact->kernel_name;
    info.key = read.decoded.artifact->key_text;
    info.arch = read.decoded.artifact->arch;
    info.language = read.decoded.artifact->language;
    info.compiler_version = read.decoded.artifact->compiler_version;
    if (read.decoded.ok()) {
      info.launch = entry_kind(info.language).describe_launch(*read.decoded.artifact);
    }
  }
  return info;
}

}  // namespace detail

using namespace detail::disk;

std::vector<CacheEntryInfo> DiskCache::list() {
  detail::DiskCacheImpl& s = *impl_;
  s.ensure_open();
  std::vector<CacheEntryInfo> out;
  for (const auto& layer : s.layers) {
    std::vector<detail::DiskCacheImpl::ScannedEntry> entries = s.scan_entries(layer);
    std::sort(entries.begin(), entries.end(),
              [](const auto& a, const auto& b) { return a.name < b.name; });
    for (const auto& entry : entries) {
      bool absent = false;
      CacheEntryInfo info = s.describe_entry(layer, entry.name, entry.info, absent);
      if (!absent) out.push_back(std::move(info));  // else removed while listing
    }
  }
  return out;
}

std::optional<CacheEntryInfo> DiskCache::root_entry(const ProgramIdentity& identity) {
  detail::DiskCacheImpl& s = *impl_;
  s.ensure_open();
  if (!s.root_layer) return std::nullopt;
  const detail::DiskCacheImpl::Layer& root = s.layers[*s.root_layer];
  const std::string name = entry_name(identity);
  struct stat listed {};
  if (::fstatat(root.entries.get(), name.c_str(), &listed, AT_SYMLINK_NOFOLLOW) != 0) {
    return std::nullopt;
  }
  bool absent = false;
  CacheEntryInfo info = s.describe_entry(root, name, listed, absent);
  if (absent) return std::nullopt;
  return info;
}

CacheVerifyReport DiskCache::verify(bool set_aside) {
  detail::DiskCacheImpl& s = *impl_;
  CacheVerifyReport report;
  report.set_aside = set_aside;
  for (CacheEntryInfo& entry : list()) {
    ++report.checked;
    if (entry.busy) {  // not read: neither valid nor bad
      report.busy.push_back(std::move(entry));
      continue;
    }
    if (entry.problem == EntryProblem::none) {
      ++report.valid;
      continue;
    }
    if (set_aside && !entry.read_only && s.root_layer) {
      // Read again now: the listing read every entry first, and another process may have set
      // this one aside and published a good one under its name since. Only what is still bad
      // goes, and set_aside checks that the name still holds the file read here.
      detail::DiskCacheImpl::Layer& root = s.layers[*s.root_layer];
      const std::string name = entry.identity + std::string(kEntrySuffix);
      const std::optional<ProgramIdentity> named = identity_of_entry_name(name);
      detail::DiskCacheImpl::ReadResult read;
      if (named) {
        read = s.read_entry(root, name, &*named, false);
      } else {  // a foreign name: nothing can heal it, its problem is its name
        read.decoded.problem = entry.problem;
        read.have_info =
            ::fstatat(root.entries.get(), name.c_str(), &read.info, AT_SYMLINK_NOFOLLOW) == 0;
      }
      if (named && read.decoded.ok()) {
        ++report.valid;  // healed since it was listed
        continue;
      }
      if (read.absent) {
        entry.detail += "; already gone";
      } else if (read.busy) {
        entry.detail += "; left in place (held locked now)";
      } else {
        entry.detail += "; " + s.set_aside(root, name, read);
      }
    }
    report.bad.push_back(std::move(entry));
  }
  return report;
}

CacheGcReport DiskCache::gc(std::optional<std::uint64_t> max_bytes) {
  detail::DiskCacheImpl& s = *impl_;
  s.ensure_open();
  CacheGcReport report = s.evict(max_bytes.value_or(s.options.max_bytes), false);
  if (s.writable_layer() != nullptr) {
    report.other_files_removed += s.remove_abandoned_files(false);
    report.other_files_removed += s.trim_quarantine(kQuarantineLimit);
  }
  return report;
}

CacheGcReport DiskCache::clear() {
  detail::DiskCacheImpl& s = *impl_;
  s.ensure_open();
  CacheGcReport report = s.evict(0, false);
  report.quota_bytes = 0;
  if (s.writable_layer() != nullptr) {
    report.other_files_removed += s.remove_abandoned_files(true);
    report.other_files_removed += s.trim_quarantine(0);
    // The version records describe the entries: they go with the last one.
    if (s.scan_entries(*s.writable_layer()).empty()) {
      report.other_files_removed += s.remove_version_records();
    }
    if (s.memo.valid()) {
      for (const DirectoryEntry& item : list_directory(s.memo.get())) {
        if (!item.name.starts_with(".") && !item.name.starts_with(kVersionRecordPrefix) &&
            ::unlinkat(s.memo.get(), item.name.c_str(), 0) == 0) {
          ++report.other_files_removed;
        }
      }
    }
  }
  return report;
}

}  // namespace zerojit
