// A misbehaving remote is never worse than none: Redis killed mid-warmup, a server that never
// answers, nothing listening, damaged values, wrong credentials, values over the entry limit,
// and no hiredis at all.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "unit/remote_cache/support.hpp"

namespace zerojit::test {
namespace {

bool mentions(const HostRun& run, const std::string& text) {
  return run.run.stderr_text.find(text) != std::string::npos;
}

TEST_F(RemoteCacheTest, RedisKilledMidWarmupStillWarmsEverythingWithAWarning) {
  auto worker = start_host("host", {"--jobs", "1"});
  RespClient watch(server->port());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  bool published = false;
  while (!published && std::chrono::steady_clock::now() < deadline && worker->running()) {
    published = !watch.command({"KEYS", "zerojit:entry:*"}).elements.empty();
  }
  ASSERT_TRUE(published) << "the host never published";
  // The host waits, stopped, while Redis dies: its remaining keys then meet a dead server
  // however quickly this machine compiles them.
  ::kill(worker->pid(), SIGSTOP);
  server->kill_now();
  ::kill(worker->pid(), SIGCONT);
  const HostRun run = finish(worker->wait());
  ASSERT_TRUE(run.ok()) << run.describe();
  EXPECT_EQ(run.total("failed"), 0);
  EXPECT_EQ(run.total("compiled"), kExampleKeys);
  EXPECT_GE(run.remote("errors"), 1) << "Redis died before the warmup ended" << run.describe();
  EXPECT_TRUE(mentions(run, "remote cache " + server->url())) << run.describe();
}

TEST_F(RemoteCacheTest, AServerThatNeverAnswersCostsBoundedTimeoutsThenABackoff) {
  SilentServer silent;
  const std::string url = "redis://127.0.0.1:" + std::to_string(silent.port()) + "/0";
  const auto start = std::chrono::steady_clock::now();
  // One compile at a time, so that no operation is in flight when the backoff starts.
  const HostRun run =
      host("host", {"--jobs", "1"},
           {"ZEROJIT_REMOTE_CACHE_TIMEOUT_MS=200", "ZEROJIT_REMOTE_CACHE_FAILURES=2",
            "ZEROJIT_REMOTE_CACHE_BACKOFF_S=600"},
           url);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(run.ok()) << run.describe();
  EXPECT_EQ(run.total("compiled"), kExampleKeys);
  // The check at start and the first key time out; then the tier backs off: no timeout per key.
  EXPECT_EQ(run.remote("timeouts"), 2) << run.describe();
  EXPECT_EQ(run.remote("backoffs"), 1) << run.describe();
  EXPECT_GE(run.remote("skipped"), kExampleKeys) << run.describe();
  EXPECT_TRUE(mentions(run, "not asking it for 600.0 s")) << run.describe();
  EXPECT_LT(seconds, 20.0);

  // Nothing listening at all: refused at once, the same outcome.
  const std::string closed = "redis://127.0.0.1:" + std::to_string(free_port()) + "/0";
  const HostRun refused = host("host2", {}, {}, closed);
  ASSERT_TRUE(refused.ok()) << refused.describe();
  EXPECT_EQ(refused.total("compiled"), kExampleKeys);
  EXPECT_GE(refused.remote("errors"), 1);
  EXPECT_EQ(refused.remote("timeouts"), 0);
  EXPECT_TRUE(mentions(refused, "cannot connect")) << refused.describe();
}

TEST_F(RemoteCacheTest, DamagedValuesAreDetectedNotLoadedAndHealed) {
  ASSERT_TRUE(host("first").ok());
  std::vector<std::string> keys = entry_keys();
  ASSERT_EQ(keys.size(), static_cast<std::size_t>(kExampleKeys));
  std::sort(keys.begin(), keys.end());
  const std::string whole = *server->get(keys[0]);
  server->command({"SET", keys[0], whole.substr(0, whole.size() / 2)});  // truncated
  std::string flipped = *server->get(keys[1]);
  flipped[flipped.size() / 2] = static_cast<char>(flipped[flipped.size() / 2] ^ 0x01);
  server->command({"SET", keys[1], flipped});                // one bit changed
  server->command({"SET", keys[2], "not a zerojit entry"});  // foreign
  server->command({"SET", keys[3], *server->get(keys[4])});  // another identity's entry

  const HostRun second = host("second");
  ASSERT_TRUE(second.ok()) << second.describe();
  EXPECT_EQ(second.remote("bad_entries"), 4) << second.describe();
  EXPECT_EQ(second.remote("hits"), 1);
  EXPECT_EQ(second.total("compiled"), 4) << "the damaged ones are compiled, never loaded";
  EXPECT_EQ(second.remote("published"), 4);
  for (const char* problem : {"truncated", "checksum-mismatch", "foreign", "identity-mismatch"}) {
    EXPECT_TRUE(mentions(second, std::string("(") + problem + ")")) << problem << second.describe();
  }
  // Healed: a third host finds every entry good.
  const HostRun third = host("third");
  ASSERT_TRUE(third.ok()) << third.describe();
  EXPECT_EQ(third.total("compiled"), 0);
  EXPECT_EQ(third.remote("bad_entries"), 0);
  EXPECT_EQ(third.remote("hits"), kExampleKeys);
}

TEST_F(RemoteCacheTest, AWrongPasswordIsAClearErrorThatNeverShowsThePassword) {
  ASSERT_EQ(
      server->command({"ACL", "SETUSER", "builder", "on", ">right-horse-battery", "~*", "+@all"})
          .type,
      RespValue::Type::status);
  const std::string base = "127.0.0.1:" + std::to_string(server->port()) + "/0";
  const HostRun wrong = host("host", {}, {}, "redis://builder:wrong-secret@" + base);
  EXPECT_EQ(wrong.run.exit_code, 2) << wrong.describe();
  const std::string message = wrong.doc.is_object() ? wrong.doc["error"].value("message", "") : "";
  EXPECT_NE(message.find("redis://builder:***@" + base), std::string::npos) << message;
  EXPECT_NE(message.find("WRONGPASS"), std::string::npos) << message;
  const std::string& err = wrong.run.stderr_text;
  EXPECT_EQ(err.find("WRONGPASS"), err.rfind("WRONGPASS")) << "said once: " << err;
  EXPECT_EQ(wrong.run.stdout_text.find("wrong-secret"), std::string::npos);
  EXPECT_EQ(wrong.run.stderr_text.find("wrong-secret"), std::string::npos);

  // The right one, given apart from the URL.
  const HostRun right = host("host", {}, {"ZEROJIT_REMOTE_CACHE_PASSWORD=right-horse-battery"},
                             "redis://builder@" + base);
  ASSERT_TRUE(right.ok()) << right.describe();
  EXPECT_EQ(right.remote("published"), kExampleKeys);
  EXPECT_EQ(right.run.stderr_text.find("right-horse-battery"), std::string::npos);
}

TEST_F(RemoteCacheTest, EntriesOverTheLimitAreNeitherSentNorLoaded) {
  const std::vector<std::string> small = {"ZEROJIT_REMOTE_CACHE_MAX_ENTRY=1K"};
  const HostRun refused = host("first", {}, small);
  ASSERT_TRUE(refused.ok()) << refused.describe();
  EXPECT_EQ(refused.remote("too_large"), kExampleKeys) << refused.describe();
  EXPECT_EQ(refused.remote("published"), 0);
  EXPECT_TRUE(entry_keys().empty());
  EXPECT_TRUE(mentions(refused, "over the entry limit of 1.0 KiB")) << refused.describe();

  // Stored under the default limit, then refused by a host with the small one, unread.
  ASSERT_TRUE(host("second").ok());
  ASSERT_EQ(entry_keys().size(), static_cast<std::size_t>(kExampleKeys));
  const HostRun reader = host("third", {}, small);
  ASSERT_TRUE(reader.ok()) << reader.describe();
  EXPECT_EQ(reader.remote("hits"), 0);
  EXPECT_EQ(reader.remote("too_large"), 2 * kExampleKeys) << "refused on fetch and on publish";
  EXPECT_EQ(reader.total("compiled"), kExampleKeys);
}

TEST_F(RemoteCacheTest, WithoutHiredisTheToolRunsAndOnlyAConfiguredRemoteFails) {
  const std::vector<std::string> missing = {"ZEROJIT_HIREDIS_LIBRARY=libhiredis-not-here.so"};
  const HostRun plain = host("host", {}, missing, "none");
  ASSERT_TRUE(plain.ok()) << plain.describe();
  const HostRun remote = host("host", {}, missing);
  EXPECT_EQ(remote.run.exit_code, 2) << remote.describe();
  EXPECT_TRUE(mentions(remote, "hiredis is not installed")) << remote.describe();
}

}  // namespace
}  // namespace zerojit::test
