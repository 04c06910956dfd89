// Processes warming one cold cache share its keys (docs/CACHE.md, "Warmups share the work"): a
// key whose compile lock another process holds is put off, the keys nobody holds are warmed
// first, and the held one is waited for at the end, then loaded from what its holder
// published, or compiled when the holder died without publishing it. The order is read from
// the worker's progress lines (tests/support/cache_worker.cpp), never from timings.
#include <chrono>
#include <cstdio>
#include <sstream>
#include <thread>

#include "unit/disk_cache/support.hpp"

namespace zerojit::test {
namespace {

// The "<kernel> <key>" of each progress line printed so far, in the order the keys finished.
std::vector<std::string> finished_keys(const std::string& stdout_text) {
  std::vector<std::string> keys;
  std::istringstream lines(stdout_text);
  for (std::string line; std::getline(lines, line);) {
    if (!line.starts_with("{\"done\"")) continue;
    const json event = json::parse(line, nullptr, false);
    if (event.is_discarded()) continue;  // a line still being written
    keys.push_back(event["kernel"].get<std::string>() + " " + event["key"].get<std::string>());
  }
  return keys;
}

std::string origin_of(const WorkerRun& run, const std::string& key) {
  std::istringstream lines(run.stdout_text);
  for (std::string line; std::getline(lines, line);) {
    if (!line.starts_with("{\"done\"")) continue;
    const json event = json::parse(line);
    if (event["kernel"].get<std::string>() + " " + event["key"].get<std::string>() == key) {
      return event["origin"].get<std::string>();
    }
  }
  return "not reported";
}

class SharedWarmup : public DiskCacheProcesses {
 protected:
  // Waits until `worker` has finished `count` keys (or ended); returns them in order.
  static std::vector<std::string> wait_for_keys(Worker& worker, std::size_t count) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(300);
    while (true) {
      std::vector<std::string> keys = finished_keys(worker.stdout_so_far());
      if (keys.size() >= count || !worker.running() ||
          std::chrono::steady_clock::now() > deadline) {
        return keys;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  // With the lock of the key a one-job warmup starts with held by another process: the
  // warmup finishes every other key first and is still waiting for that one (its lock timeout
  // is long). `before_release` runs then; the holder is killed (its lock released) and the
  // warmup's result returned. `held` is set to the held key.
  WorkerRun warm_around_a_held_key(const fs::path& root, const WorkerRun& reference,
                                   std::string& held,
                                   const std::function<void(const std::string&)>& before_release) {
    // The key a one-job warmup starts with (it starts the largest programs first).
    const std::vector<std::string> natural = finished_keys(reference.stdout_text);
    EXPECT_EQ(natural.size(), static_cast<std::size_t>(kExampleKeys)) << reference.describe();
    if (natural.empty()) return {};
    held = natural.front();
    int index = -1;
    const json& identities = reference.out["identities"];
    for (std::size_t i = 0; i < identities.size(); ++i) {
      const json& item = identities[i];
      if (item["kernel"].get<std::string>() + " " + item["key"].get<std::string>() == held) {
        index = static_cast<int>(i);
      }
    }
    EXPECT_GE(index, 0) << held;
    auto holder = hold_lock(root, index);
    auto warmer = start(root, {"--jobs", "1", "--progress-lines", "--lock-timeout-ms", "600000"});
    const std::vector<std::string> first = wait_for_keys(*warmer, kExampleKeys - 1);
    EXPECT_EQ(first.size(), static_cast<std::size_t>(kExampleKeys - 1))
        << "the keys nobody holds are warmed while the held one is waited for";
    for (const std::string& key : first) EXPECT_NE(key, held) << "done before its lock was free";
    EXPECT_TRUE(warmer->running()) << "it waits for the held key";
    before_release(held);
    holder->kill_now();  // a holder's lock goes with it
    holder->wait();
    WorkerRun run = warmer->wait();
    const std::vector<std::string> order = finished_keys(run.stdout_text);
    EXPECT_EQ(order.size(), static_cast<std::size_t>(kExampleKeys)) << run.describe();
    if (!order.empty()) {
      EXPECT_EQ(order.back(), held) << "the held key finishes last";
    }
    EXPECT_EQ(run.count("deferred"), 1) << run.describe();
    EXPECT_GE(run.counter("lock_waits"), 1) << "it waited for the held key, at the end";
    EXPECT_EQ(run.counter("lock_timeouts"), 0) << run.describe();
    EXPECT_TRUE(run.warnings().empty()) << run.describe();
    return run;
  }
};

TEST_F(SharedWarmup, AHeldKeyIsWarmedLastAndLoadedFromWhatItsHolderPublished) {
  const WorkerRun reference = run(scratch / "reference", {"--jobs", "1", "--progress-lines"});
  expect_warm(reference, kExampleKeys, 0);
  const fs::path root = scratch / "cache";
  std::string held;
  const WorkerRun warmed =
      warm_around_a_held_key(root, reference, held, [&](const std::string& key) {
        // The holder publishes before it releases: the same entry a compile of the key writes.
        const std::string name = identities_by_key(reference).at(key) + ".zjc";
        fs::copy_file(scratch / "reference" / "entries" / name, root / "entries" / name);
      });
  expect_warm(warmed, kExampleKeys - 1, 1);
  EXPECT_EQ(origin_of(warmed, held), "disk") << "loaded from the holder's entry, not compiled";
  EXPECT_EQ(expect_all_valid(root), static_cast<std::size_t>(kExampleKeys));
}

TEST_F(SharedWarmup, AHeldKeyWhoseHolderDiesWithoutPublishingIsCompiledAtTheEnd) {
  const WorkerRun reference = run(scratch / "reference", {"--jobs", "1", "--progress-lines"});
  expect_warm(reference, kExampleKeys, 0);
  const fs::path root = scratch / "cache";
  std::string held;
  const WorkerRun warmed = warm_around_a_held_key(root, reference, held, [](const std::string&) {});
  expect_warm(warmed, kExampleKeys, 0);
  EXPECT_EQ(origin_of(warmed, held), "compiled") << "nothing is lost with its holder";
  EXPECT_EQ(expect_all_valid(root), static_cast<std::size_t>(kExampleKeys));
}

TEST_F(SharedWarmup, ProcessesWarmingOneColdCacheCompileEachKeyOnceBetweenThem) {
  for (const int processes : {2, 3}) {
    SCOPED_TRACE(std::to_string(processes) + " processes");
    const fs::path root = scratch / ("cache" + std::to_string(processes));
    std::vector<std::unique_ptr<Worker>> workers;
    for (int i = 0; i < processes; ++i) workers.push_back(start(root, {"--jobs", "1"}));
    int compiled = 0;
    std::string split;
    for (auto& worker : workers) {
      const WorkerRun run = worker->wait();
      expect_warm(run, -1, -1);
      EXPECT_EQ(run.count("compiled") + run.count("from_disk"), kExampleKeys) << run.describe();
      EXPECT_TRUE(run.warnings().empty()) << run.describe();
      compiled += run.count("compiled");
      split += (split.empty() ? "" : " + ") + std::to_string(run.count("compiled"));
    }
    // Which process compiles which key depends on when each starts; the total does not.
    std::printf("%d processes, one job each: compiled %s\n", processes, split.c_str());
    EXPECT_EQ(compiled, kExampleKeys) << "each key compiled exactly once over all processes";
    EXPECT_EQ(expect_all_valid(root), static_cast<std::size_t>(kExampleKeys));
    EXPECT_EQ(count_files(root / "locks"), 0u);
  }
}

}  // namespace
}  // namespace zerojit::test
