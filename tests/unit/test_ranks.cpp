// Ranks that agree in C++ (zerojit/ranks.hpp): eight threads play the ranks of a group over an
// in-memory store, as Python's tests do with processes over a FileStore. Every rank must see
// the same verdict: the same records when they agree, the same message when they do not, and
// no wait past the timeout.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "zerojit/ranks.hpp"
#include "zerojit/registry.hpp"

namespace zerojit::test {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

constexpr int kWorld = 8;

class MemoryStore : public RankStore {
 public:
  void set(std::string_view key, std::string_view value) override {
    std::lock_guard lock(mutex_);
    values_[std::string(key)] = std::string(value);
  }
  std::optional<std::string> read(std::string_view key) override {
    std::lock_guard lock(mutex_);
    const auto found = values_.find(std::string(key));
    if (found == values_.end()) return std::nullopt;
    return found->second;
  }
  std::int64_t add(std::string_view key, std::int64_t amount) override {
    std::lock_guard lock(mutex_);
    if (amount == 0) return counters_.contains(std::string(key)) ? counters_[std::string(key)] : 0;
    return counters_[std::string(key)] += amount;
  }

 private:
  std::mutex mutex_;
  std::map<std::string, std::string> values_;
  std::map<std::string, std::int64_t> counters_;
};

// The record of a healthy rank: two kernels, three keys, on sm_90a.
RankRecord healthy_record() {
  RankRecord record;
  record.archs = {"sm_90a"};
  record.compilers = {{"cuda@sm_90a", "13.0"}};
  record.config = R"({"model": {"heads": 128, "dtype": "bf16"}, "tp": 8})";
  record.entries = {{"gemm", "m=128", "sm_90a", "aaaa"},
                    {"gemm", "m=256", "sm_90a", "bbbb"},
                    {"attention", "heads=16", "sm_90a", "cccc"}};
  record.seal();
  return record;
}

// What one rank's call ended with: every record, or the error's message, ranks and missing.
struct Outcome {
  std::map<int, RankRecord> records;
  std::string message;
  std::vector<int> ranks;
  std::vector<int> missing;
  double seconds = 0.0;
};

// Runs the ranks of `world` in threads (rank r with record_of(r); a rank whose record_of is
// std::nullopt never publishes) and returns each publishing rank's outcome.
std::map<int, Outcome> run_group(const std::function<std::optional<RankRecord>(int)>& record_of,
                                 milliseconds timeout = std::chrono::seconds(30)) {
  MemoryStore store;
  std::map<int, Outcome> outcomes;
  for (int rank = 0; rank < kWorld; ++rank) {
    if (record_of(rank)) outcomes[rank];
  }
  std::vector<std::thread> threads;
  for (auto& [rank, outcome] : outcomes) {
    threads.emplace_back([&, rank = rank, outcome = &outcome] {
      const Clock::time_point start = Clock::now();
      try {
        outcome->records =
            agree_across_ranks(store, rank, kWorld, *record_of(rank), timeout, "job", 1);
      } catch (const RankAgreementError& error) {
        outcome->message = error.what();
        outcome->ranks = error.ranks();
        outcome->missing = error.missing();
      }
      outcome->seconds = std::chrono::duration<double>(Clock::now() - start).count();
    });
  }
  for (std::thread& thread : threads) thread.join();
  return outcomes;
}

// Every rank failed with the same message; returns it.
std::string common_failure(const std::map<int, Outcome>& outcomes) {
  const std::string& first = outcomes.begin()->second.message;
  EXPECT_FALSE(first.empty()) << "rank " << outcomes.begin()->first << " agreed";
  for (const auto& [rank, outcome] : outcomes) {
    EXPECT_EQ(outcome.message, first) << "rank " << rank << " saw another verdict";
    EXPECT_TRUE(outcome.records.empty()) << "rank " << rank << " agreed";
  }
  return first;
}

std::optional<RankRecord> with_rank_5(int rank, const std::function<void(RankRecord&)>& change) {
  RankRecord record = healthy_record();
  if (rank == 5) {
    change(record);
    record.seal();
  }
  return record;
}

TEST(RankAgreementTest, EqualRecordsAgreeAndEveryRankGetsEveryRecord) {
  const auto outcomes = run_group([](int) { return healthy_record(); });
  ASSERT_EQ(outcomes.size(), 8U);
  for (const auto& [rank, outcome] : outcomes) {
    EXPECT_EQ(outcome.message, "") << "rank " << rank;
    ASSERT_EQ(outcome.records.size(), 8U) << "rank " << rank;
    for (const auto& [other, record] : outcome.records) {
      EXPECT_EQ(record.rank, other);
      EXPECT_EQ(record.digest, healthy_record().digest);
      EXPECT_EQ(record.entries, healthy_record().entries);
    }
  }
}

TEST(RankAgreementTest, RecordsRoundTripThroughPythonsJsonShape) {
  RankRecord record = healthy_record();
  record.rank = 3;
  const std::string text = record.to_json();
  for (const char* field : {"\"format\":1", "\"rank\":3", "\"aborted\":null", "\"archs\":",
                            "\"compilers\":", "\"config\":{", "\"entries\":[[", "\"digest\":"}) {
    EXPECT_NE(text.find(field), std::string::npos) << field << " not in " << text;
  }
  const RankRecord back = RankRecord::from_json(text);
  EXPECT_EQ(back.rank, 3);
  EXPECT_EQ(back.entries, record.entries);
  EXPECT_EQ(back.compilers, record.compilers);
  EXPECT_EQ(back.digest, record.digest);
  RankRecord resealed = back;
  resealed.seal();
  EXPECT_EQ(resealed.digest, record.digest) << "the digest must survive the store";
  EXPECT_THROW(RankRecord::from_json("{\"rank\": 1}"), Error);
}

TEST(RankAgreementTest, AnotherArchFailsEveryRankNamingRank5) {
  const auto outcomes = run_group([](int rank) {
    return with_rank_5(rank, [](RankRecord& record) {
      record.archs = {"sm_100a"};
      for (RankEntry& entry : record.entries) entry.arch = "sm_100a";
    });
  });
  const std::string message = common_failure(outcomes);
  EXPECT_NE(message.find("8 ranks, store prefix 'job'; rank 5 at fault"), std::string::npos)
      << message;
  EXPECT_NE(message.find("rank 5 differs from rank 0 (ranks 0-4, 6-7 agree): another arch: "
                         "sm_100a on rank 5, sm_90a on rank 0"),
            std::string::npos)
      << message;
  EXPECT_EQ(message.find("narrowed"), std::string::npos) << "the arch explains the keys";
  EXPECT_EQ(outcomes.at(0).ranks, std::vector<int>{5});
}

TEST(RankAgreementTest, ANarrowedSpaceNamesTheKernelAndTheKeys) {
  const auto outcomes = run_group([](int rank) {
    return with_rank_5(rank, [](RankRecord& record) { record.entries.pop_back(); });
  });
  const std::string message = common_failure(outcomes);
  EXPECT_NE(message.find("a narrowed warmup space: rank 5 lacks 1 keys of gemm that rank 0 "
                         "warms"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("gemm [m=256] on sm_90a: only on rank 0"), std::string::npos) << message;
}

TEST(RankAgreementTest, AConfigurationFieldDifferenceNamesTheField) {
  const auto outcomes = run_group([](int rank) {
    return with_rank_5(rank, [](RankRecord& record) {
      record.config = R"({"model": {"heads": 64, "dtype": "bf16"}, "tp": 8})";
    });
  });
  const std::string message = common_failure(outcomes);
  EXPECT_NE(message.find("another configuration: model.heads = 64 on rank 5, 128 on rank 0"),
            std::string::npos)
      << message;
}

TEST(RankAgreementTest, ARankThatNeverPublishesIsNamedAfterTheTimeout) {
  const auto outcomes = run_group(
      [](int rank) {
        return rank == 6 ? std::nullopt : std::optional<RankRecord>(healthy_record());
      },
      milliseconds(200));
  ASSERT_EQ(outcomes.size(), 7U);
  const std::string message = common_failure(outcomes);
  EXPECT_NE(message.find("rank 6 never published its warmup within 0.2 s"), std::string::npos)
      << message;
  for (const auto& [rank, outcome] : outcomes) {
    EXPECT_EQ(outcome.missing, std::vector<int>{6}) << "rank " << rank;
    EXPECT_LT(outcome.seconds, 5.0) << "rank " << rank << " waited past its bound";
    EXPECT_GE(outcome.seconds, 0.15) << "rank " << rank << " did not wait for rank 6";
  }
}

TEST(RankAgreementTest, ALateRankSeesTheVerdictOfTheOthers) {
  MemoryStore store;
  const RankRecord record = healthy_record();
  EXPECT_THROW(agree_across_ranks(store, 0, 2, record, milliseconds(50), "late"),
               RankAgreementError);
  try {
    agree_across_ranks(store, 1, 2, record, milliseconds(50), "late");
    FAIL() << "rank 1 agreed with a round that failed";
  } catch (const RankAgreementError& error) {
    EXPECT_NE(std::string(error.what()).find("rank 1 published after another rank's timeout"),
              std::string::npos)
        << error.what();
    EXPECT_EQ(error.missing(), std::vector<int>{1});
  }
}

TEST(RankAgreementTest, AnAbortedRankIsNamedAtOnce) {
  const auto outcomes = run_group([](int rank) {
    return with_rank_5(rank, [](RankRecord& record) {
      record = RankRecord{};
      record.aborted = "CompileError: gemm [m=128] failed\nthe log";
    });
  });
  const std::string message = common_failure(outcomes);
  EXPECT_NE(message.find("rank 5: its warmup raised: CompileError: gemm [m=128] failed"),
            std::string::npos)
      << message;
  EXPECT_EQ(message.find("the log"), std::string::npos) << "only the first line";
  for (const auto& [rank, outcome] : outcomes) {
    EXPECT_LT(outcome.seconds, 5.0) << "rank " << rank << " waited for the timeout";
  }
}

TEST(RankAgreementTest, ComparesFailedKeysAndOtherProgramsLikePython) {
  std::map<int, RankRecord> records;
  for (int rank = 0; rank < 3; ++rank) {
    records[rank] = healthy_record();
    records[rank].rank = rank;
  }
  // seal() sorted the entries: attention [heads=16], gemm [m=128], gemm [m=256].
  records[1].entries[0].identity = "failed: error: identifier \"x\" is undefined\nmore";
  records[1].seal();
  records[2].entries[1].identity = "dddd";
  records[2].seal();
  const auto found = compare_ranks(records, 3, {}, 300.0, "");
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->ranks, (std::vector<int>{1, 2}));
  EXPECT_NE(found->message.find("(3 ranks; ranks 1-2 at fault)"), std::string::npos)
      << found->message;
  EXPECT_NE(found->message.find("rank 1 failed to compile 1 keys (failed: error: identifier "
                                "\"x\" is undefined)"),
            std::string::npos)
      << found->message;
  EXPECT_NE(found->message.find("rank 2 differs from rank 0: other programs for the same keys"),
            std::string::npos)
      << found->message;
  EXPECT_NE(found->message.find("gemm [m=128] on sm_90a: identity dddd on rank 2, aaaa on rank 0"),
            std::string::npos)
      << found->message;
  EXPECT_EQ(compare_ranks({{0, records[0]}}, 1, {}, 1.0, ""), std::nullopt);
}

TEST(RankAgreementTest, AWarmupRecordNamesFailedKeysAndEachCompiler) {
  WarmupReport report;
  report.archs = {"sm_90a", "sm_100a"};
  KeyReport failed{.kernel = "gemm", .key = "m=128", .arch = "sm_90a"};
  failed.error = "\n  error: no such header\nthe rest of the log";
  report.keys = {failed, KeyReport{.kernel = "gemm", .key = "m=256", .arch = "sm_90a"}};
  const RankRecord record = warmup_rank_record(report, Manifest{}, R"({"tp": 8})");
  ASSERT_EQ(record.entries.size(), 2U);
  EXPECT_EQ(record.entries[0].identity, "failed: error: no such header");
  EXPECT_EQ(record.entries[1].identity, "") << "a key outside the manifest has no program";
  EXPECT_EQ(record.archs, (std::vector<std::string>{"sm_100a", "sm_90a"}));
  EXPECT_TRUE(record.compilers.contains("cuda@sm_90a"));
  EXPECT_TRUE(record.compilers.contains("cuda@sm_100a"));
  EXPECT_FALSE(record.digest.empty());
}

TEST(RankAgreementTest, RefusesARankOutsideTheGroupNamingIt) {
  MemoryStore store;
  for (const auto& [rank, world] : std::vector<std::pair<int, int>>{{8, 8}, {-1, 8}, {0, 0}}) {
    try {
      agree_across_ranks(store, rank, world, healthy_record(), milliseconds(10));
      FAIL() << "rank " << rank << " of " << world << " was accepted";
    } catch (const Error& error) {
      EXPECT_NE(std::string(error.what())
                    .find("rank " + std::to_string(rank) + " is not in a group of " +
                          std::to_string(world)),
                std::string::npos)
          << error.what();
    }
  }
}

}  // namespace
}  // namespace zerojit::test
