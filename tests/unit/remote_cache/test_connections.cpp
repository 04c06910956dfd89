// The connections of one process to Redis: a server that drops them while they sit in the pool
// (a restart, an idle timeout, CLIENT KILL) costs neither the process (hiredis writes without
// MSG_NOSIGNAL, so a write to a closed socket raises SIGPIPE) nor a backoff of a healthy server.
#include <atomic>
#include <thread>
#include <vector>

#include "unit/remote_cache/support.hpp"
#include "zerojit/remote_cache.hpp"

namespace zerojit::test {
namespace {

RemoteCacheOptions options_for(const std::string& url, std::vector<std::string>* warnings) {
  RemoteCacheOptions options;
  options.url = url;
  options.url_source = "test";
  options.backoff = std::chrono::milliseconds(30000);
  options.warning_sink = [warnings](std::string_view line) {
    if (warnings != nullptr) warnings->emplace_back(line);
  };
  return options;
}

// Every normal client connection of `server` closed by the server.
void drop_every_connection(RedisServer& server) {
  server.command({"CLIENT", "KILL", "TYPE", "normal"});
}

TEST_F(RemoteCacheTest, ADroppedUnixConnectionIsAnErrorNotSigpipe) {
  const fs::path socket = scratch / "sock" / "redis.sock";
  RedisServer local(scratch / "sock", {"--unixsocket", socket.string()});
  ASSERT_TRUE(local.ok()) << local.why();
  std::vector<std::string> warnings;
  RemoteCache remote(options_for("unix://" + socket.string(), &warnings));
  ASSERT_EQ(remote.probe().status, RemoteProbe::Status::ok);
  drop_every_connection(local);
  // A write on the dropped connection: EPIPE, the pool refilled, the command sent again.
  EXPECT_EQ(remote.probe().status, RemoteProbe::Status::ok) << remote.probe().message;
  EXPECT_EQ(remote.counters().errors, 0u);
  EXPECT_TRUE(warnings.empty()) << warnings.front();
}

TEST_F(RemoteCacheTest, ALargeStoreOnADroppedConnectionIsSentAgainNotKilled) {
  std::vector<std::string> warnings;
  RemoteCache remote(options_for(server->url(), &warnings));
  ASSERT_EQ(remote.probe().status, RemoteProbe::Status::ok);
  drop_every_connection(*server);
  const CompiledArtifact large = synthetic_artifact(96, std::size_t{4} << 20);
  EXPECT_TRUE(remote.store(large));
  EXPECT_EQ(remote.counters().published, 1u);
  const auto found = remote.fetch(large.identity);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->cubin, large.cubin);
  EXPECT_TRUE(warnings.empty()) << warnings.front();
}

TEST_F(RemoteCacheTest, APoolOfDroppedConnectionsCostsNoBackoff) {
  std::vector<std::string> warnings;
  RemoteCache remote(options_for(server->url(), &warnings));
  // Eight connections in the pool: eight threads asking at once.
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 20; ++i) ok += remote.probe().status == RemoteProbe::Status::ok;
    });
  }
  for (std::thread& thread : threads) thread.join();
  ASSERT_EQ(ok.load(), 160);
  drop_every_connection(*server);
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(remote.probe().status, RemoteProbe::Status::ok) << "probe " << i;
  }
  const RemoteCacheCounters counters = remote.counters();
  EXPECT_EQ(counters.backoffs, 0u);
  EXPECT_EQ(counters.skipped, 0u);
  EXPECT_EQ(counters.errors, 0u);
  EXPECT_TRUE(warnings.empty()) << warnings.front();
}

}  // namespace
}  // namespace zerojit::test
