// The hooks an engine embedding zerojit uses instead of the tool's terminal output: the warmup
// progress callback, and the log handler through which progress lines and cache warnings go.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "examples/examples.hpp"
#include "support/core_fixture.hpp"
#include "zerojit/disk_cache.hpp"
#include "zerojit/zerojit.hpp"

namespace zerojit {
namespace {

class EngineHooks : public testing::CoreTest {
 protected:
  void SetUp() override {
    CoreTest::SetUp();
    ASSERT_TRUE(nvrtc_available()) << nvrtc_unavailable_reason();
  }
  void TearDown() override {
    set_log_handler(nullptr);
    CoreTest::TearDown();
  }
};

TEST_F(EngineHooks, ProgressCallbackSeesEveryKeyOnceInOrderOfCompletion) {
  WarmupRegistry registry;
  examples::register_examples(registry);
  std::mutex mutex;
  std::vector<std::size_t> done;
  std::set<std::string> keys;
  std::size_t total = 0;
  WarmupOptions options{.compile_only = true, .jobs = 3, .progress = ProgressStyle::none};
  options.on_progress = [&](const WarmupProgress& progress) {
    std::lock_guard lock(mutex);
    done.push_back(progress.done);
    total = progress.total;
    ASSERT_NE(progress.key, nullptr);
    EXPECT_TRUE(progress.key->error.empty()) << progress.key->error;
    keys.insert(progress.key->kernel + " " + progress.key->key);
  };
  const WarmupReport report = registry.warmup(options);
  ASSERT_TRUE(report.ok());
  ASSERT_EQ(report.total_keys(), 5);
  EXPECT_EQ(total, 5u);
  // Calls are serialized: the counts are 1..5 in order, one per distinct key.
  EXPECT_EQ(done, (std::vector<std::size_t>{1, 2, 3, 4, 5}));
  EXPECT_EQ(keys.size(), 5u);
}

TEST_F(EngineHooks, ACancelledWarmupStartsNoFurtherKeyAndDoesNotArmTheMonitor) {
  Monitor::instance().set_mode(MonitorMode::warn);
  WarmupRegistry registry;
  examples::register_examples(registry);
  int asked = 0;
  std::size_t finished = 0;
  WarmupOptions options{.compile_only = true, .jobs = 1, .progress = ProgressStyle::none};
  options.on_progress = [&](const WarmupProgress&) { ++finished; };
  options.cancel_requested = [&] { return ++asked > 2; };  // two keys, then stop
  const WarmupReport report = registry.warmup(options);
  EXPECT_TRUE(report.cancelled);
  EXPECT_FALSE(report.monitor_armed);
  EXPECT_FALSE(Monitor::instance().armed());
  EXPECT_EQ(asked, 3);  // asked before each key until it said yes, then no more
  EXPECT_EQ(finished, 2u);
  EXPECT_EQ(report.total_keys(), 5);
  EXPECT_EQ(report.compiled() + report.from_disk() + report.from_memory(), 2);
  EXPECT_EQ(report.failed(), 3);
  int cancelled = 0;
  for (const KeyReport& key : report.keys) {
    cancelled += key.error == "warmup cancelled before this key started" ? 1 : 0;
  }
  EXPECT_EQ(cancelled, 3);
  EXPECT_NE(report.summary_line().find("(cancelled)"), std::string::npos);
  EXPECT_NE(report.to_json().find("\"cancelled\":true"), std::string::npos);

  // A callback that throws stops the warmup too (rather than escaping into a worker thread).
  WarmupOptions throwing{.compile_only = true, .jobs = 2, .progress = ProgressStyle::none};
  throwing.cancel_requested = []() -> bool { throw std::runtime_error("engine shutting down"); };
  const WarmupReport stopped = registry.warmup(throwing);
  EXPECT_TRUE(stopped.cancelled);
  EXPECT_EQ(stopped.failed(), 5);
  Monitor::instance().set_mode(MonitorMode::off);
}

TEST_F(EngineHooks, ProgressLinesGoThroughTheLogHandler) {
  std::vector<std::string> lines;
  set_log_handler([&lines](const LogRecord& record) {
    if (record.component == "warmup" && record.level == LogLevel::info) {
      lines.emplace_back(record.message);
    }
  });
  WarmupRegistry registry;
  examples::register_examples(registry);
  const WarmupReport report = registry.warmup(
      WarmupOptions{.compile_only = true, .jobs = 1, .progress = ProgressStyle::lines});
  ASSERT_TRUE(report.ok());
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_EQ(lines.front().rfind("[1/5] compiled", 0), 0u) << lines.front();
  EXPECT_EQ(lines.back().rfind("[5/5] ", 0), 0u) << lines.back();
}

TEST_F(EngineHooks, CacheWarningsGoThroughTheLogHandler) {
  std::vector<std::string> warnings_seen;
  set_log_handler([&warnings_seen](const LogRecord& record) {
    if (record.component == "cache" && record.level == LogLevel::warning) {
      warnings_seen.emplace_back(record.message);
    }
  });
  // A root that is a file, not a directory: the cache warns and carries on without it.
  // A name of its own (mkstemp): runs of the suite side by side must not share it.
  std::string file = ::testing::TempDir() + "zerojit_hooks_not_a_directory_XXXXXX";
  const int created = ::mkstemp(file.data());
  ASSERT_GE(created, 0);
  ::close(created);
  DiskCacheOptions options;
  options.root = file;
  DiskCache cache(options);
  EXPECT_FALSE(cache.find(ProgramIdentity{}).has_value());
  std::remove(file.c_str());
  ASSERT_FALSE(warnings_seen.empty());
  EXPECT_NE(warnings_seen.front().find(file), std::string::npos) << warnings_seen.front();
}

}  // namespace
}  // namespace zerojit
