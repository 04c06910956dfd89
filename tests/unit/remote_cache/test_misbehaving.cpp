// A Redis that trickles or lies costs what the settings say and no more: a command ends within
// its timeout however slowly the reply arrives (the stand-in sends one byte every 100 ms, so
// every read succeeds well within the timeout), replies announcing more than any command is
// answered with are refused before anything is allocated, and a compile lock planted without
// an expiry costs one lock TTL, as a dead holder's does. The measured stalls are printed
// ("[ stall ]" lines), not asserted as benchmarks: the assertions keep generous bounds for a
// loaded CI machine.
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "unit/remote_cache/scripted_server.hpp"
#include "unit/remote_cache/support.hpp"
#include "zerojit/remote_cache.hpp"

namespace zerojit::test {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

double milliseconds_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

class MisbehavingRedis : public ::testing::Test {
 protected:
  // A remote on `url` that never backs off (each command is tried), warnings kept.
  std::unique_ptr<RemoteCache> remote(const std::string& url, milliseconds timeout) {
    RemoteCacheOptions options;
    options.url = url;
    options.command_timeout = timeout;
    options.failures_before_backoff = 1000000;
    options.warning_sink = [this](std::string_view line) { warnings.emplace_back(line); };
    auto cache = std::make_unique<RemoteCache>(std::move(options));
    return cache;
  }
  // Skips the test when hiredis cannot be loaded (the probe says so as a misconfiguration).
  void skip_without_hiredis(const RemoteProbe& probe) {
    if (probe.status == RemoteProbe::Status::misconfigured &&
        probe.message.find("hiredis") != std::string::npos) {
      GTEST_SKIP() << probe.message;
    }
  }

  std::vector<std::string> warnings;
};

TEST_F(MisbehavingRedis, ATricklingServerCostsTheCommandTimeoutNotItsReply) {
  // 200 bytes at one every 100 ms: 20 s for a reply whose every read comes in time.
  ScriptedServer trickle(resp_bulk(200), milliseconds(100));
  constexpr milliseconds kTimeout(300);
  const auto cache = remote(trickle.url(), kTimeout);
  const ProgramIdentity identity = synthetic_artifact(32).identity;
  for (int i = 0; i < 4; ++i) {
    const Clock::time_point start = Clock::now();
    bool failed = false;
    if (i < 2) {
      const RemoteProbe probe = cache->probe();
      skip_without_hiredis(probe);
      failed =
          probe.status == RemoteProbe::Status::unreachable &&
          probe.message.find("no complete reply within the command timeout") != std::string::npos;
      EXPECT_TRUE(failed) << probe.message;
    } else if (i == 2) {
      failed = !cache->fetch(identity);
    } else {
      const RemoteCache::Obtained obtained = cache->obtain(identity);
      failed = !obtained.artifact && !obtained.lock;
    }
    const double took = milliseconds_since(start);
    std::printf(
        "[ stall    ] %s against a Redis trickling a byte every 100 ms: %.0f ms "
        "(command timeout %lld ms)\n",
        i < 2    ? "PING"
        : i == 2 ? "fetch"
                 : "obtain",
        took, static_cast<long long>(kTimeout.count()));
    EXPECT_TRUE(failed);
    EXPECT_GE(took, 0.8 * kTimeout.count()) << "it waited for the reply up to the timeout";
    EXPECT_LT(took, 3.0 * kTimeout.count()) << "the timeout bounds the command, not each read";
  }
  const RemoteCacheCounters counters = cache->counters();
  EXPECT_EQ(counters.timeouts, 4u);
  EXPECT_EQ(counters.errors, 4u);
  EXPECT_EQ(warnings.size(), 1u) << "the first error is reported, the others counted";
}

TEST_F(MisbehavingRedis, ASlowButHonestReplyIsReadWhole) {
  // 300 bytes at a byte every 2 ms: well within a 10 s timeout, in hundreds of reads.
  ScriptedServer slow(resp_bulk(300), milliseconds(2));
  const auto cache = remote(slow.url(), milliseconds(10000));
  const RemoteProbe probe = cache->probe();
  skip_without_hiredis(probe);
  EXPECT_EQ(probe.status, RemoteProbe::Status::ok) << probe.message;
  EXPECT_EQ(cache->counters().errors, 0u);
}

TEST_F(MisbehavingRedis, RepliesAnnouncingMoreThanAnyCommandIsAnsweredWithAreRefusedAtOnce) {
  const struct {
    std::string reply;
    std::string said;
  } lies[] = {
      {"*2147483648\r\n", "announcing 2147483648 array elements"},
      {"*3\r\n:1\r\n*100\r\n", "announcing 100 array elements"},
      {"$1099511627776\r\n", "announcing a value of 1099511627776 bytes"},
      {"*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n", "with arrays nested more than 4 deep"},
      {"%1\r\n+a\r\n+b\r\n", "of type '%'"},
      {"+" + std::string(100 * 1024, 'x'), "with a line of more than 65536 bytes"},
      {"+OK\r\n+OK\r\n", "followed by 5 bytes"},
  };
  for (const auto& lie : lies) {
    ScriptedServer liar(lie.reply);
    // A long timeout, so that only refusing the reply can end the command quickly.
    const auto cache = remote(liar.url(), milliseconds(10000));
    const Clock::time_point start = Clock::now();
    const RemoteProbe probe = cache->probe();
    const double took = milliseconds_since(start);
    skip_without_hiredis(probe);
    std::printf("[ stall    ] a reply %s: refused in %.0f ms (command timeout 10 s)\n",
                lie.said.c_str(), took);
    EXPECT_EQ(probe.status, RemoteProbe::Status::unreachable) << lie.said;
    EXPECT_NE(probe.message.find(lie.said), std::string::npos) << probe.message;
    EXPECT_NE(probe.message.find("before reading it"), std::string::npos) << probe.message;
    EXPECT_LT(took, 2000.0) << lie.said;
    EXPECT_EQ(cache->counters().timeouts, 0u) << lie.said;
  }
}

TEST_F(RemoteCacheTest, ATricklingServerCostsAWarmupTwoTimeoutsThenABackoff) {
  // 400 bytes at one every 100 ms: 40 s for each reply, had each read its own timeout only.
  ScriptedServer trickle(resp_bulk(400), milliseconds(100));
  const Clock::time_point start = Clock::now();
  const HostRun run =
      host("host", {"--jobs", "1"},
           {"ZEROJIT_REMOTE_CACHE_TIMEOUT_MS=300", "ZEROJIT_REMOTE_CACHE_FAILURES=2",
            "ZEROJIT_REMOTE_CACHE_BACKOFF_S=600"},
           trickle.url());
  const double took = milliseconds_since(start) / 1000.0;
  std::printf(
      "[ stall    ] a warmup against a Redis trickling a byte every 100 ms (command "
      "timeout 300 ms, 2 failures before the backoff): %.1f s in all, compiles included\n",
      took);
  ASSERT_TRUE(run.ok()) << run.describe();
  EXPECT_EQ(run.total("compiled"), kExampleKeys);
  EXPECT_EQ(run.remote("timeouts"), 2) << run.describe();
  EXPECT_EQ(run.remote("backoffs"), 1) << run.describe();
  EXPECT_LT(took, 30.0) << run.describe();
}

TEST_F(RemoteCacheTest, ALockPlantedWithoutAnExpiryCostsOneLockTtl) {
  // The identities of the examples' keys, from a first host under another prefix.
  ASSERT_TRUE(host("first", {}, {"ZEROJIT_REMOTE_CACHE_PREFIX=other"}).ok());
  const std::vector<std::string> entries = server->keys("other:entry:*");
  ASSERT_EQ(entries.size(), static_cast<std::size_t>(kExampleKeys));
  // Every key's compile lock held "forever": no expiry, and no holder to release or renew it.
  for (const std::string& entry : entries) {
    const std::string identity = entry.substr(entry.find('{'));
    server->command({"SET", "zerojit:lock:" + identity, "planted"});
  }
  const Clock::time_point start = Clock::now();
  const HostRun run =
      host("second", {"--jobs", "1"},
           {"ZEROJIT_REMOTE_CACHE_LOCK_TTL_MS=400", "ZEROJIT_REMOTE_CACHE_LOCK_WAIT_S=60"});
  const double took = milliseconds_since(start) / 1000.0;
  std::printf(
      "[ stall    ] %d keys behind locks planted without an expiry (lock TTL 400 ms, "
      "lock wait 60 s): %.1f s in all, compiles included\n",
      kExampleKeys, took);
  ASSERT_TRUE(run.ok()) << run.describe();
  EXPECT_EQ(run.total("compiled"), kExampleKeys);
  EXPECT_EQ(run.remote("lock_waits"), kExampleKeys) << run.describe();
  EXPECT_EQ(run.remote("lock_wait_timeouts"), 0) << "taken after the TTL, not the lock wait";
  EXPECT_EQ(run.remote("published"), kExampleKeys) << run.describe();
  EXPECT_NE(run.run.stderr_text.find("had no expiry"), std::string::npos) << run.describe();
  EXPECT_LT(took, 40.0) << run.describe();
  EXPECT_TRUE(lock_keys().empty()) << "every lock taken over was released";
}

}  // namespace
}  // namespace zerojit::test
