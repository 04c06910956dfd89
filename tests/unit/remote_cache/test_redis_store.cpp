// zerojit::RedisStore, the rank groups' store in Redis, against a real redis-server: the store
// semantics RankGroup relies on (values whole and binary, counters atomic across connections,
// add(key, 0) a read that creates nothing), every wait within its bound, and a server that
// cannot be reached an error naming the store and the command, never the password.
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "unit/remote_cache/support.hpp"
#include "zerojit/ranks.hpp"
#include "zerojit/redis_store.hpp"

namespace zerojit::test {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

RemoteCacheOptions store_options(const std::string& url, const std::string& prefix = "group") {
  RemoteCacheOptions options;
  options.url = url;
  options.url_source = "test";
  options.prefix = prefix;
  return options;
}

::testing::AssertionResult mentions(const std::exception& error, std::string_view text) {
  if (std::string_view(error.what()).find(text) != std::string_view::npos) {
    return ::testing::AssertionSuccess() << "\"" << error.what() << "\" mentions " << text;
  }
  return ::testing::AssertionFailure() << "\"" << error.what() << "\" does not mention " << text;
}

using RankRedisStoreTest = RemoteCacheTest;

TEST_F(RankRedisStoreTest, KeepsValuesWholeCountsAtomicallyAndReadsCountersWithoutCreating) {
  RedisStore store(store_options(server->url()));
  const std::string binary("rec\0ord\xff", 8);
  store.set("warmup/1/0", binary);
  EXPECT_EQ(store.get("warmup/1/0"), binary);
  EXPECT_EQ(store.read("warmup/1/0"), binary);
  EXPECT_EQ(server->get("group:store:warmup/1/0"), binary) << "keys live under <prefix>:store:";

  EXPECT_EQ(store.add("warmup/1/arrived", 0), 0);
  EXPECT_FALSE(store.check({"warmup/1/arrived"})) << "add(key, 0) must not create the key";
  EXPECT_EQ(store.add("warmup/1/arrived", 1), 1);
  EXPECT_EQ(store.add("warmup/1/arrived", 5), 6);
  EXPECT_EQ(store.add("warmup/1/arrived", 0), 6);

  EXPECT_TRUE(store.check({"warmup/1/0", "warmup/1/arrived"}));
  EXPECT_FALSE(store.check({"warmup/1/0", "warmup/1/1"}));
  EXPECT_TRUE(store.remove("warmup/1/0"));
  EXPECT_FALSE(store.remove("warmup/1/0"));
  EXPECT_EQ(store.read("warmup/1/0"), std::nullopt);

  store.set("not-a-counter", "abc");
  try {
    store.add("not-a-counter", 0);
    FAIL() << "a value that is not a counter was read as one";
  } catch (const Error& error) {
    EXPECT_TRUE(mentions(error, "'not-a-counter'"));
  }
}

TEST_F(RankRedisStoreTest, CountsEveryAddOfEightRanksOnTheirOwnConnections) {
  constexpr int kRanks = 8, kAdds = 50;
  std::vector<std::thread> ranks;
  std::atomic<int> failures{0};
  for (int rank = 0; rank < kRanks; ++rank) {
    ranks.emplace_back([&] {
      try {
        RedisStore store(store_options(server->url()));
        for (int i = 0; i < kAdds; ++i) store.add("arrived", 1);
      } catch (const Error&) {
        ++failures;
      }
    });
  }
  for (std::thread& rank : ranks) rank.join();
  EXPECT_EQ(failures.load(), 0);
  RedisStore store(store_options(server->url()));
  EXPECT_EQ(store.add("arrived", 0), kRanks * kAdds);
}

TEST_F(RankRedisStoreTest, GetAndWaitSeeAKeySetMeanwhileAndGiveUpAtTheirBoundNamingTheKeys) {
  RedisStore store(store_options(server->url()), milliseconds(150));
  std::thread late([url = server->url()] {
    RedisStore other(store_options(url));
    std::this_thread::sleep_for(milliseconds(40));
    other.set("late", "here");
  });
  EXPECT_EQ(store.get("late"), "here");
  late.join();

  const auto start = Clock::now();
  try {
    store.get("never");
    FAIL() << "get of a key nobody sets returned";
  } catch (const StoreTimeout& error) {
    EXPECT_TRUE(mentions(error, "'never'"));
  }
  try {
    store.wait({"late", "absent-1", "absent-2"}, milliseconds(100));
    FAIL() << "wait for keys nobody sets returned";
  } catch (const StoreTimeout& error) {
    EXPECT_TRUE(mentions(error, "'absent-1', 'absent-2'"));
    EXPECT_FALSE(mentions(error, "'late'"));
  }
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5)) << "the two waits passed their bounds";
  store.wait({"late"}, milliseconds(0));
}

TEST_F(RankRedisStoreTest, AServerThatCannotBeReachedIsAnErrorNamingTheCommandNotThePassword) {
  SilentServer silent;  // accepts connections and never answers
  RemoteCacheOptions options =
      store_options("redis://:s3cret@127.0.0.1:" + std::to_string(silent.port()) + "/0");
  options.connect_timeout = milliseconds(100);
  options.command_timeout = milliseconds(200);
  RedisStore store(options, milliseconds(100));
  const auto start = Clock::now();
  try {
    store.set("warmup/1/3", "record");
    FAIL() << "a set to a server that never answers returned";
  } catch (const StoreTimeout&) {
    FAIL() << "a server that never answers is a failure of the store, not a key not yet set";
  } catch (const Error& error) {
    EXPECT_TRUE(mentions(error, "zerojit.RedisStore"));
    EXPECT_TRUE(mentions(error, "SET of key 'warmup/1/3'"));
    EXPECT_FALSE(mentions(error, "s3cret"));
  }
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(3)) << "the command timeout was not kept";
  EXPECT_THROW(store.add("arrived", 1), Error);
}

TEST_F(RankRedisStoreTest, ReconnectsAfterTheServerDropsItsConnection) {
  RedisStore store(store_options(server->url()));
  store.set("before", "1");
  server->command({"CLIENT", "KILL", "TYPE", "normal"});
  EXPECT_EQ(store.get("before"), "1") << "a read on a dropped connection is sent again";
  EXPECT_EQ(store.add("counter", 1), 1);
}

TEST_F(RankRedisStoreTest, RanksAgreeAcrossRedisAndNameTheOneThatDiffers) {
  RankRecord record;
  record.archs = {"sm_90a"};
  record.entries = {{"gemm", "m=128", "sm_90a", "aaaa"}, {"gemm", "m=256", "sm_90a", "bbbb"}};
  record.seal();
  RankRecord narrowed = record;
  narrowed.entries.pop_back();
  narrowed.seal();
  constexpr int kWorld = 4;
  // Round 1: every rank agrees; round 2: rank 2 warmed one key fewer. One connection per rank,
  // as ranks in separate processes have.
  std::vector<std::string> messages(kWorld);
  std::vector<std::size_t> agreed(kWorld);
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < kWorld; ++rank) {
    ranks.emplace_back([&, rank] {
      RedisStore store(store_options(server->url()));
      agreed[rank] =
          agree_across_ranks(store, rank, kWorld, record, milliseconds(10000), "job", 1).size();
      try {
        agree_across_ranks(store, rank, kWorld, rank == 2 ? narrowed : record, milliseconds(10000),
                           "job", 2);
      } catch (const RankAgreementError& error) {
        messages[rank] = error.what();
      }
    });
  }
  for (std::thread& rank : ranks) rank.join();
  EXPECT_EQ(agreed, std::vector<std::size_t>(kWorld, kWorld));
  for (int rank = 0; rank < kWorld; ++rank) {
    EXPECT_EQ(messages[rank], messages[0]) << "rank " << rank << " saw another verdict";
  }
  EXPECT_NE(messages[0].find("rank 2 differs from rank 0 (ranks 0-1, 3 agree): a narrowed "
                             "warmup space"),
            std::string::npos)
      << messages[0];
  EXPECT_TRUE(server->get("group:store:job/warmup/2/arrived").has_value());
}

}  // namespace
}  // namespace zerojit::test
