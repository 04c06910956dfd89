// Processes (tests/support/cache_worker.cpp) warming the example kernels with real NVRTC
// compiles against one cache: many at once, killed mid-warmup, against damaged, read-only and
// refused roots, under file-size limits, and waiting on each other's locks.
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <random>
#include <set>
#include <thread>

#include "unit/disk_cache/support.hpp"

namespace zerojit::test {
namespace {

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
  // Kills land at random points of a run's length, first the cold run's. A run that ends
  // before its kill shows runs are now shorter (a cold run slowed by a busy machine, the memo
  // making later runs quicker): the window then shrinks below that run's length, so that the
  // kills keep spreading over whole runs whatever the machine does meanwhile.
  const auto cold_window = std::chrono::duration_cast<std::chrono::microseconds>(cold_time);
  long long window = std::max<long long>(cold_window.count(), 1000);
  int kills = 0;
  int trials = 0;
  while (kills < 50 && trials < 400) {
    ++trials;
    // Take entries away (and sometimes the NVRTC memo), so that this run compiles and writes.
    for (const std::string& name : entry_files(root)) {
      if (rng() % 3 != 0) fs::remove(root / "entries" / name);
    }
    if (rng() % 4 == 0) {
      for (const auto& item : fs::directory_iterator(root / "nvrtc-version")) fs::remove(item);
    }
    auto worker = start(root);
    const long long delay = std::uniform_int_distribution<long long>(0, window)(rng);
    std::this_thread::sleep_for(std::chrono::microseconds(delay));
    worker->kill_now();
    const WorkerRun killed = worker->wait();
    if (killed.signal == SIGKILL) {
      ++kills;
    } else {
      window = std::max<long long>(delay * 9 / 10, 1000);
    }
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
  std::printf(
      "%d kills in %d trials (window %.3f s, at first %.3f s); %zu temporaries left by killed "
      "writers\n",
      kills, trials, static_cast<double>(window) * 1e-6,
      static_cast<double>(cold_window.count()) * 1e-6, temporaries);
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
    return hold_lock(cache_root, 0, std::chrono::seconds(30));
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

TEST_F(DiskCacheProcesses, AReadOnlyRootSaysWhetherAnythingWentUnsaved) {
  // Warm, then read-only: every key from disk, nothing needed saving (a warning, no loss).
  const fs::path warmed = scratch / "warmed";
  expect_warm(run(warmed), kExampleKeys, 0);
  fs::permissions(warmed / "entries", fs::perms::owner_write, fs::perm_options::remove);
  const WorkerRun used = run(warmed, {"--drop-write-override"});
  expect_warm(used, 0, kExampleKeys);
  EXPECT_EQ(used.out["state"], "read-only");
  EXPECT_EQ(used.counter("hits"), kExampleKeys);
  EXPECT_EQ(used.counter("not_saved"), 0);
  EXPECT_EQ(used.counter("write_failures"), 0);

  // One entry missing: it is compiled, and counted as not saved.
  fs::permissions(warmed / "entries", fs::perms::owner_write, fs::perm_options::add);
  fs::remove(warmed / "entries" / entry_files(warmed)[0]);
  fs::permissions(warmed / "entries", fs::perms::owner_write, fs::perm_options::remove);
  const WorkerRun lost = run(warmed, {"--drop-write-override"});
  expect_warm(lost, 1, kExampleKeys - 1);
  EXPECT_EQ(lost.counter("not_saved"), 1);
  fs::permissions(warmed / "entries", fs::perms::owner_write, fs::perm_options::add);
}

}  // namespace
}  // namespace zerojit::test
