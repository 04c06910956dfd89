// Simulated hosts (tool processes with separate disk caches) sharing one real redis-server:
// the fleet single flight, warming from Redis alone, a lock holder killed mid-compile, and
// cache push / pull.
#include <signal.h>

#include <chrono>
#include <set>
#include <thread>

#include "unit/remote_cache/support.hpp"
#include "zerojit/remote_cache.hpp"

namespace zerojit::test {
namespace {

TEST_F(RemoteCacheTest, FourHostsCompileEachKeyOnceAndAFifthWarmsFromRedisAlone) {
  std::vector<std::unique_ptr<Worker>> hosts;
  for (int i = 0; i < 4; ++i) hosts.push_back(start_host("host" + std::to_string(i)));
  int compiled = 0, published = 0;
  for (auto& worker : hosts) {
    const HostRun run = finish(worker->wait());
    ASSERT_TRUE(run.ok()) << run.describe();
    EXPECT_EQ(run.total("compiled") + run.total("from_disk"), kExampleKeys) << run.describe();
    EXPECT_EQ(run.remote("errors"), 0) << run.describe();
    EXPECT_EQ(run.remote("lock_wait_timeouts"), 0) << run.describe();
    compiled += run.total("compiled");
    published += run.remote("published");
  }
  EXPECT_EQ(compiled, kExampleKeys) << "each key compiled exactly once over the four hosts";
  EXPECT_EQ(published, kExampleKeys);
  EXPECT_EQ(entry_keys().size(), static_cast<std::size_t>(kExampleKeys));
  EXPECT_TRUE(lock_keys().empty()) << "every holder released its lock";

  // A fifth host with an empty disk: everything from Redis, nothing compiled...
  const HostRun fifth = host("host4");
  ASSERT_TRUE(fifth.ok()) << fifth.describe();
  EXPECT_EQ(fifth.total("compiled"), 0) << fifth.describe();
  EXPECT_EQ(fifth.remote("hits"), kExampleKeys) << fifth.describe();
  EXPECT_EQ(fifth.remote("published"), 0);
  // ... and kept on its disk: its next run asks Redis nothing.
  EXPECT_EQ(entry_files(scratch / "host4").size(), static_cast<std::size_t>(kExampleKeys));
  const HostRun again = host("host4");
  ASSERT_TRUE(again.ok()) << again.describe();
  EXPECT_EQ(again.total("from_disk"), kExampleKeys);
  EXPECT_EQ(again.remote("hits") + again.remote("misses"), 0) << again.describe();
}

TEST_F(RemoteCacheTest, ProcessesOfOneHostAskRedisOncePerKey) {
  // Three processes sharing one disk cache (one host): the disk's lock holder asks Redis, the
  // others find its result on disk.
  std::vector<std::unique_ptr<Worker>> processes;
  for (int i = 0; i < 3; ++i) processes.push_back(start_host("shared"));
  int asked = 0, compiled = 0;
  for (auto& worker : processes) {
    const HostRun run = finish(worker->wait());
    ASSERT_TRUE(run.ok()) << run.describe();
    asked += run.remote("hits") + run.remote("misses");
    compiled += run.total("compiled");
  }
  EXPECT_EQ(asked, kExampleKeys) << "one remote lookup per key on the host";
  EXPECT_EQ(compiled, kExampleKeys);
}

TEST_F(RemoteCacheTest, AKilledLockHolderIsTakenOverAfterTheExpiry) {
  const std::vector<std::string> environment = {"ZEROJIT_REMOTE_CACHE_LOCK_TTL_MS=1500"};
  // One compile at a time, in the tool's own process, so that SIGKILL ends the compile too.
  auto holder = start_host("holder", {"--jobs", "1", "--in-process"}, environment);
  RespClient watch(server->port());
  std::string held;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (held.empty() && std::chrono::steady_clock::now() < deadline && holder->running()) {
    const RespValue keys = watch.command({"KEYS", "zerojit:lock:*"});
    if (keys.elements.empty()) continue;
    // Stopped where it is (no release, no renewal), then killed only if the lock seen is still
    // held: a compile may have ended between the listing and the stop, however short it is.
    ::kill(holder->pid(), SIGSTOP);
    const std::string seen = keys.elements.front().text;
    if (watch.command({"EXISTS", seen}).integer == 1) {
      held = seen;
    } else {
      ::kill(holder->pid(), SIGCONT);
    }
  }
  ASSERT_FALSE(held.empty()) << "the holder never held a lock";
  holder->kill_now();
  holder->wait();
  const long long left = watch.command({"PTTL", held}).integer;
  ASSERT_GT(left, 0) << "the dead holder's lock is still there, with its expiry";
  const std::string entry = "zerojit:entry:" + held.substr(std::string("zerojit:lock:").size());
  ASSERT_EQ(watch.command({"EXISTS", entry}).integer, 0);
  const std::size_t published_before = entry_keys().size();

  const auto start = std::chrono::steady_clock::now();
  const HostRun other = host("other", {}, environment);
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(other.ok()) << other.describe();
  EXPECT_EQ(other.total("compiled"), kExampleKeys - static_cast<int>(published_before))
      << other.describe();
  EXPECT_EQ(other.remote("lock_waits"), 1) << other.describe();
  EXPECT_EQ(other.remote("lock_wait_timeouts"), 0) << "it got the lock when it expired";
  EXPECT_GE(waited, static_cast<double>(left) / 1000.0 - 0.05);
  EXPECT_EQ(watch.command({"EXISTS", entry}).integer, 1) << "the other host published it";
  EXPECT_TRUE(lock_keys().empty());
}

TEST_F(RemoteCacheTest, PushAndPullCopyAManifestBetweenDiskAndRedis) {
  const HostRun local = host("builder", {}, {}, "none");
  ASSERT_TRUE(local.ok()) << local.describe();
  ASSERT_TRUE(entry_keys().empty());
  auto tool = [&](std::vector<std::string> args) {
    return finish(Worker(ZEROJIT_TOOL, args, scratch.path()).wait());
  };
  const HostRun push = tool({"cache", "push", "--examples", "--json", "--cache-dir",
                             (scratch / "builder").string(), "--remote-cache", server->url()});
  ASSERT_TRUE(push.ok()) << push.describe();
  EXPECT_EQ(push.doc["result"]["copied"], kExampleKeys);
  EXPECT_EQ(entry_keys().size(), static_cast<std::size_t>(kExampleKeys));

  const HostRun pull = tool({"cache", "pull", "--examples", "--json", "--cache-dir",
                             (scratch / "server").string(), "--remote-cache", server->url()});
  ASSERT_TRUE(pull.ok()) << pull.describe();
  EXPECT_EQ(pull.doc["result"]["copied"], kExampleKeys);
  const HostRun serve = host("server", {}, {}, "none");
  ASSERT_TRUE(serve.ok()) << serve.describe();
  EXPECT_EQ(serve.total("from_disk"), kExampleKeys) << serve.describe();

  // A pull of keys the remote lacks names them and fails (exit 5).
  server->command({"FLUSHALL"});
  const HostRun empty = tool({"cache", "pull", "--examples", "--json", "--cache-dir",
                              (scratch / "late").string(), "--remote-cache", server->url()});
  EXPECT_EQ(empty.run.exit_code, 5) << empty.describe();
  EXPECT_EQ(empty.doc["result"]["missing"].size(), static_cast<std::size_t>(kExampleKeys));
}

TEST_F(RemoteCacheTest, PrefixesSeparateDeploymentsAndUnixSocketsWithADatabaseWork) {
  ASSERT_TRUE(host("first").ok());
  ASSERT_EQ(entry_keys().size(), static_cast<std::size_t>(kExampleKeys));
  // Another deployment's prefix shares nothing with the first.
  const HostRun other = host("other", {}, {"ZEROJIT_REMOTE_CACHE_PREFIX=staging"});
  ASSERT_TRUE(other.ok()) << other.describe();
  EXPECT_EQ(other.total("compiled"), kExampleKeys);
  EXPECT_EQ(server->keys("staging:entry:*").size(), static_cast<std::size_t>(kExampleKeys));

  const fs::path socket = scratch / "sock" / "redis.sock";
  RedisServer local(scratch / "sock", {"--unixsocket", socket.string()});
  ASSERT_TRUE(local.ok()) << local.why();
  const std::string url = "unix://" + socket.string() + "?db=3";
  const HostRun writer = host("unix1", {}, {}, url);
  ASSERT_TRUE(writer.ok()) << writer.describe();
  EXPECT_EQ(writer.remote("published"), kExampleKeys) << writer.describe();
  RespClient db3(local.port());
  db3.command({"SELECT", "3"});
  EXPECT_EQ(db3.command({"DBSIZE"}).integer, kExampleKeys) << "in database 3";
  const HostRun reader = host("unix2", {}, {}, url);
  ASSERT_TRUE(reader.ok()) << reader.describe();
  EXPECT_EQ(reader.remote("hits"), kExampleKeys);
}

// Host code (an exported CuTeDSL object) crosses Redis only where the deployment opts in; a
// host that has not refuses the entry before it counts as a hit, and compiles it itself.
TEST_F(RemoteCacheTest, HostCodeIsNeitherSentNorTakenNorCountedAsAHitWithoutTheOptIn) {
  const CompiledArtifact host_code = synthetic_language_artifact(Language::cutedsl);
  const auto remote = [&](bool host_code_allowed) {
    RemoteCacheOptions options;
    options.url = server->url();
    options.host_code = host_code_allowed;
    options.warning_sink = [](std::string_view) {};
    return std::make_unique<RemoteCache>(std::move(options));
  };
  EXPECT_FALSE(remote(false)->store(host_code));
  EXPECT_TRUE(entry_keys().empty()) << "not sent without the opt-in";
  ASSERT_TRUE(remote(true)->store(host_code));
  ASSERT_EQ(entry_keys().size(), 1u);

  auto declined = remote(false);
  const RemoteCache::Obtained refused = declined->obtain(host_code.identity);
  EXPECT_FALSE(refused.artifact);
  EXPECT_FALSE(refused.lock) << "compiled here, without holding the fleet's lock";
  EXPECT_FALSE(declined->fetch(host_code.identity));
  EXPECT_EQ(declined->counters().hits, 0u);
  EXPECT_EQ(declined->counters().host_code_refused, 2u);

  auto opted_in = remote(true);
  EXPECT_TRUE(opted_in->obtain(host_code.identity).artifact);
  EXPECT_EQ(opted_in->counters().hits, 1u);
}

// A Triton entry whose launch record was damaged and its entry sealed again: the remote tier
// reads it through the same decoder as the disk, refuses it and counts it as bad, never a hit.
TEST_F(RemoteCacheTest, ATritonEntryWithADamagedRecordIsBadNeverAHit) {
  CompiledArtifact damaged = synthetic_language_artifact(Language::triton);
  const std::size_t at = damaged.launch_record.find(R"("shared_bytes":0)");
  ASSERT_NE(at, std::string::npos);
  damaged.launch_record.replace(at, 16, R"("shared_bytes":-5)");
  RemoteCacheOptions options;
  options.url = server->url();
  options.warning_sink = [](std::string_view) {};
  RemoteCache remote(std::move(options));
  ASSERT_TRUE(remote.store(damaged));  // the writer stores what it is given
  const RemoteCache::Obtained obtained = remote.obtain(damaged.identity);
  EXPECT_FALSE(obtained.artifact);
  EXPECT_EQ(remote.counters().hits, 0u);
  EXPECT_EQ(remote.counters().bad_entries, 1u);
}

}  // namespace
}  // namespace zerojit::test
