// The persistent compile cache with real files and real processes: the entry format and its
// damage classes, eviction, the safety rules, and processes (tests/support/cache_worker.cpp)
// that warm the example kernels with real NVRTC compiles at once, get killed mid-warmup, and
// run against read-only roots and under file-size limits.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "examples/examples.hpp"
#include "zerojit/cache_entry.hpp"
#include "zerojit/disk_cache.hpp"
#include "zerojit/zerojit.hpp"

extern char** environ;

namespace zerojit {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr int kExampleKeys = 5;  // what register_examples warms

// A fresh directory, removed (write permission restored first) when the test ends.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "zerojit-cache-test-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code error;
    for (auto it = fs::recursive_directory_iterator(path_, error);
         it != fs::recursive_directory_iterator(); it.increment(error)) {
      if (it->is_directory(error) && !it->is_symlink(error)) {
        fs::permissions(it->path(), fs::perms::owner_all, fs::perm_options::add, error);
      }
    }
    fs::permissions(path_, fs::perms::owner_all, fs::perm_options::add, error);
    fs::remove_all(path_, error);
  }
  const fs::path& path() const { return path_; }
  fs::path operator/(const std::string& name) const { return path_ / name; }

 private:
  fs::path path_;
};

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_file(const fs::path& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::vector<std::string> entry_files(const fs::path& root) {
  std::vector<std::string> names;
  std::error_code error;
  for (const auto& item : fs::directory_iterator(root / "entries", error)) {
    const std::string name = item.path().filename().string();
    if (name.ends_with(".zjc")) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::size_t count_files(const fs::path& directory) {
  std::error_code error;
  std::size_t count = 0;
  for ([[maybe_unused]] const auto& item : fs::directory_iterator(directory, error)) ++count;
  return count;
}

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
  std::vector<std::string> warnings() const {
    std::vector<std::string> lines;
    if (out.is_object()) {
      for (const auto& line : out["warnings"]) lines.push_back(line.get<std::string>());
    }
    return lines;
  }
  std::string describe() const {
    return "exit " + std::to_string(exit_code) + " signal " + std::to_string(signal) +
           "\nstdout: " + stdout_text + "\nstderr: " + stderr_text;
  }
};

class Worker {
 public:
  Worker(const std::string& program, const std::vector<std::string>& args,
         const fs::path& scratch) {
    static int serial = 0;
    const std::string stem =
        "worker-" + std::to_string(::getpid()) + "-" + std::to_string(serial++);
    stdout_path_ = scratch / (stem + ".out");
    stderr_path_ = scratch / (stem + ".err");
    std::vector<std::string> all{program};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& arg : all) argv.push_back(arg.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, stdout_path_.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&actions, 2, stderr_path_.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int error = posix_spawn(&pid_, program.c_str(), &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (error != 0) throw std::runtime_error("posix_spawn " + program + " failed");
  }
  ~Worker() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  pid_t pid() const { return pid_; }
  bool running() {
    if (pid_ <= 0) return false;
    int status = 0;
    const pid_t done = ::waitpid(pid_, &status, WNOHANG);
    if (done == 0) return true;
    finish(status);
    return false;
  }
  void kill_now() {
    if (pid_ > 0) ::kill(pid_, SIGKILL);
  }
  std::string stdout_so_far() const { return read_file(stdout_path_); }

  WorkerRun wait() {
    if (pid_ > 0) {
      int status = 0;
      ::waitpid(pid_, &status, 0);
      finish(status);
    }
    return run_;
  }

 private:
  void finish(int status) {
    pid_ = -1;
    if (WIFEXITED(status)) run_.exit_code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) run_.signal = WTERMSIG(status);
    run_.stdout_text = read_file(stdout_path_);
    run_.stderr_text = read_file(stderr_path_);
    std::error_code error;
    fs::remove(stdout_path_, error);
    fs::remove(stderr_path_, error);
    const std::size_t start = run_.stdout_text.rfind("{\"ok\"");
    if (start != std::string::npos) {
      run_.out = json::parse(run_.stdout_text.substr(start), nullptr, false);
      if (run_.out.is_discarded()) run_.out = nullptr;
    }
  }

  pid_t pid_ = -1;
  fs::path stdout_path_, stderr_path_;
  WorkerRun run_;
};

class DiskCacheProcesses : public ::testing::Test {
 protected:
  void SetUp() override {
    ::unsetenv("ZEROJIT_CACHE_ALLOW_SHARED");
    if (!nvrtc_available())
      GTEST_SKIP() << "NVRTC is not available: " << nvrtc_unavailable_reason();
  }

  std::vector<std::string> args(const fs::path& root, std::vector<std::string> extra = {}) const {
    std::vector<std::string> all{"--cache-dir", root.string()};
    all.insert(all.end(), extra.begin(), extra.end());
    return all;
  }
  std::unique_ptr<Worker> start(const fs::path& root, std::vector<std::string> extra = {}) {
    return std::make_unique<Worker>(ZEROJIT_CACHE_WORKER, args(root, std::move(extra)),
                                    scratch.path());
  }
  WorkerRun run(const fs::path& root, std::vector<std::string> extra = {}) {
    return start(root, std::move(extra))->wait();
  }

  // Every entry of the root verifies; returns how many there are.
  static std::size_t expect_all_valid(const fs::path& root) {
    DiskCacheOptions options;
    options.root = root;
    options.create_root = false;
    options.warning_sink = [](std::string_view line) { ADD_FAILURE() << line; };
    DiskCache cache(options);
    const CacheVerifyReport report = cache.verify();
    for (const auto& bad : report.bad) {
      ADD_FAILURE() << bad.path << ": " << to_string(bad.problem) << ": " << bad.detail;
    }
    return report.valid;
  }

  TempDir scratch;
};

void expect_warm(const WorkerRun& run, int compiled, int from_disk) {
  ASSERT_EQ(run.exit_code, 0) << run.describe();
  ASSERT_TRUE(run.out.is_object()) << run.describe();
  EXPECT_TRUE(run.out["ok"].get<bool>()) << run.describe();
  EXPECT_EQ(run.count("keys"), kExampleKeys);
  EXPECT_EQ(run.count("failed"), 0) << run.describe();
  if (compiled >= 0) {
    EXPECT_EQ(run.count("compiled"), compiled) << run.describe();
  }
  if (from_disk >= 0) {
    EXPECT_EQ(run.count("from_disk"), from_disk) << run.describe();
  }
}

std::map<std::string, std::string> identities_by_key(const WorkerRun& run) {
  std::map<std::string, std::string> out;
  for (const auto& item : run.out["identities"]) {
    out[item["kernel"].get<std::string>() + " " + item["key"].get<std::string>()] =
        item["identity"].get<std::string>();
  }
  return out;
}

std::string cubin_of(const fs::path& file) {
  const std::string bytes = read_file(file);
  const DecodedEntry decoded =
      decode_entry(std::span(reinterpret_cast<const std::byte*>(bytes.data()), bytes.size()));
  EXPECT_TRUE(decoded.ok()) << file << ": " << decoded.detail;
  return decoded.artifact ? decoded.artifact->cubin : std::string();
}

// ---------------------------------------------------------------------------------------
// Synthetic artifacts (no NVRTC): real example programs, a made-up NVRTC version.

CompiledArtifact synthetic_artifact(int block_threads, std::size_t cubin_bytes = 1000,
                                    std::string_view arch = "sm_90a",
                                    std::string_view nvrtc = "13.0") {
  const Program program =
      examples::EmptyKernel::instance().program(examples::EmptyKey{block_threads});
  CompiledArtifact artifact;
  artifact.components = identity_components(program, arch, nvrtc);
  artifact.identity = identity_from_components(artifact.components);
  artifact.kernel_name = program.kernel_name;
  artifact.key_text = program.key_text;
  artifact.arch = std::string(arch);
  artifact.nvrtc_version = std::string(nvrtc);
  artifact.cubin.resize(cubin_bytes);
  for (std::size_t i = 0; i < cubin_bytes; ++i) {
    artifact.cubin[i] =
        static_cast<char>((i * 131 + static_cast<std::size_t>(block_threads)) & 0xff);
  }
  artifact.lowered_names = {{"zj::examples::empty_kernel", "_ZN2zj8examples12empty_kernelEv"}};
  artifact.compile_seconds = 0.25;
  artifact.log = "a warning";
  return artifact;
}

std::span<const std::byte> as_bytes(const std::string& text) {
  return std::span(reinterpret_cast<const std::byte*>(text.data()), text.size());
}

class DiskCacheStore : public ::testing::Test {
 protected:
  void SetUp() override { ::unsetenv("ZEROJIT_CACHE_ALLOW_SHARED"); }

  DiskCacheOptions options(const fs::path& root) {
    DiskCacheOptions o;
    o.root = root;
    o.warning_sink = [this](std::string_view line) { warnings.emplace_back(line); };
    return o;
  }

  TempDir dir;
  std::vector<std::string> warnings;
};

// ---------------------------------------------------------------------------------------
// The entry format.

TEST(CacheEntry, RoundTripsEveryField) {
  const CompiledArtifact artifact = synthetic_artifact(64, 4000);
  const std::string bytes = encode_entry(artifact);
  const DecodedEntry decoded = decode_entry(as_bytes(bytes), &artifact.identity);
  ASSERT_TRUE(decoded.ok()) << decoded.detail;
  const CompiledArtifact& back = *decoded.artifact;
  EXPECT_EQ(back.identity, artifact.identity);
  EXPECT_EQ(back.components, artifact.components);
  EXPECT_EQ(back.kernel_name, artifact.kernel_name);
  EXPECT_EQ(back.key_text, artifact.key_text);
  EXPECT_EQ(back.arch, artifact.arch);
  EXPECT_EQ(back.nvrtc_version, artifact.nvrtc_version);
  EXPECT_EQ(back.cubin, artifact.cubin);
  EXPECT_EQ(back.log, artifact.log);
  EXPECT_EQ(back.compile_seconds, artifact.compile_seconds);
  ASSERT_EQ(back.lowered_names.size(), 1u);
  EXPECT_EQ(back.lowered_names[0].lowered, artifact.lowered_names[0].lowered);
  EXPECT_EQ(decoded.format_version, static_cast<std::uint32_t>(kFormatVersion));
  EXPECT_TRUE(bytes.starts_with(kCacheEntryMagic));
}

TEST(CacheEntry, EveryDamageClassIsToldApart) {
  const CompiledArtifact artifact = synthetic_artifact(32, 300);
  const std::string good = encode_entry(artifact);
  auto problem = [&](const std::string& bytes) {
    return decode_entry(as_bytes(bytes), &artifact.identity).problem;
  };
  EXPECT_EQ(problem(""), EntryProblem::empty);
  EXPECT_EQ(problem("\x7f"
                    "ELF\x02\x01\x01 a cubin, not an entry"),
            EntryProblem::foreign);
  EXPECT_EQ(problem("\x89ZJ"), EntryProblem::foreign);
  EXPECT_EQ(problem(good.substr(0, good.size() / 2)), EntryProblem::truncated);
  EXPECT_EQ(problem(good.substr(0, 12)), EntryProblem::truncated);
  EXPECT_EQ(problem(good + "x"), EntryProblem::overlong);
  std::string other_layout = good;
  other_layout[8] = 7;
  EXPECT_EQ(problem(other_layout), EntryProblem::unsupported_layout);
  const CompiledArtifact other_key = synthetic_artifact(64, 300);
  EXPECT_EQ(problem(encode_entry(other_key)), EntryProblem::identity_mismatch);
  const CompiledArtifact other_arch = synthetic_artifact(32, 300, "sm_100a");
  const DecodedEntry misnamed =
      decode_entry(as_bytes(encode_entry(other_arch)), &artifact.identity);
  EXPECT_EQ(misnamed.problem, EntryProblem::identity_mismatch);
  EXPECT_NE(misnamed.detail.find("sm_100a"), std::string::npos) << misnamed.detail;
  // An entry whose identity was edited along with a recomputed checksum still fails: its
  // identity no longer agrees with its components.
  CompiledArtifact forged = artifact;
  forged.identity.words[0] ^= 1;
  EXPECT_EQ(decode_entry(as_bytes(encode_entry(forged)), nullptr).problem, EntryProblem::malformed);
}

TEST(CacheEntry, EverySingleByteFlipAndEveryTruncationIsDetected) {
  const CompiledArtifact artifact = synthetic_artifact(32, 200);
  const std::string good = encode_entry(artifact);
  for (std::size_t i = 0; i < good.size(); ++i) {
    for (const unsigned mask : {0x01u, 0x80u, 0xffu}) {
      std::string bad = good;
      bad[i] = static_cast<char>(static_cast<unsigned char>(bad[i]) ^ mask);
      EXPECT_FALSE(decode_entry(as_bytes(bad), &artifact.identity).ok())
          << "byte " << i << " ^ " << mask;
      EXPECT_FALSE(decode_entry(as_bytes(bad), nullptr).ok()) << "byte " << i;
    }
  }
  for (std::size_t size = 0; size < good.size(); ++size) {
    EXPECT_FALSE(decode_entry(as_bytes(good.substr(0, size)), nullptr).ok()) << size << " bytes";
  }
}

// ---------------------------------------------------------------------------------------
// The store in this process.

TEST_F(DiskCacheStore, PublishesAtomicallyAndFindsWhatItPublished) {
  DiskCache cache(options(dir / "cache"));
  EXPECT_EQ(cache.state(), CacheRootState::writable) << cache.state_reason();
  const CompiledArtifact artifact = synthetic_artifact(32);
  EXPECT_FALSE(cache.find(artifact.identity));
  cache.publish(artifact);
  const auto found = cache.find(artifact.identity);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->cubin, artifact.cubin);
  EXPECT_EQ(entry_files(dir / "cache"), std::vector<std::string>{artifact.identity.hex() + ".zjc"});
  // Nothing else is left in entries/ (the temporary was renamed, the probe removed).
  EXPECT_EQ(count_files(dir / "cache" / "entries"), 1u);
  const DiskCacheCounters counters = cache.counters();
  EXPECT_EQ(counters.published, 1u);
  EXPECT_EQ(counters.hits, 1u);
  EXPECT_EQ(counters.misses, 1u);
  EXPECT_TRUE(warnings.empty());
  const auto mode = fs::status(dir / "cache").permissions();
  EXPECT_EQ(mode & (fs::perms::group_all | fs::perms::others_all), fs::perms::none)
      << "a root the cache creates is private";
}

TEST_F(DiskCacheStore, ReadOnlyLayersAreSearchedFirstAndNeverWritten) {
  const CompiledArtifact in_layer = synthetic_artifact(32);
  {
    DiskCache pack(options(dir / "pack"));
    pack.publish(in_layer);
  }
  DiskCacheOptions o = options(dir / "cache");
  o.read_only_layers = {dir / "pack"};
  DiskCache cache(o);
  const auto found = cache.find(in_layer.identity);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->cubin, in_layer.cubin);
  const CompiledArtifact fresh = synthetic_artifact(64);
  cache.publish(fresh);
  EXPECT_EQ(entry_files(dir / "pack").size(), 1u);
  EXPECT_EQ(entry_files(dir / "cache").size(), 1u);
  const auto listed = cache.list();
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_TRUE(listed[0].read_only);
  EXPECT_EQ(listed[0].kernel, "examples.empty");
  EXPECT_FALSE(listed[1].read_only);
  EXPECT_TRUE(warnings.empty());
}

TEST_F(DiskCacheStore, EvictionKeepsTheMostRecentlyUsedEntries) {
  std::vector<CompiledArtifact> artifacts;
  for (int i = 0; i < 7; ++i) artifacts.push_back(synthetic_artifact(100 + i, 10000));
  const std::uint64_t entry_bytes = encode_entry(artifacts[0]).size();
  auto pause = [] { std::this_thread::sleep_for(std::chrono::milliseconds(25)); };
  {
    DiskCache cache(options(dir / "cache"));
    for (int i = 0; i < 6; ++i) {
      cache.publish(artifacts[static_cast<std::size_t>(i)]);
      pause();
    }
    // Use 0 and 2: recency, oldest first, becomes 1 3 4 5 0 2.
    ASSERT_TRUE(cache.find(artifacts[0].identity));
    pause();
    ASSERT_TRUE(cache.find(artifacts[2].identity));
    pause();
  }
  DiskCacheOptions o = options(dir / "cache");
  o.max_bytes = 4 * entry_bytes + entry_bytes / 2;  // room for four
  DiskCache cache(o);
  const CacheGcReport report = cache.gc();
  EXPECT_EQ(report.removed, 2u);
  EXPECT_EQ(report.kept, 4u);
  auto present = [&] {
    std::set<int> out;
    for (int i = 0; i < 7; ++i) {
      if (fs::exists(dir / "cache" / "entries" /
                     (artifacts[static_cast<std::size_t>(i)].identity.hex() + ".zjc"))) {
        out.insert(i);
      }
    }
    return out;
  };
  EXPECT_EQ(present(), (std::set<int>{0, 2, 4, 5}));
  // Publishing past the quota evicts the least recently used (4) and keeps the new one.
  pause();
  cache.publish(artifacts[6]);
  EXPECT_EQ(present(), (std::set<int>{0, 2, 5, 6}));
  EXPECT_EQ(cache.counters().evicted, 3u);  // two by gc, one by publish
  EXPECT_TRUE(warnings.empty());
}

TEST_F(DiskCacheStore, EvictionNeverRemovesAnEntryBeingRead) {
  DiskCache cache(options(dir / "cache"));
  const CompiledArtifact a = synthetic_artifact(1, 5000);
  const CompiledArtifact b = synthetic_artifact(2, 5000);
  cache.publish(a);
  std::this_thread::sleep_for(std::chrono::milliseconds(25));
  cache.publish(b);
  // A reader elsewhere holds the oldest entry with the shared lock readers take.
  const fs::path oldest = dir / "cache" / "entries" / (a.identity.hex() + ".zjc");
  const int reader = ::open(oldest.c_str(), O_RDONLY);
  ASSERT_GE(reader, 0);
  ASSERT_EQ(::flock(reader, LOCK_SH), 0);
  const CacheGcReport report = cache.gc(0);
  EXPECT_EQ(report.busy, 1u);
  EXPECT_EQ(report.removed, 1u);
  EXPECT_TRUE(fs::exists(oldest));
  ::close(reader);
  EXPECT_EQ(cache.gc(0).removed, 1u);
  EXPECT_FALSE(fs::exists(oldest));
}

TEST_F(DiskCacheStore, RefusesARootOtherUsersCanWriteUnlessAllowed) {
  for (const fs::perms mode :
       {fs::perms::all, fs::perms::owner_all | fs::perms::group_all | fs::perms::others_read |
                            fs::perms::others_exec}) {
    const fs::path root = dir / ("shared-" + std::to_string(static_cast<int>(mode)));
    fs::create_directories(root);
    fs::permissions(root, mode);
    warnings.clear();
    DiskCache cache(options(root));
    EXPECT_EQ(cache.state(), CacheRootState::unusable);
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_NE(warnings[0].find("refusing cache root"), std::string::npos) << warnings[0];
    EXPECT_NE(warnings[0].find("other users can write it"), std::string::npos) << warnings[0];
    EXPECT_NE(warnings[0].find("ZEROJIT_CACHE_ALLOW_SHARED=1"), std::string::npos) << warnings[0];
    const CompiledArtifact artifact = synthetic_artifact(32);
    cache.publish(artifact);
    EXPECT_FALSE(cache.find(artifact.identity));
    EXPECT_EQ(cache.lock(artifact.identity), nullptr);
    EXPECT_FALSE(fs::exists(root / "entries")) << "a refused root is not written";
    EXPECT_EQ(warnings.size(), 1u) << "reported once";

    DiskCacheOptions allowed = options(root);
    allowed.allow_shared_root = true;
    DiskCache overridden(allowed);
    EXPECT_EQ(overridden.state(), CacheRootState::writable) << overridden.state_reason();
  }
  // The environment variable is the same override.
  const fs::path root = dir / "shared-env";
  fs::create_directories(root);
  fs::permissions(root, fs::perms::all);
  ::setenv("ZEROJIT_CACHE_ALLOW_SHARED", "1", 1);
  DiskCache by_environment(options(root));
  EXPECT_EQ(by_environment.state(), CacheRootState::writable);
  ::unsetenv("ZEROJIT_CACHE_ALLOW_SHARED");
}

TEST_F(DiskCacheStore, AStickyRootIsAcceptedButAForeignSubdirectoryIsNot) {
  // Like /tmp: others may add names but cannot replace ours, and everything the cache reads
  // lives in subdirectories it created and owns.
  const fs::path sticky = dir / "sticky";
  fs::create_directories(sticky);
  fs::permissions(sticky, fs::perms::all | fs::perms::sticky_bit);
  DiskCache cache(options(sticky));
  EXPECT_EQ(cache.state(), CacheRootState::writable) << cache.state_reason();
  // A subdirectory others can write is refused even under a sticky root.
  const fs::path other = dir / "sticky2";
  fs::create_directories(other / "entries");
  fs::permissions(other, fs::perms::all | fs::perms::sticky_bit);
  fs::permissions(other / "entries", fs::perms::all);
  warnings.clear();
  DiskCache refused(options(other));
  EXPECT_EQ(refused.state(), CacheRootState::unusable);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("entries/"), std::string::npos) << warnings[0];
}

TEST_F(DiskCacheStore, ARootOwnedByAnotherUserIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a directory to another user";
  const fs::path root = dir / "theirs";
  fs::create_directories(root);
  ASSERT_EQ(::chown(root.c_str(), 65534, 65534), 0);
  DiskCache cache(options(root));
  EXPECT_EQ(cache.state(), CacheRootState::unusable);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("owned by uid 65534"), std::string::npos) << warnings[0];
}

TEST_F(DiskCacheStore, NeverFollowsASymlinkOutOfTheRoot) {
  const CompiledArtifact artifact = synthetic_artifact(32);
  // A valid entry outside the root, and a link to it where the entry would be.
  const fs::path outside = dir / "outside.zjc";
  write_file(outside, encode_entry(artifact));
  {
    DiskCache cache(options(dir / "cache"));
    ASSERT_EQ(cache.state(), CacheRootState::writable);
    const fs::path entry = dir / "cache" / "entries" / (artifact.identity.hex() + ".zjc");
    fs::create_symlink(outside, entry);
    EXPECT_FALSE(cache.find(artifact.identity));
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_NE(warnings[0].find("not-a-regular-file"), std::string::npos) << warnings[0];
    EXPECT_FALSE(fs::is_symlink(entry)) << "the link is set aside";
    EXPECT_EQ(read_file(outside), encode_entry(artifact)) << "its target is untouched";
    // A lock file that is a link to a file outside: not followed, not created.
    const fs::path target = dir / "lock-target";
    fs::create_symlink(target, dir / "cache" / "locks" / (artifact.identity.hex() + ".lock"));
    EXPECT_EQ(cache.lock(artifact.identity), nullptr);
    EXPECT_FALSE(fs::exists(target));
  }
  // entries/ itself a link to a directory outside (holding that valid entry): not used.
  const fs::path other = dir / "other";
  fs::create_directories(other);
  fs::create_directories(dir / "elsewhere");
  fs::copy_file(outside, dir / "elsewhere" / (artifact.identity.hex() + ".zjc"));
  fs::create_directory_symlink(dir / "elsewhere", other / "entries");
  warnings.clear();
  DiskCache linked(options(other));
  EXPECT_EQ(linked.state(), CacheRootState::unusable);
  EXPECT_FALSE(linked.find(artifact.identity));
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("symbolic link"), std::string::npos) << warnings[0];
}

TEST_F(DiskCacheStore, AnUncreatableRootMeansMemoryOnlyWithOneWarning) {
  write_file(dir / "a-file", "x");
  DiskCache cache(options(dir / "a-file" / "cache"));
  EXPECT_EQ(cache.state(), CacheRootState::unusable);
  const CompiledArtifact artifact = synthetic_artifact(32);
  EXPECT_FALSE(cache.find(artifact.identity));
  cache.publish(artifact);
  EXPECT_EQ(cache.lock(artifact.identity), nullptr);
  EXPECT_FALSE(cache.recall_nvrtc_version("nvrtc:1"));
  cache.remember_nvrtc_version("nvrtc:1", "13.0");
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("memory only"), std::string::npos) << warnings[0];
}

TEST_F(DiskCacheStore, NvrtcVersionMemoIsVerified) {
  DiskCache cache(options(dir / "cache"));
  EXPECT_FALSE(cache.recall_nvrtc_version("nvrtc:1:2:3"));
  cache.remember_nvrtc_version("nvrtc:1:2:3", "13.0");
  EXPECT_EQ(cache.recall_nvrtc_version("nvrtc:1:2:3"), "13.0");
  EXPECT_FALSE(cache.recall_nvrtc_version("nvrtc:1:2:4")) << "another library file";
  // Tampering with the version (checksum no longer matches) makes it unknown again.
  std::vector<fs::path> memos;
  for (const auto& item : fs::directory_iterator(dir / "cache" / "nvrtc-version")) {
    memos.push_back(item.path());
  }
  ASSERT_EQ(memos.size(), 1u);
  std::string text = read_file(memos[0]);
  const std::size_t at = text.find("version=13.0");
  ASSERT_NE(at, std::string::npos);
  text[at + 8] = '2';
  write_file(memos[0], text);
  EXPECT_FALSE(cache.recall_nvrtc_version("nvrtc:1:2:3"));
  write_file(memos[0], "");
  EXPECT_FALSE(cache.recall_nvrtc_version("nvrtc:1:2:3"));
}

TEST_F(DiskCacheStore, ExplainsWhichComponentOfTheIdentityDiffers) {
  DiskCache cache(options(dir / "cache"));
  const Program block32 = examples::EmptyKernel::instance().program(examples::EmptyKey{32});
  const Program block64 = examples::EmptyKernel::instance().program(examples::EmptyKey{64});
  cache.publish(synthetic_artifact(32, 100, "sm_90a", "13.0"));

  const MissExplanation hit = cache.explain(block32, "sm_90a", "13.0");
  EXPECT_TRUE(hit.present);
  EXPECT_TRUE(hit.differences.empty());

  auto components = [](const MissExplanation& explanation) {
    std::vector<std::string> out;
    for (const auto& d : explanation.differences) out.push_back(d.component);
    return out;
  };
  const MissExplanation arch = cache.explain(block32, "sm_100a", "13.0");
  EXPECT_FALSE(arch.present);
  ASSERT_TRUE(arch.nearest);
  EXPECT_EQ(components(arch), std::vector<std::string>{"arch"});
  EXPECT_EQ(arch.differences[0].wanted, "sm_100a");
  EXPECT_EQ(arch.differences[0].found, "sm_90a");
  EXPECT_EQ(components(cache.explain(block32, "sm_90a", "13.1")),
            std::vector<std::string>{"nvrtc"});
  // Another key changes the key text and, for this kernel, the options (a -D macro).
  EXPECT_EQ(components(cache.explain(block64, "sm_90a", "13.0")),
            (std::vector<std::string>{"options", "key"}));
  Program edited = block32;
  edited.name_expressions = {"zj::examples::other_kernel"};
  EXPECT_EQ(components(cache.explain(edited, "sm_90a", "13.0")), std::vector<std::string>{"names"});
  const MissExplanation nothing =
      cache.explain(examples::ScaleAddKernel::instance().program({}), "sm_90a", "13.0");
  EXPECT_FALSE(nothing.nearest);
  EXPECT_NE(nothing.summary().find("no entry of kernel examples.scale_add"), std::string::npos);
  const json parsed = json::parse(arch.to_json());
  EXPECT_EQ(parsed["differences"][0]["component"], "arch");
  EXPECT_EQ(parsed["hit"], false);
}

TEST_F(DiskCacheStore, ListVerifyGcAndClear) {
  DiskCache cache(options(dir / "cache"));
  for (int i = 0; i < 3; ++i) cache.publish(synthetic_artifact(200 + i));
  const CompiledArtifact damaged = synthetic_artifact(300);
  cache.publish(damaged);
  const fs::path damaged_file = dir / "cache" / "entries" / (damaged.identity.hex() + ".zjc");
  std::string bytes = read_file(damaged_file);
  bytes[bytes.size() / 2] ^= 0x10;
  write_file(damaged_file, bytes);

  const auto listed = cache.list();
  ASSERT_EQ(listed.size(), 4u);
  const json as_json = json::parse(to_json(listed));
  ASSERT_EQ(as_json.size(), 4u);
  CacheVerifyReport report = cache.verify();
  EXPECT_EQ(report.checked, 4u);
  EXPECT_EQ(report.valid, 3u);
  ASSERT_EQ(report.bad.size(), 1u);
  EXPECT_EQ(report.bad[0].problem, EntryProblem::checksum_mismatch);
  EXPECT_TRUE(fs::exists(damaged_file)) << "verify alone changes nothing";
  report = cache.verify(true);
  EXPECT_FALSE(fs::exists(damaged_file));
  EXPECT_EQ(count_files(dir / "cache" / "quarantine"), 1u);
  EXPECT_TRUE(cache.verify().ok());
  EXPECT_EQ(json::parse(report.to_json())["bad"].size(), 1u);

  const CacheGcReport cleared = cache.clear();
  EXPECT_EQ(cleared.removed, 3u);
  EXPECT_TRUE(entry_files(dir / "cache").empty());
  EXPECT_EQ(count_files(dir / "cache" / "quarantine"), 0u);
  EXPECT_EQ(json::parse(cleared.to_json())["removed"], 3);
}

TEST_F(DiskCacheStore, GcRemovesWhatDeadProcessesLeftAndNothingLiveOnes) {
  DiskCache cache(options(dir / "cache"));
  ASSERT_EQ(cache.state(), CacheRootState::writable);
  const fs::path entries = dir / "cache" / "entries";
  const fs::path locks = dir / "cache" / "locks";
  auto age = [](const fs::path& path, int seconds) {
    const timespec times[2] = {{::time(nullptr) - seconds, 0}, {::time(nullptr) - seconds, 0}};
    ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, AT_SYMLINK_NOFOLLOW), 0);
  };
  // A dead writer's temporary (old, unlocked), a live writer's (old but locked), a fresh one.
  write_file(entries / ".tmp-dead", "partial");
  age(entries / ".tmp-dead", 600);
  write_file(entries / ".tmp-live", "partial");
  age(entries / ".tmp-live", 600);
  const int live_writer = ::open((entries / ".tmp-live").c_str(), O_RDONLY);
  ASSERT_EQ(::flock(live_writer, LOCK_EX), 0);
  write_file(entries / ".tmp-fresh", "partial");
  // A lock file left by a dead holder, and one held.
  write_file(locks / "dead.lock", "");
  const CompiledArtifact artifact = synthetic_artifact(32);
  auto guard = cache.lock(artifact.identity);
  ASSERT_NE(guard, nullptr);

  const CacheGcReport report = cache.gc();
  EXPECT_EQ(report.other_files_removed, 2u);
  EXPECT_FALSE(fs::exists(entries / ".tmp-dead"));
  EXPECT_TRUE(fs::exists(entries / ".tmp-live"));
  EXPECT_TRUE(fs::exists(entries / ".tmp-fresh"));
  EXPECT_FALSE(fs::exists(locks / "dead.lock"));
  EXPECT_TRUE(fs::exists(locks / (artifact.identity.hex() + ".lock")));
  guard.reset();
  EXPECT_FALSE(fs::exists(locks / (artifact.identity.hex() + ".lock")))
      << "a holder removes its lock file";
  ::close(live_writer);
}

// ---------------------------------------------------------------------------------------
// Processes.

TEST_F(DiskCacheProcesses, EightProcessesCompileEachKeyOnceInTotal) {
  const fs::path root = scratch / "cache";
  std::vector<std::unique_ptr<Worker>> workers;
  for (int i = 0; i < 8; ++i) workers.push_back(start(root));
  std::vector<WorkerRun> runs;
  for (auto& worker : workers) runs.push_back(worker->wait());
  int compiled = 0;
  for (const WorkerRun& run : runs) {
    expect_warm(run, -1, -1);
    EXPECT_EQ(run.count("compiled") + run.count("from_disk"), kExampleKeys) << run.describe();
    EXPECT_TRUE(run.warnings().empty()) << run.describe();
    compiled += run.count("compiled");
    EXPECT_EQ(identities_by_key(run), identities_by_key(runs[0]));
  }
  EXPECT_EQ(compiled, kExampleKeys) << "each key compiled exactly once over all processes";
  EXPECT_EQ(expect_all_valid(root), static_cast<std::size_t>(kExampleKeys));
  std::set<std::string> expected;
  for (const auto& [key, identity] : identities_by_key(runs[0])) expected.insert(identity + ".zjc");
  const auto files = entry_files(root);
  EXPECT_EQ(std::set<std::string>(files.begin(), files.end()), expected);
  EXPECT_EQ(count_files(root / "locks"), 0u) << "lock files are removed by their holders";

  // The same bytes as a process compiling alone.
  const fs::path alone = scratch / "alone";
  expect_warm(run(alone), kExampleKeys, 0);
  for (const std::string& name : files) {
    EXPECT_EQ(cubin_of(root / "entries" / name), cubin_of(alone / "entries" / name)) << name;
  }
}

TEST_F(DiskCacheProcesses, KillingWarmupAtRandomPointsNeverLeavesALoadableBadEntry) {
  const fs::path root = scratch / "cache";
  const auto cold_start = std::chrono::steady_clock::now();
  const WorkerRun cold = run(root);
  const auto cold_time = std::chrono::steady_clock::now() - cold_start;
  expect_warm(cold, kExampleKeys, 0);
  const auto identities = identities_by_key(cold);

  const unsigned seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  const auto window = std::chrono::duration_cast<std::chrono::microseconds>(cold_time);
  std::uniform_int_distribution<long long> delay(0, window.count());
  int kills = 0;
  int trials = 0;
  while (kills < 50 && trials < 200) {
    ++trials;
    // Take entries away (and sometimes the NVRTC memo), so that this run compiles and writes.
    for (const std::string& name : entry_files(root)) {
      if (rng() % 3 != 0) fs::remove(root / "entries" / name);
    }
    if (rng() % 4 == 0) {
      for (const auto& item : fs::directory_iterator(root / "nvrtc-version")) fs::remove(item);
    }
    auto worker = start(root);
    std::this_thread::sleep_for(std::chrono::microseconds(delay(rng)));
    worker->kill_now();
    const WorkerRun killed = worker->wait();
    if (killed.signal == SIGKILL) ++kills;
    // Whatever it left: every file under an entry name verifies (a partial write never
    // appears under one), so a later run can load only sound entries.
    const std::size_t valid = expect_all_valid(root);
    EXPECT_EQ(valid, entry_files(root).size());
    if (HasFailure()) break;
  }
  EXPECT_GE(kills, 50) << "in " << trials << " trials";
  std::size_t temporaries = 0;
  for (const auto& item : fs::directory_iterator(root / "entries")) {
    temporaries += item.path().filename().string().starts_with(".tmp-") ? 1 : 0;
  }
  std::printf("%d kills in %d trials (window %.3f s); %zu temporaries left by killed writers\n",
              kills, trials, static_cast<double>(window.count()) * 1e-6, temporaries);
  // The next run heals: every key present and valid; the one after compiles nothing.
  const std::size_t present = entry_files(root).size();
  expect_warm(run(root), kExampleKeys - static_cast<int>(present), static_cast<int>(present));
  EXPECT_EQ(expect_all_valid(root), static_cast<std::size_t>(kExampleKeys));
  const WorkerRun after = run(root);
  expect_warm(after, 0, kExampleKeys);
  EXPECT_EQ(identities_by_key(after), identities);
  EXPECT_TRUE(after.warnings().empty()) << after.describe();
}

TEST_F(DiskCacheProcesses, EveryCorruptionClassIsDetectedReportedOnceSetAsideAndRecompiled) {
  const fs::path root = scratch / "cache";
  const WorkerRun cold = run(root);
  expect_warm(cold, kExampleKeys, 0);
  const fs::path other_arch_root = scratch / "sm100";
  const WorkerRun other_arch = run(other_arch_root, {"--arch", "sm_100a"});
  expect_warm(other_arch, kExampleKeys, 0);

  std::vector<std::string> names;  // entry file names in manifest order
  for (const auto& item : cold.out["identities"]) {
    names.push_back(item["identity"].get<std::string>() + ".zjc");
  }
  ASSERT_EQ(names.size(), 5u);
  std::vector<std::string> arch_names;
  for (const auto& item : other_arch.out["identities"]) {
    arch_names.push_back(item["identity"].get<std::string>() + ".zjc");
  }
  auto entry = [&](std::size_t i) { return root / "entries" / names[i]; };

  // Round one: five entries, five kinds of damage.
  std::map<std::string, std::string> expected;  // file name -> problem
  std::string bytes = read_file(entry(0));
  write_file(entry(0), bytes.substr(0, bytes.size() / 2));
  expected[names[0]] = "truncated";
  bytes = read_file(entry(1));
  bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 0x04);
  write_file(entry(1), bytes);
  expected[names[1]] = "checksum-mismatch";
  write_file(entry(2), "");
  expected[names[2]] = "empty";
  write_file(entry(3), cubin_of(entry(3)));  // a bare cubin: an ELF file, not an entry
  expected[names[3]] = "foreign";
  fs::copy_file(other_arch_root / "entries" / arch_names[4], entry(4),
                fs::copy_options::overwrite_existing);
  expected[names[4]] = "identity-mismatch";

  const WorkerRun first = run(root);
  expect_warm(first, 5, 0);
  EXPECT_EQ(first.counter("bad_entries"), 5);
  std::map<std::string, int> reports;
  for (const std::string& line : first.warnings()) {
    bool matched = false;
    for (const auto& [name, problem] : expected) {
      if (line.find(name) == std::string::npos) continue;
      matched = true;
      ++reports[name];
      EXPECT_NE(line.find("(" + problem + ")"), std::string::npos) << line;
      EXPECT_NE(line.find("quarantine"), std::string::npos) << line;
    }
    EXPECT_TRUE(matched) << "unexpected warning: " << line;
  }
  for (const auto& [name, problem] : expected) EXPECT_EQ(reports[name], 1) << problem;
  EXPECT_EQ(count_files(root / "quarantine"), 5u);
  EXPECT_EQ(expect_all_valid(root), 5u);

  // Round two: an entry swapped with another key's, and a link where an entry should be.
  fs::copy_file(entry(1), entry(0), fs::copy_options::overwrite_existing);
  const fs::path outside = scratch / "outside.zjc";
  fs::copy_file(entry(2), outside);
  fs::remove(entry(2));
  fs::create_symlink(outside, entry(2));
  const WorkerRun second = run(root);
  expect_warm(second, 2, 3);
  ASSERT_EQ(second.warnings().size(), 2u) << second.describe();
  for (const std::string& line : second.warnings()) {
    if (line.find(names[0]) != std::string::npos) {
      EXPECT_NE(line.find("(identity-mismatch)"), std::string::npos) << line;
    } else {
      EXPECT_NE(line.find(names[2]), std::string::npos) << line;
      EXPECT_NE(line.find("(not-a-regular-file)"), std::string::npos) << line;
    }
  }
  EXPECT_TRUE(fs::exists(outside));
  EXPECT_EQ(expect_all_valid(root), 5u);
  // Healed: nothing to report, nothing to compile.
  const WorkerRun third = run(root);
  expect_warm(third, 0, 5);
  EXPECT_TRUE(third.warnings().empty()) << third.describe();
}

TEST_F(DiskCacheProcesses, AReadOnlyRootStillWarmsUp) {
  // An empty root nobody may write: memory only, one warning, every key compiled.
  const fs::path empty = scratch / "empty";
  fs::create_directories(empty);
  fs::permissions(empty, fs::perms::owner_read | fs::perms::owner_exec);
  const WorkerRun fresh = run(empty, {"--drop-write-override"});
  expect_warm(fresh, kExampleKeys, 0);
  EXPECT_EQ(fresh.out["state"], "unusable");
  EXPECT_EQ(fresh.warnings().size(), 1u) << fresh.describe();

  // A warmed root made read-only: its entries are used, NVRTC is never loaded.
  const fs::path warmed = scratch / "warmed";
  expect_warm(run(warmed), kExampleKeys, 0);
  for (const auto& item : fs::recursive_directory_iterator(warmed)) {
    if (item.is_directory()) {
      fs::permissions(item.path(),
                      fs::perms::owner_write | fs::perms::group_write | fs::perms::others_write,
                      fs::perm_options::remove);
    }
  }
  fs::permissions(warmed, fs::perms::owner_write, fs::perm_options::remove);
  const WorkerRun reused = run(warmed, {"--drop-write-override"});
  expect_warm(reused, 0, kExampleKeys);
  EXPECT_EQ(reused.out["state"], "read-only");
  EXPECT_EQ(reused.warnings().size(), 1u) << reused.describe();
  EXPECT_FALSE(reused.out["nvrtc_loaded"].get<bool>());

  // The same entries as a read-only layer in front of an empty writable root.
  const WorkerRun layered = run(scratch / "front", {"--layer", warmed.string()});
  expect_warm(layered, 0, kExampleKeys);
  EXPECT_TRUE(layered.warnings().empty()) << layered.describe();
  EXPECT_TRUE(entry_files(scratch / "front").empty());
}

TEST_F(DiskCacheProcesses, FailingWritesAreWarningsAndTheKernelsAreStillUsed) {
  // Under a file-size limit smaller than any entry, every write fails with EFBIG.
  const fs::path root = scratch / "cache";
  const WorkerRun limited = run(root, {"--file-size-limit", "1024"});
  expect_warm(limited, kExampleKeys, 0);
  EXPECT_EQ(limited.counter("write_failures"), kExampleKeys);
  ASSERT_EQ(limited.warnings().size(), 1u) << limited.describe();
  EXPECT_NE(limited.warnings()[0].find("could not save"), std::string::npos);
  EXPECT_NE(limited.warnings()[0].find("File too large"), std::string::npos)
      << limited.warnings()[0];
  EXPECT_EQ(count_files(root / "entries"), 0u) << "no entry and no temporary left behind";
}

TEST_F(DiskCacheProcesses, ARootWritableByOthersIsRefusedAndWarmupStillWorks) {
  const fs::path root = scratch / "shared";
  fs::create_directories(root);
  fs::permissions(root, fs::perms::all);
  const WorkerRun refused = run(root);
  expect_warm(refused, kExampleKeys, 0);
  EXPECT_EQ(refused.out["state"], "unusable");
  ASSERT_EQ(refused.warnings().size(), 1u);
  EXPECT_NE(refused.warnings()[0].find("refusing cache root"), std::string::npos);
  EXPECT_FALSE(fs::exists(root / "entries"));
  const WorkerRun allowed = run(root, {"--allow-shared"});
  expect_warm(allowed, kExampleKeys, 0);
  EXPECT_EQ(allowed.out["state"], "writable");
  EXPECT_EQ(entry_files(root).size(), static_cast<std::size_t>(kExampleKeys));
}

TEST_F(DiskCacheProcesses, ASecondProcessWithEverythingOnDiskNeverLoadsNvrtc) {
  const fs::path root = scratch / "cache";
  const WorkerRun first = run(root);
  expect_warm(first, kExampleKeys, 0);
  EXPECT_TRUE(first.out["nvrtc_loaded"].get<bool>());
  const WorkerRun second = run(root);
  expect_warm(second, 0, kExampleKeys);
  EXPECT_FALSE(second.out["nvrtc_loaded"].get<bool>());
  EXPECT_EQ(identities_by_key(second), identities_by_key(first));
}

TEST_F(DiskCacheProcesses, ADeadLockHolderIsTakenOverAndALiveOneTimesOut) {
  const fs::path root = scratch / "cache";
  // A process holding the lock of the first key, as a compiling process would.
  auto hold = [&](const fs::path& cache_root) {
    auto holder = start(cache_root, {"--hold-lock", "0"});
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (holder->stdout_so_far().find("\"locked\":true") == std::string::npos) {
      if (!holder->running() || std::chrono::steady_clock::now() > deadline) {
        ADD_FAILURE() << "the holder did not take the lock: " << holder->wait().describe();
        return holder;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return holder;
  };

  // A waiter waits while the holder lives, and goes on as soon as it dies.
  auto holder = hold(root);
  auto waiter = start(root, {"--lock-timeout-ms", "60000"});
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_TRUE(waiter->running()) << "it waits for the holder";
  holder->kill_now();
  holder->wait();
  const auto killed_at = std::chrono::steady_clock::now();
  const WorkerRun took_over = waiter->wait();
  expect_warm(took_over, kExampleKeys, 0);
  EXPECT_LT(std::chrono::steady_clock::now() - killed_at, std::chrono::seconds(20));
  EXPECT_GE(took_over.counter("lock_waits"), 1);
  EXPECT_EQ(took_over.counter("lock_timeouts"), 0);
  EXPECT_TRUE(took_over.warnings().empty()) << took_over.describe();

  // A holder that never finishes: the waiter gives up and compiles by itself.
  const fs::path second_root = scratch / "second";
  auto live = hold(second_root);
  const WorkerRun timed_out = run(second_root, {"--lock-timeout-ms", "300"});
  expect_warm(timed_out, kExampleKeys, 0);
  EXPECT_EQ(timed_out.counter("lock_timeouts"), 1);
  ASSERT_EQ(timed_out.warnings().size(), 1u) << timed_out.describe();
  EXPECT_NE(timed_out.warnings()[0].find("compiling it in this process instead"),
            std::string::npos);
  live->kill_now();
  live->wait();
}

// ---------------------------------------------------------------------------------------
// The tool.

struct ToolRun {
  int exit_code = -1;
  std::string out;
  std::string err;
};

ToolRun run_tool(const std::vector<std::string>& args, const fs::path& scratch) {
  Worker tool(ZEROJIT_TOOL, args, scratch);
  const WorkerRun run = tool.wait();
  return {run.exit_code, run.stdout_text, run.stderr_text};
}

TEST_F(DiskCacheProcesses, ToolListsVerifiesTrimsExplainsAndClears) {
  const fs::path root = scratch / "cache";
  const WorkerRun cold = run(root);
  expect_warm(cold, kExampleKeys, 0);
  const std::string dir = root.string();

  ToolRun ls = run_tool({"cache", "ls", "--cache-dir", dir, "--json"}, scratch.path());
  ASSERT_EQ(ls.exit_code, 0) << ls.err;
  const json listed = json::parse(ls.out);
  ASSERT_EQ(listed.size(), 5u);
  EXPECT_EQ(listed[0]["status"], "ok");
  EXPECT_EQ(listed[0]["arch"], "sm_90a");

  ToolRun verify = run_tool({"cache", "verify", "--cache-dir", dir}, scratch.path());
  EXPECT_EQ(verify.exit_code, 0) << verify.out << verify.err;
  const fs::path victim = root / "entries" / entry_files(root)[0];
  std::string bytes = read_file(victim);
  bytes[100] = static_cast<char>(bytes[100] ^ 1);
  write_file(victim, bytes);
  verify = run_tool({"cache", "verify", "--cache-dir", dir, "--json"}, scratch.path());
  EXPECT_EQ(verify.exit_code, 4) << verify.out << verify.err;
  EXPECT_EQ(json::parse(verify.out)["bad"].size(), 1u);
  verify = run_tool({"cache", "verify", "--cache-dir", dir, "--set-aside"}, scratch.path());
  EXPECT_EQ(verify.exit_code, 4);
  EXPECT_FALSE(fs::exists(victim));

  // The tool explains its own manifest (not the example kernels this cache holds): every
  // key misses, with no entry of its kernel to compare with.
  ToolRun explain =
      run_tool({"cache", "explain", "--cache-dir", dir, "--nvrtc-version", "13.0", "--json"},
               scratch.path());
  ASSERT_EQ(explain.exit_code, 0) << explain.err;
  const json explained = json::parse(explain.out);
  ASSERT_GE(explained.size(), 1u);
  for (const auto& item : explained) {
    EXPECT_EQ(item["hit"], false);
    EXPECT_TRUE(item["nearest"].is_null());
    EXPECT_EQ(item["nvrtc"], "13.0");
  }

  ToolRun gc =
      run_tool({"cache", "gc", "--cache-dir", dir, "--max-size", "0", "--json"}, scratch.path());
  ASSERT_EQ(gc.exit_code, 0) << gc.err;
  EXPECT_EQ(json::parse(gc.out)["removed"], 4);
  ToolRun clear = run_tool({"cache", "clear", "--cache-dir", dir}, scratch.path());
  EXPECT_EQ(clear.exit_code, 0) << clear.err;

  // A root others can write is refused (exit 2) with the override named.
  const fs::path shared = scratch / "shared";
  fs::create_directories(shared);
  fs::permissions(shared, fs::perms::all);
  ToolRun refused = run_tool({"cache", "ls", "--cache-dir", shared.string()}, scratch.path());
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.err.find("ZEROJIT_CACHE_ALLOW_SHARED"), std::string::npos) << refused.err;
  EXPECT_EQ(
      run_tool({"cache", "ls", "--cache-dir", shared.string(), "--allow-shared"}, scratch.path())
          .exit_code,
      0);
  EXPECT_EQ(run_tool({"cache", "gc", "--max-size", "lots"}, scratch.path()).exit_code, 2);
}

}  // namespace
}  // namespace zerojit
