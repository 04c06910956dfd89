// Threads of one process sharing a DiskCache, and a cache tool racing a serving process: a
// parallel warmup publishes and evicts from several threads at once, and `zerojit cache
// verify --set-aside` may run while another process heals what it found bad. None of it may
// lose an entry, evict past the quota, or serve a file that is no longer in the root.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "unit/disk_cache/support.hpp"

namespace zerojit::test {
namespace {

// How many of this process's descriptors are open on `file`; waits (bounded) until at least
// `count` are: a sign that another thread has opened it and is waiting for its lock.
bool wait_for_descriptors(const fs::path& file, int count) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  const fs::path target = fs::canonical(file);
  while (std::chrono::steady_clock::now() < deadline) {
    int open = 0;
    std::error_code error;
    for (const auto& item : fs::directory_iterator("/proc/self/fd", error)) {
      std::error_code link_error;
      if (fs::read_symlink(item.path(), link_error) == target) ++open;
    }
    if (open >= count) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return false;
}

TEST_F(DiskCacheStore, ConcurrentPublishesUnderAQuotaKeepEveryEntry) {
  // Each publish evicts down to the quota. An eviction that lists another thread's entry
  // between its rename and its mark as in use must not remove it (a pack built with
  // --jobs 2 once lost its last key that way).
  const fs::path root = dir / "cache";
  std::vector<CompiledArtifact> artifacts;
  for (int i = 0; i < 16; ++i) artifacts.push_back(synthetic_artifact(700 + i, 4000));
  DiskCacheOptions o = options(root);
  o.max_bytes = encode_entry(artifacts[0]).size();  // room for one
  for (int round = 0; round < 20; ++round) {
    fs::remove_all(root);
    DiskCache cache(o);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        for (std::size_t i = static_cast<std::size_t>(t); i < artifacts.size(); i += 4) {
          cache.publish(artifacts[i]);
        }
      });
    }
    for (std::thread& thread : threads) thread.join();
    ASSERT_EQ(entry_files(root).size(), artifacts.size()) << "round " << round;
    EXPECT_EQ(cache.counters().evicted, 0u) << "round " << round;
  }
}

TEST_F(DiskCacheStore, ListingsFromTwoThreadsSeeEveryEntryOnce) {
  // Every eviction lists the root. Two listings at once must not share a read position (a
  // listing that saw every name twice made the root look twice its size).
  const fs::path root = dir / "cache";
  DiskCache cache(options(root));
  constexpr std::size_t kEntries = 600;
  for (std::size_t i = 0; i < kEntries; ++i) {
    cache.publish(synthetic_artifact(1000 + static_cast<int>(i), 16));
  }
  ASSERT_EQ(entry_files(root).size(), kEntries);
  std::atomic<int> wrong{0};
  std::atomic<std::size_t> last_wrong{kEntries};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&] {
      for (int round = 0; round < 100; ++round) {
        const std::size_t kept = cache.gc(std::uint64_t{1} << 40).kept;
        if (kept != kEntries) {
          ++wrong;
          last_wrong = kept;
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(wrong.load(), 0) << "a listing held " << last_wrong.load() << " entries, not "
                             << kEntries;
}

TEST_F(DiskCacheStore, ParallelEvictionsRemoveOnlyWhatTheQuotaAsks) {
  // 200 entries of another process, room for 201, then 16 new ones from 4 threads: exactly
  // 15 old ones go (two evictions from one listing once removed an entry each for one excess).
  const fs::path root = dir / "cache";
  DiskCacheOptions o = options(root);
  constexpr int kOld = 200;
  constexpr int kNew = 16;
  o.max_bytes = encode_entry(synthetic_artifact(5000, 64)).size() * (kOld + 1);
  std::vector<CompiledArtifact> old_entries, new_entries;
  for (int i = 0; i < kOld; ++i) old_entries.push_back(synthetic_artifact(5000 + i, 64));
  for (int i = 0; i < kNew; ++i) new_entries.push_back(synthetic_artifact(9000 + i, 64));
  for (int round = 0; round < 5; ++round) {
    fs::remove_all(root);
    {
      DiskCache other(o);
      for (const CompiledArtifact& artifact : old_entries) other.publish(artifact);
    }
    ASSERT_EQ(entry_files(root).size(), static_cast<std::size_t>(kOld));
    DiskCache cache(o);
    std::vector<std::thread> threads;
    for (std::size_t t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        for (std::size_t i = t; i < new_entries.size(); i += 4) cache.publish(new_entries[i]);
      });
    }
    for (std::thread& thread : threads) thread.join();
    EXPECT_EQ(entry_files(root).size(), static_cast<std::size_t>(kOld + 1)) << "round " << round;
    EXPECT_EQ(cache.counters().evicted, static_cast<std::uint64_t>(kNew - 1)) << "round " << round;
    for (const CompiledArtifact& mine : new_entries) {
      EXPECT_TRUE(fs::exists(root / "entries" / (mine.identity.hex() + ".zjc")));
    }
  }
}

TEST_F(DiskCacheStore, VerifySetAsideLeavesAnEntryHealedSinceItWasRead) {
  // verify reads every entry before it sets any aside. Meanwhile another process meets the
  // bad one, sets it aside, compiles and publishes a good one under its name: that one stays.
  const fs::path root = dir / "cache";
  DiskCacheOptions o = options(root);
  o.lock_timeout = std::chrono::seconds(10);
  CompiledArtifact bad = synthetic_artifact(41, 64);
  CompiledArtifact held = synthetic_artifact(42, 64);
  if (held.identity.hex() < bad.identity.hex()) std::swap(bad, held);  // verify reads `bad` first
  {
    DiskCache writer(o);
    writer.publish(bad);
    writer.publish(held);
  }
  const fs::path bad_file = root / "entries" / (bad.identity.hex() + ".zjc");
  const fs::path held_file = root / "entries" / (held.identity.hex() + ".zjc");
  std::string bytes = read_file(bad_file);
  bytes[bytes.size() / 2] ^= 0x10;
  fs::remove(bad_file);
  write_file(bad_file, bytes);
  const int holder = ::open(held_file.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(holder, 0);
  ASSERT_EQ(::flock(holder, LOCK_EX), 0);  // verify waits here, after reading `bad`

  std::atomic<bool> healed{false};
  std::thread other([&] {
    if (wait_for_descriptors(held_file, 2)) {  // verify has opened `held`
      DiskCache process(o);
      if (!process.find(bad.identity)) process.publish(bad);
      healed = true;
    }
    ::close(holder);
  });
  DiskCache tool(o);
  const CacheVerifyReport report = tool.verify(true);
  other.join();
  ASSERT_TRUE(healed) << "verify never waited on the held entry";
  EXPECT_TRUE(report.bad.empty()) << report.bad[0].detail;
  EXPECT_EQ(report.valid, 2u);
  DiskCache after(o);
  const auto entry = after.root_entry(bad.identity);
  ASSERT_TRUE(entry) << "the healed entry was set aside";
  EXPECT_EQ(entry->problem, EntryProblem::none);
}

TEST_F(DiskCacheStore, FindNeverServesAnEntryUnlinkedWhileItWaitedForItsLock) {
  // An evicter holds the entry locked, unlinks it and lets go; a find that opened it just
  // before and waited for the lock must then count a miss, not a hit on a removed file.
  const fs::path root = dir / "cache";
  DiskCacheOptions o = options(root);
  o.lock_timeout = std::chrono::seconds(10);
  const CompiledArtifact artifact = synthetic_artifact(77, 64);
  { DiskCache(o).publish(artifact); }
  const fs::path file = root / "entries" / (artifact.identity.hex() + ".zjc");
  const int evicter = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(evicter, 0);
  ASSERT_EQ(::flock(evicter, LOCK_EX), 0);
  std::atomic<bool> unlinked{false};
  std::thread evicting([&] {
    if (wait_for_descriptors(file, 2)) {  // the find has opened it
      unlinked = ::unlink(file.c_str()) == 0;
    }
    ::close(evicter);
  });
  DiskCache cache(o);
  const bool hit = cache.find(artifact.identity).has_value();
  evicting.join();
  ASSERT_TRUE(unlinked);
  EXPECT_FALSE(hit) << "a hit on an entry that is no longer in the root";
  EXPECT_EQ(cache.counters().misses, 1u);
}

}  // namespace
}  // namespace zerojit::test
