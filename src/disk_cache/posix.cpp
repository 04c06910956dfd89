#include "disk_cache/posix.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <system_error>
#include <thread>

namespace zerojit::detail::disk {

std::string error_text(int error) {
  return std::error_code(error, std::generic_category()).message();
}

void Fd::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Fd open_at(int directory, const std::string& name, int flags, mode_t mode) {
  int fd;
  do {
    fd = ::openat(directory, name.c_str(), flags | O_CLOEXEC | O_NOFOLLOW, mode);
  } while (fd < 0 && errno == EINTR);
  return Fd(fd);
}

Fd open_directory_at(int parent, const std::string& name) {
  return open_at(parent, name, O_RDONLY | O_DIRECTORY);
}

bool flock_retrying(int fd, int operation) {
  while (::flock(fd, operation) != 0) {
    if (errno != EINTR) return false;
  }
  return true;
}

bool flock_within(int fd, int operation, std::chrono::milliseconds bound) {
  if (flock_retrying(fd, operation | LOCK_NB)) return true;
  if (errno != EWOULDBLOCK) return false;
  const auto deadline = std::chrono::steady_clock::now() + bound;
  auto pause = std::chrono::milliseconds(1);
  while (std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
        pause, deadline - std::chrono::steady_clock::now()));
    if (flock_retrying(fd, operation | LOCK_NB)) return true;
    if (errno != EWOULDBLOCK) return false;
    pause = std::min(pause * 2, std::chrono::milliseconds(50));
  }
  errno = EWOULDBLOCK;
  return false;
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

std::vector<DirectoryEntry> list_directory(int directory) {
  std::vector<DirectoryEntry> out;
  // A new open file description, not a dup: a dup shares its read position with `directory`
  // and every other copy, so two threads listing at once would skip or repeat each other's
  // names (and an eviction would then see the root at twice its size).
  const int copy = ::openat(directory, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
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

bool same_file(const struct stat& a, const struct stat& b) {
  return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

std::string mode_text(mode_t mode) {
  char buffer[8];
  std::snprintf(buffer, sizeof buffer, "%04o", static_cast<unsigned>(mode & 07777));
  return buffer;
}

bool remove_tree_at(int directory, const std::string& name, int depth) {
  if (::unlinkat(directory, name.c_str(), 0) == 0 || errno == ENOENT) return true;
  if (errno != EISDIR && errno != EPERM) return false;  // Linux says EISDIR, POSIX EPERM
  if (depth <= 0) return false;
  {
    const Fd inner = open_directory_at(directory, name);
    if (!inner.valid()) return false;
    for (const DirectoryEntry& item : list_directory(inner.get())) {
      remove_tree_at(inner.get(), item.name, depth - 1);
    }
  }
  return ::unlinkat(directory, name.c_str(), AT_REMOVEDIR) == 0 || errno == ENOENT;
}

int make_directories(const std::filesystem::path& path, mode_t mode) {
  std::filesystem::path prefix;
  for (const std::filesystem::path& part : path) {
    prefix /= part;
    if (prefix == prefix.root_path()) continue;
    if (::mkdir(prefix.c_str(), mode) != 0 && errno != EEXIST) return errno;
  }
  return 0;
}

}  // namespace zerojit::detail::disk
