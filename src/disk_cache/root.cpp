// Opening the cache root and its read-only layers, and deciding whether to trust them
// (docs/CACHE.md, "Safety rules" and "Layers, read-only and missing roots").
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "disk_cache/impl.hpp"
#include "environment.hpp"
#include "zerojit/log.hpp"

namespace zerojit::detail {

namespace disk {

std::optional<std::string> untrusted_because(const struct stat& info, bool sticky_is_enough) {
  if (!S_ISDIR(info.st_mode)) return std::string("it is not a directory");
  const uid_t user = ::geteuid();
  if (info.st_uid != user && info.st_uid != 0) {
    return "it is owned by uid " + std::to_string(info.st_uid) + ", not by this user (uid " +
           std::to_string(user) + ") or root";
  }
  if ((info.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    if (sticky_is_enough && (info.st_mode & S_ISVTX) != 0) return std::nullopt;
    return "other users can write it (mode " + mode_text(info.st_mode) + ")";
  }
  return std::nullopt;
}

std::optional<std::string> untrusted_host_code_because(const struct stat& info) {
  if (!S_ISREG(info.st_mode)) return std::string("it is not a regular file");
  const uid_t user = ::geteuid();
  if (info.st_uid != user && info.st_uid != 0) {
    return "it is owned by uid " + std::to_string(info.st_uid) + ", not by this user (uid " +
           std::to_string(user) + ") or root";
  }
  if ((info.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return "other users can write it (mode " + mode_text(info.st_mode) + ")";
  }
  if (info.st_nlink != 1) {
    // Another name of the same file may sit where others can write it.
    return "it has " + std::to_string(info.st_nlink) + " links";
  }
  return std::nullopt;
}

std::string refusal_advice() {
  return std::string(
             "they could plant compiled code in it. Use a directory only you can write "
             "(chmod go-w), or, if everyone who can write it is trusted, set ") +
         kAllowSharedVariable + "=1 (DiskCacheOptions::allow_shared_root)";
}

}  // namespace disk

using namespace disk;

DiskCacheImpl::DiskCacheImpl(DiskCacheOptions opts) : options(std::move(opts)) {
  shared = options.allow_shared_root || environment_flag(kAllowSharedVariable);
  // Shared roots leave permissions to the umask (a group sharing one sets 002); private
  // ones never make anything writable by others, which the trust check would then refuse.
  directory_mode = shared ? 0777 : 0755;
  file_mode = shared ? 0666 : 0644;
}

void DiskCacheImpl::warn(const std::string& text) const {
  if (options.warning_sink) {
    options.warning_sink("zerojit cache: " + text);
  } else {
    log_warning("cache", text);
  }
}

void DiskCacheImpl::ensure_open() {
  std::call_once(open_once, [this] { open(); });
}

DiskCacheImpl::Layer* DiskCacheImpl::writable_layer() {
  if (!root_layer || !layers[*root_layer].writable) return nullptr;
  return &layers[*root_layer];
}

void DiskCacheImpl::open() {
  for (const std::filesystem::path& path : options.read_only_layers) open_read_only_layer(path);
  open_root();
  if (state == CacheRootState::unusable && !layers.empty()) state = CacheRootState::read_only;
}

void DiskCacheImpl::open_read_only_layer(const std::filesystem::path& path) {
  Fd directory(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!directory.valid()) {
    warn("read-only layer " + path.string() + " cannot be opened (" + error_text(errno) +
         "); skipped");
    return;
  }
  Fd entries = open_directory_at(directory.get(), kEntriesDir);
  if (!entries.valid()) {
    warn("read-only layer " + path.string() + " has no usable " + kEntriesDir + "/ directory (" +
         error_text(errno) + "); skipped");
    return;
  }
  if (!shared) {
    for (const auto& [fd, name] : {std::pair{directory.get(), path.string()},
                                   std::pair{entries.get(), (path / kEntriesDir).string()}}) {
      struct stat info {};
      if (::fstat(fd, &info) != 0) return;
      if (auto why = untrusted_because(info, false)) {
        warn("refusing read-only layer " + name + ": " + *why + "; " + refusal_advice());
        return;
      }
    }
  }
  // Its NVRTC version records, if it has them (a root copied as a layer does): optional, and
  // ignored unless trusted like entries/.
  Fd versions = open_directory_at(directory.get(), kMemoDir);
  if (versions.valid() && !shared) {
    struct stat info {};
    if (::fstat(versions.get(), &info) != 0 || untrusted_because(info, false)) versions.reset();
  }
  layers.push_back(Layer{path.string(), std::move(entries), false, std::move(versions)});
}

void DiskCacheImpl::become_unusable(std::string why) {
  reason = std::move(why);
  state = CacheRootState::unusable;
  warn(reason + "; compiled kernels are kept in memory only");
}

namespace {

// Whether the root can be written: the first problem found is the one the warning names.
struct RootWritability {
  bool can_write = true;
  std::string problem;
};

// False when the root cannot be used at all; it has then become unusable.
bool open_trusted_root(DiskCacheImpl& s) {
  const std::filesystem::path& path = s.options.root;
  if (s.options.create_root) {
    struct stat existing {};
    if (::stat(path.c_str(), &existing) != 0 && errno == ENOENT) {
      if (const int error = make_directories(path, s.shared ? 0777 : 0700)) {
        s.become_unusable("cache root " + path.string() + " cannot be created (" +
                          error_text(error) + ")");
        return false;
      }
    }
  }
  s.root = Fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!s.root.valid()) {
    s.become_unusable("cache root " + path.string() + " cannot be opened (" + error_text(errno) +
                      ")");
    return false;
  }
  if (!s.shared) {
    struct stat info {};
    if (::fstat(s.root.get(), &info) != 0) {
      s.become_unusable("cache root " + path.string() + " cannot be examined (" +
                        error_text(errno) + ")");
      return false;
    }
    if (auto why = untrusted_because(info, true)) {
      s.become_unusable("refusing cache root " + path.string() + ": " + *why + "; " +
                        refusal_advice());
      return false;
    }
  }
  return true;
}

// Created when missing (failing only means read-only), never a link, and trusted like the root
// but without the sticky exception (only we write in it). False when the root cannot be used
// at all; the cache is then left unusable.
bool open_subdirectory(DiskCacheImpl& s, const char* name, Fd& out, RootWritability& writability) {
  const std::filesystem::path& path = s.options.root;
  if (::mkdirat(s.root.get(), name, s.directory_mode) != 0 && errno != EEXIST) {
    if (writability.can_write) writability.problem = std::string(name) + "/: " + error_text(errno);
    writability.can_write = false;
  }
  out = open_directory_at(s.root.get(), name);
  if (!out.valid()) {
    if (errno == ENOENT) return true;  // absent and not creatable: read-only already
    s.become_unusable("cache root " + path.string() + ": " + name + " " +
                      (errno == ELOOP || errno == ENOTDIR
                           ? std::string("is a symbolic link or not a directory; links "
                                         "inside a cache root are never followed")
                           : "cannot be opened (" + error_text(errno) + ")"));
    return false;
  }
  if (!s.shared) {
    struct stat info {};
    if (::fstat(out.get(), &info) != 0) return false;
    if (auto why = untrusted_because(info, false)) {
      s.become_unusable("refusing cache root " + path.string() + ": its " + name + "/ " + *why +
                        "; " + refusal_advice());
      out.reset();
      return false;
    }
  }
  return true;
}

// mkdir succeeding (or EEXIST) does not prove that files can be created.
void probe_file_creation(DiskCacheImpl& s, const Fd& entries, RootWritability& writability) {
  const std::string probe = ".probe-" + std::to_string(::getpid()) + "-" +
                            std::to_string(s.temporary_counter.fetch_add(1));
  Fd file = open_at(entries.get(), probe, O_WRONLY | O_CREAT | O_EXCL, 0600);
  if (file.valid()) {
    ::unlinkat(entries.get(), probe.c_str(), 0);
  } else {
    writability.can_write = false;
    writability.problem = std::string(kEntriesDir) + "/: " + error_text(errno);
  }
}

}  // namespace

void DiskCacheImpl::open_root() {
  const std::filesystem::path& path = options.root;
  if (path.empty()) {
    if (options.read_only_layers.empty()) {
      become_unusable("no cache root (set ZEROJIT_CACHE_DIR, XDG_CACHE_HOME or HOME)");
    } else {
      // A pack-only process (ZEROJIT_CACHE_DIR=off in a read-only image): nothing to warn
      // about, its layers serve it.
      reason = "no writable cache root: only the read-only layers are read";
    }
    return;
  }
  if (!open_trusted_root(*this)) return;

  RootWritability writability;
  Fd entries;
  if (!open_subdirectory(*this, kEntriesDir, entries, writability) ||
      !open_subdirectory(*this, kLocksDir, locks, writability) ||
      !open_subdirectory(*this, kQuarantineDir, quarantine, writability) ||
      !open_subdirectory(*this, kMemoDir, memo, writability)) {
    return;
  }
  if (!entries.valid()) {
    become_unusable("cache root " + path.string() + " is not writable (" + writability.problem +
                    ") and holds no entries");
    return;
  }
  if (writability.can_write && (!locks.valid() || !quarantine.valid() || !memo.valid())) {
    writability.can_write = false;
  }
  if (writability.can_write) probe_file_creation(*this, entries, writability);
  root_layer = layers.size();
  layers.push_back(Layer{path.string(), std::move(entries), writability.can_write,
                         memo.valid() ? Fd(::fcntl(memo.get(), F_DUPFD_CLOEXEC, 0)) : Fd()});
  if (writability.can_write) {
    state = CacheRootState::writable;
  } else {
    state = CacheRootState::read_only;
    reason = "cache root " + path.string() + " is not writable (" + writability.problem + ")";
    warn(reason + ": its entries are used, but newly compiled kernels are not saved");
  }
}

}  // namespace zerojit::detail
