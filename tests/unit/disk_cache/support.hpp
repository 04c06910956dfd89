// What the disk-cache tests share: temporary directories, file helpers, worker processes
// (tests/support/cache_worker.cpp and the zerojit tool), synthetic artifacts and the two
// fixtures (a store in this process, and processes against a cache).
#pragma once

#include <gtest/gtest.h>
#include <sys/types.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "support/language_entries.hpp"
#include "zerojit/cache_entry.hpp"
#include "zerojit/disk_cache.hpp"

namespace zerojit::test {

namespace fs = std::filesystem;
using json = nlohmann::json;

inline constexpr int kExampleKeys = 5;  // what register_examples warms

// A fresh directory, removed (write permission restored first) when the test ends.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }
  fs::path operator/(const std::string& name) const { return path_ / name; }

 private:
  fs::path path_;
};

std::string read_file(const fs::path& path);
void write_file(const fs::path& path, std::string_view bytes);
// The entry file names (<identity>.zjc) of a root, sorted.
std::vector<std::string> entry_files(const fs::path& root);
std::size_t count_files(const fs::path& directory);

// ---------------------------------------------------------------------------------------
// Worker processes.

struct WorkerRun {
  int exit_code = -1;  // when it exited
  int signal = 0;      // when a signal ended it
  json out;            // its JSON line (null when it printed none)
  std::string stdout_text;
  std::string stderr_text;

  int count(const char* field) const { return out.is_object() ? out.value(field, -1) : -1; }
  int counter(const char* name) const {
    return out.is_object() ? out["counters"].value(name, -1) : -1;
  }
  std::vector<std::string> warnings() const;
  std::string describe() const;
};

class Worker {
 public:
  // `environment`: NAME=VALUE settings that replace or add to this process's environment.
  Worker(const std::string& program, const std::vector<std::string>& args, const fs::path& scratch,
         const std::vector<std::string>& environment = {});
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  pid_t pid() const { return pid_; }
  bool running();
  void kill_now();
  std::string stdout_so_far() const { return read_file(stdout_path_); }
  WorkerRun wait();

 private:
  void finish(int status);

  pid_t pid_ = -1;
  fs::path stdout_path_, stderr_path_;
  WorkerRun run_;
};

class DiskCacheProcesses : public ::testing::Test {
 protected:
  void SetUp() override;

  std::vector<std::string> args(const fs::path& root, std::vector<std::string> extra = {}) const;
  std::unique_ptr<Worker> start(const fs::path& root, std::vector<std::string> extra = {},
                                const std::vector<std::string>& environment = {});
  WorkerRun run(const fs::path& root, std::vector<std::string> extra = {},
                const std::vector<std::string>& environment = {});

  // Every entry of the root verifies; returns how many there are.
  static std::size_t expect_all_valid(const fs::path& root);

  // A process holding the compile lock of manifest entry `index` of `root`, as a process
  // compiling that key would, until it is killed (a failure when it has not taken it within
  // `bound`).
  std::unique_ptr<Worker> hold_lock(const fs::path& root, int index,
                                    std::chrono::seconds bound = std::chrono::seconds(60));

  TempDir scratch;
};

void expect_warm(const WorkerRun& run, int compiled, int from_disk);
std::map<std::string, std::string> identities_by_key(const WorkerRun& run);
std::string cubin_of(const fs::path& file);

// ---------------------------------------------------------------------------------------
// Synthetic artifacts (no NVRTC): real example programs, a made-up NVRTC version.

CompiledArtifact synthetic_artifact(int block_threads, std::size_t cubin_bytes = 1000,
                                    std::string_view arch = "sm_90a",
                                    std::string_view nvrtc = "13.0");

std::span<const std::byte> as_bytes(const std::string& text);

class DiskCacheStore : public ::testing::Test {
 protected:
  void SetUp() override;
  DiskCacheOptions options(const fs::path& root);

  TempDir dir;
  std::vector<std::string> warnings;
};

// ---------------------------------------------------------------------------------------
// The tool.

struct ToolRun {
  int exit_code = -1;
  std::string out;
  std::string err;
};

ToolRun run_tool(const std::vector<std::string>& args, const fs::path& scratch,
                 const std::vector<std::string>& environment = {});

// The tool with no file allowed to grow past `file_size_limit` bytes (RLIMIT_FSIZE, SIGXFSZ
// ignored): its writes then fail with EFBIG, as on a full filesystem. Its output goes through
// pipes, which the limit does not cover.
ToolRun run_tool_with_file_size_limit(const std::vector<std::string>& args,
                                      std::uint64_t file_size_limit,
                                      const std::vector<std::string>& environment = {});

}  // namespace zerojit::test
