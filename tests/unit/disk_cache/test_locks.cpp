// Every wait on another process has a bound, then degrades: an entry held locked forever (a
// writer or evicter stopped by SIGSTOP, `flock -x`), or a lock file replaced by a FIFO, never
// hangs find, publish, lock, verify, gc or warmup. The identity is compiled in memory and
// reported once; the tests set the bound small, so none waits more than a second or so.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <optional>

#include "unit/disk_cache/support.hpp"

namespace zerojit::test {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kBound = std::chrono::milliseconds(300);

// Holds a file locked exclusively, as another process stopped while writing it would.
class HeldLock {
 public:
  explicit HeldLock(const fs::path& path) : fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {
    EXPECT_GE(fd_, 0) << path;
    EXPECT_EQ(::flock(fd_, LOCK_EX | LOCK_NB), 0) << path;
  }
  ~HeldLock() {
    if (fd_ >= 0) ::close(fd_);
  }
  HeldLock(const HeldLock&) = delete;
  HeldLock& operator=(const HeldLock&) = delete;

 private:
  int fd_;
};

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

TEST_F(DiskCacheStore, AnEntryHeldLockedForeverIsSkippedAfterTheBound) {
  const fs::path root = dir / "cache";
  const CompiledArtifact artifact = synthetic_artifact(32);
  const CompiledArtifact other = synthetic_artifact(64);
  {
    DiskCache writer(options(root));
    writer.publish(artifact);
    writer.publish(other);
  }
  const fs::path entry = root / "entries" / (artifact.identity.hex() + ".zjc");
  struct stat before {};
  ASSERT_EQ(::stat(entry.c_str(), &before), 0);
  DiskCacheOptions o = options(root);
  o.lock_timeout = kBound;
  DiskCache cache(o);
  {
    HeldLock held(entry);
    auto start = Clock::now();
    EXPECT_FALSE(cache.find(artifact.identity));
    EXPECT_LT(seconds_since(start), 3.0);
    EXPECT_GE(seconds_since(start), 0.25) << "it waited up to the bound first";
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_NE(warnings[0].find("held it locked"), std::string::npos) << warnings[0];
    EXPECT_NE(warnings[0].find("does not use the disk cache for it"), std::string::npos);
    EXPECT_EQ(cache.counters().skipped_identities, 1u);

    // From now on the identity never waits again: find, lock and publish skip the disk.
    start = Clock::now();
    EXPECT_FALSE(cache.find(artifact.identity));
    EXPECT_EQ(cache.lock(artifact.identity), nullptr);
    cache.publish(artifact);
    EXPECT_LT(seconds_since(start), 0.2);
    struct stat after {};
    ASSERT_EQ(::stat(entry.c_str(), &after), 0);
    EXPECT_EQ(after.st_ino, before.st_ino) << "not published over";
    EXPECT_EQ(warnings.size(), 1u) << "reported once";
    // Other identities are unaffected.
    EXPECT_TRUE(cache.find(other.identity));

    // verify reports it as busy, neither ok nor bad; gc leaves it in place.
    start = Clock::now();
    const CacheVerifyReport report = cache.verify();
    EXPECT_LT(seconds_since(start), 3.0);
    EXPECT_EQ(report.checked, 2u);
    EXPECT_EQ(report.valid, 1u);
    EXPECT_TRUE(report.bad.empty());
    ASSERT_EQ(report.busy.size(), 1u);
    EXPECT_EQ(report.busy[0].identity, artifact.identity.hex());
    EXPECT_TRUE(report.ok());
    const json parsed = json::parse(report.to_json());
    EXPECT_EQ(parsed["busy"][0]["status"], "busy");
    const CacheGcReport gc = cache.gc(0);
    EXPECT_EQ(gc.busy, 1u);
    EXPECT_TRUE(fs::exists(entry));
  }
  // Released: a fresh process (cache) finds it at once.
  DiskCache later(o);
  EXPECT_TRUE(later.find(artifact.identity));
}

// A pack build asks for the root's entry of every key after its warmup (root_entry, to say
// which keys the pack lacks): an entry the warmup already waited for is busy at once, not
// waited for a second time (before: 2 waits, 4.3 s for a 2 s bound, 20 s at the default).
TEST_F(DiskCacheStore, AHeldEntryCostsOneWaitAlsoWhenThePackBuildLooksAgain) {
  const fs::path root = dir / "cache";
  const CompiledArtifact artifact = synthetic_artifact(32);
  {
    DiskCache writer(options(root));
    writer.publish(artifact);
  }
  DiskCacheOptions o = options(root);
  o.lock_timeout = std::chrono::seconds(1);
  DiskCache cache(o);
  HeldLock held(root / "entries" / (artifact.identity.hex() + ".zjc"));
  auto start = Clock::now();
  EXPECT_FALSE(cache.find(artifact.identity));
  EXPECT_GE(seconds_since(start), 0.9) << "the one wait, up to the bound";
  start = Clock::now();
  const std::optional<CacheEntryInfo> entry = cache.root_entry(artifact.identity);
  EXPECT_LT(seconds_since(start), 0.5) << "no second wait";
  ASSERT_TRUE(entry);
  EXPECT_TRUE(entry->busy);
  EXPECT_NE(entry->detail.find("not waited for again"), std::string::npos) << entry->detail;
  EXPECT_EQ(warnings.size(), 1u) << "reported once";
}

TEST_F(DiskCacheStore, ALockFileThatIsNotARegularFileNeverBlocks) {
  const fs::path root = dir / "cache";
  DiskCacheOptions o = options(root);
  o.lock_timeout = std::chrono::seconds(30);  // would be felt if anything waited
  DiskCache cache(o);
  ASSERT_EQ(cache.state(), CacheRootState::writable);
  const CompiledArtifact fifo = synthetic_artifact(32);
  const CompiledArtifact directory = synthetic_artifact(64);
  const fs::path fifo_lock = root / "locks" / (fifo.identity.hex() + ".lock");
  ASSERT_EQ(::mkfifo(fifo_lock.c_str(), 0600), 0);
  fs::create_directory(root / "locks" / (directory.identity.hex() + ".lock"));

  const auto start = Clock::now();
  EXPECT_EQ(cache.lock(fifo.identity), nullptr);
  EXPECT_EQ(cache.lock(directory.identity), nullptr);
  EXPECT_LT(seconds_since(start), 1.0);
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_NE(warnings[0].find("is not a regular file (a FIFO)"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[1].find("(a directory)"), std::string::npos) << warnings[1];
  // The identity is compiled in memory: not looked up, not published.
  cache.publish(fifo);
  EXPECT_FALSE(fs::exists(root / "entries" / (fifo.identity.hex() + ".zjc")));
  EXPECT_EQ(cache.counters().skipped_identities, 2u);
  EXPECT_EQ(warnings.size(), 2u);
}

TEST_F(DiskCacheProcesses, WarmupFinishesWithAnEntryHeldForeverAndAFifoLockFile) {
  const fs::path root = scratch / "cache";
  const WorkerRun cold = run(root);
  expect_warm(cold, kExampleKeys, 0);
  std::vector<std::string> identities;
  for (const auto& item : cold.out["identities"]) identities.push_back(item["identity"]);
  ASSERT_EQ(identities.size(), static_cast<std::size_t>(kExampleKeys));

  // Key 0: its entry held exclusively "forever" (for the test). Key 1: no entry, and its lock
  // file a FIFO, which a plain open would wait on for a writer.
  HeldLock held(root / "entries" / (identities[0] + ".zjc"));
  fs::remove(root / "entries" / (identities[1] + ".zjc"));
  const fs::path fifo = root / "locks" / (identities[1] + ".lock");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);

  const auto start = Clock::now();
  const WorkerRun warm = run(root, {"--lock-timeout-ms", "300"});
  EXPECT_LT(seconds_since(start), 20.0) << "two compiles, no unbounded wait";
  expect_warm(warm, 2, kExampleKeys - 2);
  EXPECT_EQ(warm.counter("skipped_identities"), 2);
  ASSERT_EQ(warm.warnings().size(), 2u) << warm.describe();
  for (const std::string& line : warm.warnings()) {
    const bool entry = line.find(identities[0]) != std::string::npos;
    const bool lock = line.find(identities[1]) != std::string::npos;
    EXPECT_TRUE(entry != lock) << line;
    EXPECT_NE(line.find(entry ? "held it locked" : "a FIFO"), std::string::npos) << line;
  }
}

TEST_F(DiskCacheProcesses, ToolVerifyReportsAnEntryHeldForeverAsBusyWithinTheBound) {
  const fs::path root = scratch / "cache";
  expect_warm(run(root), kExampleKeys, 0);
  const std::string victim = entry_files(root)[0];
  HeldLock held(root / "entries" / victim);
  ::setenv("ZEROJIT_CACHE_LOCK_TIMEOUT_S", "0.3", 1);
  const auto start = Clock::now();
  const ToolRun verify =
      run_tool({"cache", "verify", "--cache-dir", root.string(), "--json"}, scratch.path());
  const ToolRun text = run_tool({"cache", "verify", "--cache-dir", root.string()}, scratch.path());
  ::unsetenv("ZEROJIT_CACHE_LOCK_TIMEOUT_S");
  EXPECT_LT(seconds_since(start), 10.0);
  ASSERT_EQ(verify.exit_code, 0) << verify.out << verify.err;
  const json report = json::parse(verify.out)["result"];  // the tool's envelope (TOOL.md)
  EXPECT_EQ(report["valid"], kExampleKeys - 1);
  EXPECT_EQ(report["bad"].size(), 0u);
  ASSERT_EQ(report["busy"].size(), 1u);
  EXPECT_EQ(report["busy"][0]["identity"].get<std::string>() + ".zjc", victim);
  EXPECT_NE(text.out.find("BUSY"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("were not checked"), std::string::npos) << text.out;
}

}  // namespace
}  // namespace zerojit::test
