// Tensor-parallel ranks as processes sharing one GPU and one cold disk cache (label gpu): eight
// `zerojit run` processes started at once warm the default manifest through the cache's
// cross-process single flight, so each key is compiled once in total and the others load it
// from disk; then each serves the battery with the monitor in error mode and no runtime JIT.
// Skips, saying why, without a device.
#include <gtest/gtest.h>

#include <future>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "tool_runner.hpp"
#include "zerojit/cuda.hpp"

namespace {

using nlohmann::json;
using zerojit::testing::describe;
using zerojit::testing::Result;

constexpr int kRanks = 8;

TEST(ZerojitToolRanks, EightRanksOnOneColdCacheCompileEachKeyOnceAndServeWithoutJit) {
  if (zerojit::cuda::device_count() == 0) {
    GTEST_SKIP() << "no CUDA device: "
                 << (zerojit::cuda::driver_available()
                         ? std::string("the driver reports none")
                         : zerojit::cuda::driver_unavailable_reason());
  }
  zerojit::testing::TempDir home;
  const std::map<std::string, std::string> environment = {
      {"ZEROJIT_CACHE_DIR", (home.path() / "cache").string()},
      {"ZEROJIT_CACHE_READONLY_DIRS", ""},
      {"ZEROJIT_MONITOR", ""},
      {"NO_COLOR", ""},
      {"HOME", home.str()}};
  std::vector<std::future<Result>> ranks;
  for (int rank = 0; rank < kRanks; ++rank) {
    ranks.push_back(std::async(std::launch::async, [&environment] {
      return zerojit::testing::run_tool(
          {"run", "--steps", "300", "--monitor", "error", "--devices", "0", "--json"}, environment);
    }));
  }

  std::map<std::string, int> compiles;  // "kernel [key]" -> processes that compiled it
  std::set<std::string> manifest;
  for (int rank = 0; rank < kRanks; ++rank) {
    const Result r = ranks[static_cast<std::size_t>(rank)].get();
    ASSERT_EQ(r.exit_code, 0) << "rank " << rank << ": " << describe(r);
    const json document = zerojit::testing::result_of(r, "run");
    EXPECT_EQ(document.at("runtime_jit_total"), 0) << "rank " << rank;
    const json& warmup = document.at("warmup");
    EXPECT_EQ(warmup.at("totals").at("failed"), 0) << "rank " << rank;
    EXPECT_TRUE(warmup.at("monitor_armed").get<bool>()) << "rank " << rank;
    std::set<std::string> keys;
    for (const auto& key : warmup.at("keys")) {
      const std::string name =
          key.at("kernel").get<std::string>() + " [" + key.at("key").get<std::string>() + "]";
      keys.insert(name);
      EXPECT_NE(key.at("origin"), "failed") << "rank " << rank << ": " << key.dump();
      if (key.at("origin") == "compiled") ++compiles[name];
    }
    if (rank == 0) manifest = keys;
    EXPECT_EQ(keys, manifest) << "every rank warms the same manifest";
    for (const auto& device : document.at("devices")) {
      for (const auto& kernel : device.at("kernels")) {
        EXPECT_EQ(kernel.at("compiles"), 0) << "rank " << rank << ": " << kernel.dump();
        EXPECT_EQ(kernel.at("runtime_jit"), 0) << "rank " << rank << ": " << kernel.dump();
      }
    }
    std::printf("rank %d: %lld compiled, %lld from disk, %.2f s warmup\n", rank,
                warmup.at("totals").at("compiled").get<long long>(),
                warmup.at("totals").at("from_disk").get<long long>(),
                warmup.at("wall_seconds").get<double>());
  }
  ASSERT_FALSE(manifest.empty());
  for (const std::string& key : manifest) {
    EXPECT_EQ(compiles[key], 1) << key << " was compiled by " << compiles[key] << " of the "
                                << kRanks << " ranks";
  }
}

}  // namespace
