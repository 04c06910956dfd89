// POSIX building blocks of the disk cache: owned descriptors, opening names relative to a
// directory without following links, flock, whole-file reads and writes, directory listings
// and file times. Private to src/disk_cache/.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace zerojit::detail::disk {

std::string error_text(int error);

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
  void reset();

 private:
  int fd_ = -1;
};

// Opens `name` below `directory`, never following a symbolic link (ELOOP when it is one).
Fd open_at(int directory, const std::string& name, int flags, mode_t mode = 0);

// Opens a directory below `parent` without following a link; ENOTDIR/ELOOP when the name is
// a link or not a directory.
Fd open_directory_at(int parent, const std::string& name);

bool flock_retrying(int fd, int operation);

// Takes `operation` (LOCK_SH or LOCK_EX) without blocking, retrying with a backoff from 1 ms
// to 50 ms for at most `bound`. False when it could not (errno EWOULDBLOCK after the bound).
// No wait on another process is unbounded: a holder may be stopped (SIGSTOP, a debugger, a
// frozen container) and never release.
bool flock_within(int fd, int operation, std::chrono::milliseconds bound);

bool write_all(int fd, std::string_view data);

// Reads up to `limit` bytes (one more than expected, to notice a file that grew).
bool read_all(int fd, std::size_t limit, std::string& out);

struct DirectoryEntry {
  std::string name;
  struct stat info {};
};

// The names in a directory with their lstat, "." and ".." left out. Names that vanish while
// listing are skipped.
std::vector<DirectoryEntry> list_directory(int directory);

double seconds_since(const timespec& time);
bool older_than(const timespec& time, std::chrono::seconds age);
bool mtime_before(const struct stat& a, const struct stat& b);
bool same_file(const struct stat& a, const struct stat& b);
std::string mode_text(mode_t mode);

// Removes `name` below `directory`, and everything below it when it is a directory, never
// following a symbolic link (a link is removed as a name). Directories nested deeper than
// `depth` are left. True when the name is gone.
bool remove_tree_at(int directory, const std::string& name, int depth = 32);

// Creates `path` and its missing parents with `mode`. Returns 0 or the errno.
int make_directories(const std::filesystem::path& path, mode_t mode);

}  // namespace zerojit::detail::disk
