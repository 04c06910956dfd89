#include "zerojit/disk_cache.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>
#include <system_error>
#include <thread>
#include <tuple>
#include <utility>

#include "zerojit/error.hpp"
#include "zerojit/key.hpp"

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace zerojit {
namespace {

namespace fs = std::filesystem;

// The root's layout (docs/CACHE.md). Every name below the root is opened relative to a
// directory descriptor and without following symbolic links.
constexpr const char* kEntriesDir = "entries";
constexpr const char* kLocksDir = "locks";
constexpr const char* kQuarantineDir = "quarantine";
constexpr const char* kMemoDir = "nvrtc-version";
constexpr std::string_view kEntrySuffix = ".zjc";
constexpr std::string_view kTemporaryPrefix = ".tmp-";
// Damaged entries kept for inspection; older ones are deleted.
constexpr std::size_t kQuarantineLimit = 16;
// A temporary file this old that no process holds locked was left by a dead writer.
constexpr auto kAbandonedAge = std::chrono::seconds(60);
constexpr std::size_t kMaxMemoBytes = 4096;
constexpr std::string_view kMemoHeader = "zerojit-nvrtc-version 1";
constexpr const char* kAllowSharedVariable = "ZEROJIT_CACHE_ALLOW_SHARED";

std::string error_text(int error) {
  return std::error_code(error, std::generic_category()).message();
}

bool env_flag(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && (std::string_view(value) == "1" || std::string_view(value) == "true" ||
                              std::string_view(value) == "yes");
}

const char* env_text(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : nullptr;
}

// An owned file descriptor.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) {
      reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

Fd open_at(int directory, const std::string& name, int flags, mode_t mode = 0) {
  int fd;
  do {
    fd = ::openat(directory, name.c_str(), flags | O_CLOEXEC | O_NOFOLLOW, mode);
  } while (fd < 0 && errno == EINTR);
  return Fd(fd);
}

// Opens a directory below `parent` without following a link; ENOTDIR/ELOOP when the name is
// a link or not a directory.
Fd open_directory_at(int parent, const std::string& name) {
  return open_at(parent, name, O_RDONLY | O_DIRECTORY);
}

bool flock_retrying(int fd, int operation) {
  while (::flock(fd, operation) != 0) {
    if (errno != EINTR) return false;
  }
  return true;
}

bool write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t written = ::write(fd, data.data(), data.size());
    if (written < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data.remove_prefix(static_cast<std::size_t>(written));
  }
  return true;
}

// Reads up to `limit` bytes (one more than expected, to notice a file that grew).
bool read_all(int fd, std::size_t limit, std::string& out) {
  out.resize(limit);
  std::size_t done = 0;
  while (done < limit) {
    const ssize_t got = ::pread(fd, out.data() + done, limit - done, static_cast<off_t>(done));
    if (got < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    if (got == 0) break;
    done += static_cast<std::size_t>(got);
  }
  out.resize(done);
  return true;
}

struct DirectoryEntry {
  std::string name;
  struct stat info {};
};

// The names in a directory with their lstat, "." and ".." left out. Names that vanish while
// listing are skipped.
std::vector<DirectoryEntry> list_directory(int directory) {
  std::vector<DirectoryEntry> out;
  const int copy = ::fcntl(directory, F_DUPFD_CLOEXEC, 0);
  if (copy < 0) return out;
  DIR* stream = ::fdopendir(copy);
  if (stream == nullptr) {
    ::close(copy);
    return out;
  }
  ::rewinddir(stream);
  while (const dirent* item = ::readdir(stream)) {
    const std::string_view name = item->d_name;
    if (name == "." || name == "..") continue;
    DirectoryEntry entry;
    entry.name = std::string(name);
    if (::fstatat(directory, item->d_name, &entry.info, AT_SYMLINK_NOFOLLOW) != 0) continue;
    out.push_back(std::move(entry));
  }
  ::closedir(stream);
  return out;
}

double seconds_since(const timespec& time) {
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  return static_cast<double>(now.tv_sec - time.tv_sec) +
         static_cast<double>(now.tv_nsec - time.tv_nsec) * 1e-9;
}

bool older_than(const timespec& time, std::chrono::seconds age) {
  return seconds_since(time) > static_cast<double>(age.count());
}

bool mtime_before(const struct stat& a, const struct stat& b) {
  if (a.st_mtim.tv_sec != b.st_mtim.tv_sec) return a.st_mtim.tv_sec < b.st_mtim.tv_sec;
  return a.st_mtim.tv_nsec < b.st_mtim.tv_nsec;
}

std::string mode_text(mode_t mode) {
  char buffer[8];
  std::snprintf(buffer, sizeof buffer, "%04o", static_cast<unsigned>(mode & 07777));
  return buffer;
}

std::string human_bytes(std::uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  std::size_t unit = 0;
  while (value >= 1024.0 && unit + 1 < std::size(units)) {
    value /= 1024.0;
    ++unit;
  }
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, unit == 0 ? "%.0f %s" : "%.1f %s", value, units[unit]);
  return buffer;
}

std::string hash_text(std::uint64_t hash) {
  char buffer[24];
  std::snprintf(buffer, sizeof buffer, "xxh3:%016" PRIx64, hash);
  return buffer;
}

std::string entry_name(const ProgramIdentity& identity) {
  return identity.hex() + std::string(kEntrySuffix);
}

// The identity an entry file name stands for, if it is "<32 lower-case hex digits>.zjc".
std::optional<ProgramIdentity> identity_of_entry_name(std::string_view name) {
  if (name.size() != 32 + kEntrySuffix.size() || !name.ends_with(kEntrySuffix)) return {};
  try {
    return ProgramIdentity::from_hex(name.substr(0, 32));
  } catch (const Error&) {
    return {};
  }
}

bool same_file(const struct stat& a, const struct stat& b) {
  return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

// Why a directory must not be trusted, or nothing. Trusted: owned by this user or root, and
// writable by no one else, except that a sticky directory (others may add names but not
// rename or remove ours) is accepted where `sticky_is_enough`.
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

std::string refusal_advice() {
  return std::string(
             "they could plant compiled code in it. Use a directory only you can write "
             "(chmod go-w), or, if everyone who can write it is trusted, set ") +
         kAllowSharedVariable + "=1 (DiskCacheOptions::allow_shared_root)";
}

// Creates `path` and its missing parents with `mode`.
int make_directories(const fs::path& path, mode_t mode) {
  fs::path prefix;
  for (const fs::path& part : path) {
    prefix /= part;
    if (prefix == prefix.root_path()) continue;
    if (::mkdir(prefix.c_str(), mode) != 0 && errno != EEXIST) return errno;
  }
  return 0;
}

std::uint64_t xxh64_of(std::string_view text) { return XXH3_64bits(text.data(), text.size()); }

void append_text_field(std::string& out, const char* name, std::string_view value) {
  out += '"';
  out += name;
  out += "\":";
  detail::append_json_string(out, value);
}

void append_number_field(std::string& out, const char* name, std::uint64_t value) {
  out += '"';
  out += name;
  out += "\":" + std::to_string(value);
}

std::string entry_json(const CacheEntryInfo& entry) {
  std::string out = "{";
  append_text_field(out, "identity", entry.identity);
  out += ',';
  append_text_field(out, "kernel", entry.kernel);
  out += ',';
  append_text_field(out, "key", entry.key);
  out += ',';
  append_text_field(out, "arch", entry.arch);
  out += ',';
  append_text_field(out, "nvrtc", entry.nvrtc_version);
  out += ',';
  append_number_field(out, "size", entry.size_bytes);
  out += ",\"age_seconds\":";
  detail::append_double(out, entry.age_seconds);
  out += ',';
  append_text_field(out, "layer", entry.layer);
  out += ",\"read_only\":" + std::string(entry.read_only ? "true" : "false") + ",";
  append_text_field(out, "path", entry.path);
  out += ',';
  append_text_field(out, "status", to_string(entry.problem));
  if (!entry.detail.empty()) {
    out += ',';
    append_text_field(out, "detail", entry.detail);
  }
  return out + "}";
}

}  // namespace

namespace detail {

// The cache's state, shared with the lock guards it hands out.
struct DiskCacheImpl {
  struct Layer {
    std::string path;
    Fd entries;
    bool writable = false;  // only the root, when it can be written
  };

  // What reading one entry file found.
  struct ReadResult {
    bool absent = false;
    DecodedEntry decoded;
    struct stat info {};
    bool have_info = false;
  };

  explicit DiskCacheImpl(DiskCacheOptions opts) : options(std::move(opts)) {
    shared = options.allow_shared_root || env_flag(kAllowSharedVariable);
    // Shared roots leave permissions to the umask (a group sharing one sets 002); private
    // ones never make anything writable by others, which the trust check would then refuse.
    directory_mode = shared ? 0777 : 0755;
    file_mode = shared ? 0666 : 0644;
  }

  DiskCacheOptions options;
  bool shared = false;
  mode_t directory_mode = 0755;
  mode_t file_mode = 0644;

  std::once_flag open_once;
  std::vector<Layer> layers;  // read-only layers first, the root last
  std::optional<std::size_t> root_layer;
  Fd root, locks, quarantine, memo;
  CacheRootState state = CacheRootState::unusable;
  std::string reason;

  std::atomic<std::uint64_t> hits{0}, misses{0}, bad_entries{0}, published{0}, write_failures{0},
      evicted{0}, lock_waits{0}, lock_timeouts{0};
  std::atomic<bool> write_failure_reported{false};
  std::atomic<std::uint64_t> temporary_counter{0};

  std::mutex reported_mutex;
  // Bad files already reported (layer, device, inode, size, mtime), so each is reported once
  // even where it cannot be moved aside (read-only layers).
  std::set<std::tuple<std::size_t, dev_t, ino_t, off_t, std::int64_t, std::int64_t>> reported;

  void warn(const std::string& text) const {
    const std::string line = "zerojit cache: " + text;
    if (options.warning_sink) {
      options.warning_sink(line);
    } else {
      std::fprintf(stderr, "%s\n", line.c_str());
    }
  }

  void ensure_open() {
    std::call_once(open_once, [this] { open(); });
  }

  Layer* writable_layer() {
    if (!root_layer || !layers[*root_layer].writable) return nullptr;
    return &layers[*root_layer];
  }

  void open() {
    for (const fs::path& path : options.read_only_layers) open_read_only_layer(path);
    open_root();
    if (state == CacheRootState::unusable && !layers.empty()) state = CacheRootState::read_only;
  }

  void open_read_only_layer(const fs::path& path) {
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
    layers.push_back(Layer{path.string(), std::move(entries), false});
  }

  void become_unusable(std::string why) {
    reason = std::move(why);
    state = CacheRootState::unusable;
    warn(reason + "; compiled kernels are kept in memory only");
  }

  void open_root() {
    const fs::path& path = options.root;
    if (path.empty()) {
      reason = "no cache root (set ZEROJIT_CACHE_DIR, XDG_CACHE_HOME or HOME)";
      if (options.read_only_layers.empty()) {
        become_unusable(reason);
      }
      return;
    }
    if (options.create_root) {
      struct stat existing {};
      if (::stat(path.c_str(), &existing) != 0 && errno == ENOENT) {
        if (const int error = make_directories(path, shared ? 0777 : 0700)) {
          become_unusable("cache root " + path.string() + " cannot be created (" +
                          error_text(error) + ")");
          return;
        }
      }
    }
    root = Fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!root.valid()) {
      become_unusable("cache root " + path.string() + " cannot be opened (" + error_text(errno) +
                      ")");
      return;
    }
    if (!shared) {
      struct stat info {};
      if (::fstat(root.get(), &info) != 0) {
        become_unusable("cache root " + path.string() + " cannot be examined (" +
                        error_text(errno) + ")");
        return;
      }
      if (auto why = untrusted_because(info, true)) {
        become_unusable("refusing cache root " + path.string() + ": " + *why + "; " +
                        refusal_advice());
        return;
      }
    }

    // Each subdirectory: created when missing (failing only means read-only), never a link,
    // and trusted like the root but without the sticky exception (only we write in it).
    bool can_write = true;
    std::string write_problem;
    auto subdirectory = [&](const char* name, Fd& out) -> bool {
      if (::mkdirat(root.get(), name, directory_mode) != 0 && errno != EEXIST) {
        if (can_write) write_problem = std::string(name) + "/: " + error_text(errno);
        can_write = false;
      }
      out = open_directory_at(root.get(), name);
      if (!out.valid()) {
        if (errno == ENOENT) return true;  // absent and not creatable: read-only already
        become_unusable("cache root " + path.string() + ": " + name + " " +
                        (errno == ELOOP || errno == ENOTDIR
                             ? std::string("is a symbolic link or not a directory; links "
                                           "inside a cache root are never followed")
                             : "cannot be opened (" + error_text(errno) + ")"));
        return false;
      }
      if (!shared) {
        struct stat info {};
        if (::fstat(out.get(), &info) != 0) return false;
        if (auto why = untrusted_because(info, false)) {
          become_unusable("refusing cache root " + path.string() + ": its " + name + "/ " + *why +
                          "; " + refusal_advice());
          out.reset();
          return false;
        }
      }
      return true;
    };
    Fd entries;
    if (!subdirectory(kEntriesDir, entries) || !subdirectory(kLocksDir, locks) ||
        !subdirectory(kQuarantineDir, quarantine) || !subdirectory(kMemoDir, memo)) {
      return;
    }
    if (!entries.valid()) {
      become_unusable("cache root " + path.string() + " is not writable (" + write_problem +
                      ") and holds no entries");
      return;
    }
    if (can_write && (!locks.valid() || !quarantine.valid() || !memo.valid())) can_write = false;
    if (can_write) {
      // mkdir succeeding (or EEXIST) does not prove that files can be created: probe.
      const std::string probe = ".probe-" + std::to_string(::getpid()) + "-" +
                                std::to_string(temporary_counter.fetch_add(1));
      Fd file = open_at(entries.get(), probe, O_WRONLY | O_CREAT | O_EXCL, 0600);
      if (file.valid()) {
        ::unlinkat(entries.get(), probe.c_str(), 0);
      } else {
        can_write = false;
        write_problem = std::string(kEntriesDir) + "/: " + error_text(errno);
      }
    }
    root_layer = layers.size();
    layers.push_back(Layer{path.string(), std::move(entries), can_write});
    if (can_write) {
      state = CacheRootState::writable;
    } else {
      state = CacheRootState::read_only;
      reason = "cache root " + path.string() + " is not writable (" + write_problem + ")";
      warn(reason + ": its entries are used, but newly compiled kernels are not saved");
    }
  }

  ReadResult read_entry(const Layer& layer, const std::string& name,
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
        result.decoded.detail =
            "it is a symbolic link; links inside a cache root are never followed";
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
    // A shared lock while reading: eviction takes an exclusive one without waiting and skips
    // the entry when it cannot.
    flock_retrying(file.get(), LOCK_SH);
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

  // Moves a bad entry of the root to quarantine/ (or removes it), unless the name has been
  // replaced since it was read. Returns what was done, for the report.
  std::string set_aside(Layer& layer, const std::string& name, const ReadResult& read) {
    if (!layer.writable) return "left in place (read-only layer)";
    struct stat now {};
    if (::fstatat(layer.entries.get(), name.c_str(), &now, AT_SYMLINK_NOFOLLOW) != 0) {
      return "already gone";
    }
    if (read.have_info && !same_file(now, read.info)) return "already replaced";
    timespec time{};
    ::clock_gettime(CLOCK_REALTIME, &time);
    const std::string aside = name.substr(0, name.size() - kEntrySuffix.size()) + "." +
                              std::string(to_string(read.decoded.problem)) + "." +
                              std::to_string(::getpid()) + "." + std::to_string(time.tv_sec) +
                              std::to_string(time.tv_nsec);
    if (quarantine.valid() &&
        ::renameat(layer.entries.get(), name.c_str(), quarantine.get(), aside.c_str()) == 0) {
      trim_quarantine(kQuarantineLimit);
      return "moved to " + options.root.string() + "/" + kQuarantineDir + "/" + aside;
    }
    if (::unlinkat(layer.entries.get(), name.c_str(), 0) == 0) return "removed";
    return "left in place (" + error_text(errno) + ")";
  }

  // Reports a bad entry once (per file) and sets it aside.
  void handle_bad(std::size_t layer_index, const std::string& name, const ReadResult& read) {
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
         std::string(to_string(read.decoded.problem)) + "): " + read.decoded.detail + "; " +
         action + "; it is treated as a miss and compiled again");
  }

  std::size_t trim_quarantine(std::size_t keep) {
    if (!quarantine.valid()) return 0;
    std::vector<DirectoryEntry> files = list_directory(quarantine.get());
    if (files.size() <= keep) return 0;
    std::sort(files.begin(), files.end(), [](const DirectoryEntry& a, const DirectoryEntry& b) {
      return mtime_before(b.info, a.info);  // newest first
    });
    std::size_t removed = 0;
    for (std::size_t i = keep; i < files.size(); ++i) {
      if (::unlinkat(quarantine.get(), files[i].name.c_str(), 0) == 0) ++removed;
    }
    return removed;
  }

  void report_write_failure(const std::string& what, int error) {
    write_failures.fetch_add(1, std::memory_order_relaxed);
    if (write_failure_reported.exchange(true)) return;
    warn("could not save " + what + " in " + options.root.string() + " (" + error_text(error) +
         "); the compiled kernel is used, but other processes will compile it again. Further "
         "write failures are counted, not reported");
  }

  // Writes `bytes` under `name` in `directory` atomically: a temporary file in the same
  // directory, written, flushed to disk, renamed over the name, and the directory flushed.
  // The temporary is locked while written, so a cleaner can tell a live writer from a dead
  // one. Returns 0 or the errno of the step that failed.
  int publish_file(int directory, const std::string& name, std::string_view bytes) {
    const std::string temporary = std::string(kTemporaryPrefix) + name + "." +
                                  std::to_string(::getpid()) + "." +
                                  std::to_string(temporary_counter.fetch_add(1));
    Fd file = open_at(directory, temporary, O_WRONLY | O_CREAT | O_EXCL, file_mode);
    if (!file.valid()) return errno;
    int error = 0;
    if (!flock_retrying(file.get(), LOCK_EX) || !write_all(file.get(), bytes) ||
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

  struct ScannedEntry {
    std::string name;
    struct stat info {};
  };

  std::vector<ScannedEntry> scan_entries(const Layer& layer) {
    std::vector<ScannedEntry> out;
    for (DirectoryEntry& item : list_directory(layer.entries.get())) {
      if (!item.name.ends_with(kEntrySuffix) || item.name.starts_with(".")) continue;
      out.push_back({std::move(item.name), item.info});
    }
    return out;
  }

  // Removes an entry unless another process holds it (reading or writing) or it was replaced
  // since it was listed.
  enum class RemoveOutcome { removed, busy, gone };
  RemoveOutcome remove_entry_if_idle(int directory, const std::string& name,
                                     const struct stat& listed) {
    Fd file = open_at(directory, name, O_RDONLY | O_NONBLOCK | O_NOCTTY);
    if (!file.valid()) {
      // A link is nothing anyone can be reading or holding: it goes. A file that cannot be
      // opened (another user's, in a shared root) might be held: it stays.
      if (errno != ELOOP) return errno == ENOENT ? RemoveOutcome::gone : RemoveOutcome::busy;
      return ::unlinkat(directory, name.c_str(), 0) == 0 ? RemoveOutcome::removed
                                                         : RemoveOutcome::gone;
    }
    if (!flock_retrying(file.get(), LOCK_EX | LOCK_NB)) return RemoveOutcome::busy;
    struct stat opened {
    }, now{};
    if (::fstat(file.get(), &opened) != 0 || !same_file(opened, listed) ||
        ::fstatat(directory, name.c_str(), &now, AT_SYMLINK_NOFOLLOW) != 0 ||
        !same_file(now, opened)) {
      return RemoveOutcome::gone;
    }
    return ::unlinkat(directory, name.c_str(), 0) == 0 ? RemoveOutcome::removed
                                                       : RemoveOutcome::gone;
  }

  // Least-recently-used eviction down to `max_bytes`; `keep` (just published) stays.
  CacheGcReport evict(std::uint64_t max_bytes, const std::string* keep) {
    CacheGcReport report;
    report.quota_bytes = max_bytes;
    Layer* layer = writable_layer();
    if (layer == nullptr) return report;
    std::vector<ScannedEntry> entries = scan_entries(*layer);
    std::uint64_t total = 0;
    for (const ScannedEntry& entry : entries) {
      if (S_ISREG(entry.info.st_mode)) total += static_cast<std::uint64_t>(entry.info.st_size);
    }
    std::sort(entries.begin(), entries.end(), [](const ScannedEntry& a, const ScannedEntry& b) {
      if (mtime_before(a.info, b.info) != mtime_before(b.info, a.info)) {
        return mtime_before(a.info, b.info);
      }
      return a.name < b.name;
    });
    std::set<std::string> removed;
    for (const ScannedEntry& entry : entries) {
      if (total <= max_bytes) break;
      if (keep != nullptr && entry.name == *keep) continue;
      const auto size = static_cast<std::uint64_t>(entry.info.st_size);
      switch (remove_entry_if_idle(layer->entries.get(), entry.name, entry.info)) {
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
          break;
      }
    }
    for (const ScannedEntry& entry : entries) {
      if (removed.count(entry.name) == 0 && S_ISREG(entry.info.st_mode)) {
        ++report.kept;
        report.kept_bytes += static_cast<std::uint64_t>(entry.info.st_size);
      }
    }
    return report;
  }

  // Temporaries of dead writers (unlocked and old) and lock files no process holds.
  std::size_t remove_abandoned_files(bool all_temporaries) {
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

  std::string memo_name(std::string_view fingerprint) const {
    char buffer[24];
    std::snprintf(buffer, sizeof buffer, "%016" PRIx64, xxh64_of(fingerprint));
    return buffer;
  }

  static std::string memo_text(std::string_view fingerprint, std::string_view version) {
    std::string body = std::string(kMemoHeader) + "\nfingerprint=" + std::string(fingerprint) +
                       "\nversion=" + std::string(version) + "\n";
    char checksum[32];
    std::snprintf(checksum, sizeof checksum, "checksum=%016" PRIx64 "\n", xxh64_of(body));
    return body + checksum;
  }
};

}  // namespace detail

namespace {

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
  return c;
}

std::string DiskCache::describe() const {
  std::string out = "disk cache " + (impl_->options.root.empty() ? std::string("(no root)")
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
  for (std::size_t i = 0; i < s.layers.size(); ++i) {
    detail::DiskCacheImpl::ReadResult read = s.read_entry(s.layers[i], name, &identity, true);
    if (read.absent) continue;
    if (read.decoded.ok()) {
      s.hits.fetch_add(1, std::memory_order_relaxed);
      return std::move(read.decoded.artifact);
    }
    s.handle_bad(i, name, read);
  }
  s.misses.fetch_add(1, std::memory_order_relaxed);
  return std::nullopt;
}

void DiskCache::publish(const CompiledArtifact& artifact) noexcept {
  detail::DiskCacheImpl& s = *impl_;
  try {
    s.ensure_open();
    detail::DiskCacheImpl::Layer* layer = s.writable_layer();
    if (layer == nullptr) return;  // read-only or unusable: reported once when opened
    const std::string what = artifact.kernel_name + " [" + artifact.key_text + "]";
    const std::string bytes = encode_entry(artifact);
    if (bytes.size() > s.options.max_bytes) {
      s.report_write_failure(
          what + " (" + human_bytes(bytes.size()) + ", larger than the whole quota)", EFBIG);
      return;
    }
    const std::string name = entry_name(artifact.identity);
    if (const int error = s.publish_file(layer->entries.get(), name, bytes)) {
      s.report_write_failure(what, error);
      return;
    }
    s.published.fetch_add(1, std::memory_order_relaxed);
    s.evict(s.options.max_bytes, &name);
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
  detail::DiskCacheImpl& s = *impl_;
  s.ensure_open();
  if (s.writable_layer() == nullptr || !s.locks.valid()) return nullptr;
  const std::string name = identity.hex() + ".lock";
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + s.options.lock_timeout;
  bool waited = false;
  auto pause = std::chrono::milliseconds(2);
  while (true) {
    Fd file = open_at(s.locks.get(), name, O_RDONLY | O_CREAT, s.file_mode);
    if (!file.valid()) return nullptr;  // cannot lock: compile without waiting
    while (!flock_retrying(file.get(), LOCK_EX | LOCK_NB)) {
      if (errno != EWOULDBLOCK) return nullptr;
      if (!waited) {
        waited = true;
        s.lock_waits.fetch_add(1, std::memory_order_relaxed);
      }
      if (std::chrono::steady_clock::now() >= deadline) {
        s.lock_timeouts.fetch_add(1, std::memory_order_relaxed);
        char seconds[32];
        std::snprintf(
            seconds, sizeof seconds, "%.1f",
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
        s.warn("waited " + std::string(seconds) + " s for another process to compile identity " +
               identity.hex() + " (lock " + s.options.root.string() + "/" + kLocksDir + "/" + name +
               "); compiling it in this process instead");
        return nullptr;
      }
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::milliseconds(50));
    }
    struct stat held {
    }, current{};
    if (::fstat(file.get(), &held) == 0 &&
        ::fstatat(s.locks.get(), name.c_str(), &current, AT_SYMLINK_NOFOLLOW) == 0 &&
        same_file(held, current)) {
      return std::make_unique<FileLockGuard>(impl_, std::move(file), name);
    }
    // The previous holder unlinked it on release: take the lock on the current file.
  }
}

std::optional<std::string> DiskCache::recall_nvrtc_version(std::string_view fingerprint) {
  detail::DiskCacheImpl& s = *impl_;
  s.ensure_open();
  if (!s.memo.valid()) return std::nullopt;
  const std::string name = s.memo_name(fingerprint);
  Fd file = open_at(s.memo.get(), name, O_RDONLY | O_NONBLOCK | O_NOCTTY);
  if (!file.valid()) return std::nullopt;
  struct stat info {};
  std::string text;
  if (::fstat(file.get(), &info) != 0 || !S_ISREG(info.st_mode) ||
      static_cast<std::uint64_t>(info.st_size) > kMaxMemoBytes ||
      !read_all(file.get(), kMaxMemoBytes + 1, text)) {
    return std::nullopt;
  }
  // Accepted only when it is exactly what remember_nvrtc_version writes for this fingerprint
  // and some version: anything else is ignored and later rewritten.
  const std::size_t start = text.find("\nversion=");
  const std::size_t end = start == std::string::npos ? start : text.find('\n', start + 1);
  if (end == std::string::npos) return std::nullopt;
  const std::string version = text.substr(start + 9, end - start - 9);
  const bool plausible = !version.empty() && version.size() <= 32 &&
                         std::all_of(version.begin(), version.end(),
                                     [](char c) { return (c >= '0' && c <= '9') || c == '.'; });
  if (!plausible || text != detail::DiskCacheImpl::memo_text(fingerprint, version)) {
    return std::nullopt;
  }
  return version;
}

void DiskCache::remember_nvrtc_version(std::string_view fingerprint,
                                       std::string_view version) noexcept {
  detail::DiskCacheImpl& s = *impl_;
  try {
    s.ensure_open();
    if (s.writable_layer() == nullptr || !s.memo.valid()) return;
    if (const int error = s.publish_file(s.memo.get(), s.memo_name(fingerprint),
                                         detail::DiskCacheImpl::memo_text(fingerprint, version))) {
      s.report_write_failure("the NVRTC version memo", error);
    }
  } catch (...) {
    s.write_failures.fetch_add(1, std::memory_order_relaxed);
  }
}

std::vector<CacheEntryInfo> DiskCache::list() {
  detail::DiskCacheImpl& s = *impl_;
  s.ensure_open();
  std::vector<CacheEntryInfo> out;
  for (const auto& layer : s.layers) {
    std::vector<detail::DiskCacheImpl::ScannedEntry> entries = s.scan_entries(layer);
    std::sort(entries.begin(), entries.end(),
              [](const auto& a, const auto& b) { return a.name < b.name; });
    for (const auto& entry : entries) {
      CacheEntryInfo info;
      info.layer = layer.path;
      info.read_only = !layer.writable;
      info.path = layer.path + "/" + kEntriesDir + "/" + entry.name;
      info.identity = entry.name.substr(0, entry.name.size() - kEntrySuffix.size());
      const std::optional<ProgramIdentity> named = identity_of_entry_name(entry.name);
      detail::DiskCacheImpl::ReadResult read;
      if (named) {
        read = s.read_entry(layer, entry.name, &*named, false);
      } else {
        read.decoded.problem = EntryProblem::foreign;
        read.decoded.detail = "its name is not <32 hex digits>.zjc";
        read.info = entry.info;
        read.have_info = true;
      }
      if (read.absent) continue;  // removed while listing
      const struct stat& stat_info = read.have_info ? read.info : entry.info;
      info.size_bytes = static_cast<std::uint64_t>(stat_info.st_size);
      info.age_seconds = std::max(0.0, seconds_since(stat_info.st_mtim));
      info.problem = read.decoded.problem;
      info.detail = read.decoded.detail;
      if (read.decoded.artifact) {
        info.kernel = read.decoded.artifact->kernel_name;
        info.key = read.decoded.artifact->key_text;
        info.arch = read.decoded.artifact->arch;
        info.nvrtc_version = read.decoded.artifact->nvrtc_version;
      }
      out.push_back(std::move(info));
    }
  }
  return out;
}

CacheVerifyReport DiskCache::verify(bool set_aside) {
  detail::DiskCacheImpl& s = *impl_;
  CacheVerifyReport report;
  report.set_aside = set_aside;
  for (CacheEntryInfo& entry : list()) {
    ++report.checked;
    if (entry.problem == EntryProblem::none) {
      ++report.valid;
      continue;
    }
    if (set_aside && !entry.read_only && s.root_layer) {
      detail::DiskCacheImpl::ReadResult read;
      read.decoded.problem = entry.problem;
      const std::string name = entry.identity + std::string(kEntrySuffix);
      read.have_info = ::fstatat(s.layers[*s.root_layer].entries.get(), name.c_str(), &read.info,
                                 AT_SYMLINK_NOFOLLOW) == 0;
      entry.detail += "; " + s.set_aside(s.layers[*s.root_layer], name, read);
    }
    report.bad.push_back(std::move(entry));
  }
  return report;
}

CacheGcReport DiskCache::gc(std::optional<std::uint64_t> max_bytes) {
  detail::DiskCacheImpl& s = *impl_;
  s.ensure_open();
  CacheGcReport report = s.evict(max_bytes.value_or(s.options.max_bytes), nullptr);
  if (s.writable_layer() != nullptr) {
    report.other_files_removed += s.remove_abandoned_files(false);
    report.other_files_removed += s.trim_quarantine(kQuarantineLimit);
  }
  return report;
}

CacheGcReport DiskCache::clear() {
  detail::DiskCacheImpl& s = *impl_;
  s.ensure_open();
  CacheGcReport report = s.evict(0, nullptr);
  report.quota_bytes = 0;
  if (s.writable_layer() != nullptr) {
    report.other_files_removed += s.remove_abandoned_files(true);
    report.other_files_removed += s.trim_quarantine(0);
    if (s.memo.valid()) {
      for (const DirectoryEntry& item : list_directory(s.memo.get())) {
        if (!item.name.starts_with(".") && ::unlinkat(s.memo.get(), item.name.c_str(), 0) == 0) {
          ++report.other_files_removed;
        }
      }
    }
  }
  return report;
}

MissExplanation DiskCache::explain(const Program& program, std::string_view arch,
                                   std::string_view nvrtc_version) {
  return explain(std::vector<Program>{program}, arch, nvrtc_version).front();
}

std::vector<MissExplanation> DiskCache::explain(const std::vector<Program>& programs,
                                                std::string_view arch,
                                                std::string_view nvrtc_version) {
  detail::DiskCacheImpl& s = *impl_;
  s.ensure_open();

  // Every sound entry, once: what it records and where it is (its cubin is not kept).
  struct Candidate {
    CacheEntryInfo info;
    IdentityComponents components;
    ProgramIdentity identity;
    std::uint32_t format_version = 0;
    struct stat used {};
  };
  std::vector<Candidate> candidates;
  std::map<ProgramIdentity, std::string> bad;  // identity -> problem of its entry
  for (const auto& layer : s.layers) {
    for (const auto& entry : s.scan_entries(layer)) {
      const std::optional<ProgramIdentity> named = identity_of_entry_name(entry.name);
      if (!named) continue;
      const auto read = s.read_entry(layer, entry.name, &*named, false);
      if (read.absent) continue;
      if (!read.decoded.ok() || !read.decoded.artifact) {
        bad.emplace(*named,
                    std::string(to_string(read.decoded.problem)) + ": " + read.decoded.detail);
        continue;
      }
      const CompiledArtifact& artifact = *read.decoded.artifact;
      Candidate candidate;
      candidate.info.path = layer.path + "/" + kEntriesDir + "/" + entry.name;
      candidate.info.layer = layer.path;
      candidate.info.read_only = !layer.writable;
      candidate.info.identity = named->hex();
      candidate.info.kernel = artifact.kernel_name;
      candidate.info.key = artifact.key_text;
      candidate.info.arch = artifact.arch;
      candidate.info.nvrtc_version = artifact.nvrtc_version;
      candidate.info.size_bytes = static_cast<std::uint64_t>(read.info.st_size);
      candidate.info.age_seconds = std::max(0.0, seconds_since(read.info.st_mtim));
      candidate.components = artifact.components;
      candidate.identity = *named;
      candidate.format_version = read.decoded.format_version;
      candidate.used = read.info;
      candidates.push_back(std::move(candidate));
    }
  }

  struct Component {
    const char* name;
    std::uint64_t IdentityComponents::*member;
  };
  static constexpr Component kComponents[] = {
      {"format", &IdentityComponents::format}, {"source", &IdentityComponents::source},
      {"names", &IdentityComponents::names},   {"options", &IdentityComponents::options},
      {"key", &IdentityComponents::key},       {"arch", &IdentityComponents::arch},
      {"nvrtc", &IdentityComponents::nvrtc}};

  std::vector<MissExplanation> explanations;
  for (const Program& program : programs) {
    const IdentityComponents wanted = identity_components(program, arch, nvrtc_version);
    const ProgramIdentity identity = identity_from_components(wanted);
    MissExplanation out;
    out.kernel = program.kernel_name;
    out.key = program.key_text;
    out.arch = std::string(arch);
    out.nvrtc_version = std::string(nvrtc_version);
    out.identity = identity.hex();
    if (const auto it = bad.find(identity); it != bad.end()) out.present_problem = it->second;

    auto distance = [&](const IdentityComponents& c) {
      std::size_t differing = 0;
      for (const Component& component : kComponents) {
        differing += c.*component.member != wanted.*component.member ? 1 : 0;
      }
      return differing;
    };
    const Candidate* nearest = nullptr;
    std::size_t nearest_distance = 0;
    for (const Candidate& candidate : candidates) {
      if (candidate.identity == identity && !out.present) {
        out.present = true;
        out.present_layer = candidate.info.layer;
      }
      if (candidate.info.kernel != program.kernel_name) continue;
      ++out.same_kernel_entries;
      // Fewest differing components; among equals, the most recently used.
      const std::size_t d = distance(candidate.components);
      if (nearest == nullptr || d < nearest_distance ||
          (d == nearest_distance && mtime_before(nearest->used, candidate.used))) {
        nearest = &candidate;
        nearest_distance = d;
      }
    }
    if (nearest != nullptr) {
      for (const Component& component : kComponents) {
        const std::uint64_t want = wanted.*component.member;
        const std::uint64_t found = nearest->components.*component.member;
        if (want == found) continue;
        IdentityDifference difference;
        difference.component = component.name;
        const std::string_view name = component.name;
        if (name == "format") {
          difference.wanted = "zerojit format " + std::to_string(kFormatVersion);
          difference.found = "zerojit format " + std::to_string(nearest->format_version);
        } else if (name == "key") {
          difference.wanted = program.key_text;
          difference.found = nearest->info.key;
        } else if (name == "arch") {
          difference.wanted = std::string(arch);
          difference.found = nearest->info.arch;
        } else if (name == "nvrtc") {
          difference.wanted = "NVRTC " + std::string(nvrtc_version);
          difference.found = "NVRTC " + nearest->info.nvrtc_version;
        } else {
          difference.wanted = hash_text(want);
          difference.found = hash_text(found);
        }
        out.differences.push_back(std::move(difference));
      }
      out.nearest = nearest->info;
    }
    explanations.push_back(std::move(out));
  }
  return explanations;
}

std::string to_json(const std::vector<CacheEntryInfo>& entries) {
  std::string out = "[";
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (i != 0) out += ',';
    out += entry_json(entries[i]);
  }
  return out + "]";
}

std::string CacheVerifyReport::to_json() const {
  std::string out = "{";
  append_number_field(out, "checked", checked);
  out += ',';
  append_number_field(out, "valid", valid);
  out += ",\"set_aside\":" + std::string(set_aside ? "true" : "false");
  out += ",\"bad\":" + zerojit::to_json(bad) + "}";
  return out;
}

std::string CacheGcReport::to_json() const {
  std::string out = "{";
  append_number_field(out, "quota_bytes", quota_bytes);
  out += ',';
  append_number_field(out, "removed", removed);
  out += ',';
  append_number_field(out, "removed_bytes", removed_bytes);
  out += ',';
  append_number_field(out, "kept", kept);
  out += ',';
  append_number_field(out, "kept_bytes", kept_bytes);
  out += ',';
  append_number_field(out, "busy", busy);
  out += ',';
  append_number_field(out, "other_files_removed", other_files_removed);
  return out + "}";
}

std::string MissExplanation::summary() const {
  std::string out = kernel + " [" + key + "] for " + arch + " with NVRTC " + nvrtc_version +
                    " (identity " + identity + "): ";
  if (present) return out + "hit: the entry is in " + present_layer;
  out += "miss";
  if (!present_problem.empty())
    out += " (an entry with this identity is bad: " + present_problem + ")";
  if (!nearest) {
    return out + "; the cache holds no entry of kernel " + kernel;
  }
  out += "; nearest of " + std::to_string(same_kernel_entries) +
         " entries of the kernel: " + nearest->identity + " [" + nearest->key + "] for " +
         nearest->arch + "; ";
  if (differences.empty()) return out + "no component differs (a hash collision?)";
  out += "differs in ";
  for (std::size_t i = 0; i < differences.size(); ++i) {
    const IdentityDifference& d = differences[i];
    out += (i == 0 ? "" : ", ") + d.component + " (wanted " + d.wanted + ", found " + d.found + ")";
  }
  return out;
}

std::string MissExplanation::to_json() const {
  std::string out = "{";
  append_text_field(out, "kernel", kernel);
  out += ',';
  append_text_field(out, "key", key);
  out += ',';
  append_text_field(out, "arch", arch);
  out += ',';
  append_text_field(out, "nvrtc", nvrtc_version);
  out += ',';
  append_text_field(out, "identity", identity);
  out += ",\"hit\":" + std::string(present ? "true" : "false");
  if (present) {
    out += ',';
    append_text_field(out, "layer", present_layer);
  }
  if (!present_problem.empty()) {
    out += ',';
    append_text_field(out, "bad_entry", present_problem);
  }
  out += ",\"same_kernel_entries\":" + std::to_string(same_kernel_entries);
  out += ",\"nearest\":" + (nearest ? entry_json(*nearest) : std::string("null"));
  out += ",\"differences\":[";
  for (std::size_t i = 0; i < differences.size(); ++i) {
    out += i == 0 ? "{" : ",{";
    append_text_field(out, "component", differences[i].component);
    out += ',';
    append_text_field(out, "wanted", differences[i].wanted);
    out += ',';
    append_text_field(out, "found", differences[i].found);
    out += '}';
  }
  return out + "]}";
}

std::optional<std::filesystem::path> default_cache_root() {
  if (const char* explicit_root = env_text("ZEROJIT_CACHE_DIR")) {
    if (std::string_view(explicit_root) == "off") return std::nullopt;
    return fs::path(explicit_root);
  }
  if (const char* xdg = env_text("XDG_CACHE_HOME")) return fs::path(xdg) / "zerojit";
  if (const char* home = env_text("HOME")) return fs::path(home) / ".cache" / "zerojit";
  return fs::path();
}

namespace {

std::uint64_t parse_bytes(const char* variable, std::string_view text) {
  std::uint64_t value = 0;
  std::size_t i = 0;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
    if (value > (std::uint64_t{1} << 53)) break;
    value = value * 10 + static_cast<std::uint64_t>(text[i] - '0');
  }
  std::uint64_t scale = 1;
  const std::string_view suffix = text.substr(i);
  if (suffix == "K" || suffix == "k" || suffix == "KiB") {
    scale = std::uint64_t{1} << 10;
  } else if (suffix == "M" || suffix == "m" || suffix == "MiB") {
    scale = std::uint64_t{1} << 20;
  } else if (suffix == "G" || suffix == "g" || suffix == "GiB") {
    scale = std::uint64_t{1} << 30;
  } else if (suffix == "T" || suffix == "t" || suffix == "TiB") {
    scale = std::uint64_t{1} << 40;
  } else if (!suffix.empty()) {
    i = 0;  // not a size
  }
  if (i == 0 || value > (std::uint64_t{1} << 53) / scale) {
    throw Error(std::string(variable) + "=\"" + std::string(text) +
                "\" is not a size in bytes (e.g. 1073741824, 512M, 2G)");
  }
  return value * scale;
}

}  // namespace

DiskCacheOptions default_disk_cache_options() {
  DiskCacheOptions options;
  if (const auto root = default_cache_root()) options.root = *root;
  if (const char* layers = env_text("ZEROJIT_CACHE_READONLY_DIRS")) {
    std::string_view rest(layers);
    while (!rest.empty()) {
      const std::size_t colon = rest.find(':');
      const std::string_view part = rest.substr(0, colon);
      if (!part.empty()) options.read_only_layers.emplace_back(part);
      rest = colon == std::string_view::npos ? std::string_view{} : rest.substr(colon + 1);
    }
  }
  if (const char* quota = env_text("ZEROJIT_CACHE_MAX_BYTES")) {
    options.max_bytes = parse_bytes("ZEROJIT_CACHE_MAX_BYTES", quota);
  }
  if (const char* timeout = env_text("ZEROJIT_CACHE_LOCK_TIMEOUT_S")) {
    char* end = nullptr;
    const double seconds = std::strtod(timeout, &end);
    if (end == timeout || *end != '\0' || !(seconds >= 0.0) || seconds > 86400.0) {
      throw Error(std::string("ZEROJIT_CACHE_LOCK_TIMEOUT_S=\"") + timeout +
                  "\" is not a number of seconds in [0, 86400]");
    }
    options.lock_timeout = std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000.0));
  }
  options.allow_shared_root = env_flag(kAllowSharedVariable);
  return options;
}

std::shared_ptr<ArtifactStore> make_default_artifact_store() {
  try {
    if (!default_cache_root()) return nullptr;  // ZEROJIT_CACHE_DIR=off
    return std::make_shared<DiskCache>(default_disk_cache_options());
  } catch (const std::exception& error) {
    std::fprintf(stderr, "zerojit cache: %s; using the defaults\n", error.what());
    DiskCacheOptions options;
    if (const auto root = default_cache_root()) options.root = *root;
    return std::make_shared<DiskCache>(std::move(options));
  }
}

}  // namespace zerojit
