// `zerojit run` on real GPUs (label gpu): warmup, the monitor armed in error mode, the serving
// battery launched through AttentionKernels. Skips, saying why, without a device.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tool_runner.hpp"
#include "zerojit/cuda.hpp"

namespace {

using nlohmann::json;
using zerojit::testing::describe;
using zerojit::testing::Result;

class ZerojitToolGpu : public zerojit::testing::ToolTest {
 protected:
  void SetUp() override {
    if (zerojit::cuda::device_count() == 0) {
      GTEST_SKIP() << "no CUDA device: "
                   << (zerojit::cuda::driver_available()
                           ? std::string("the driver reports none")
                           : zerojit::cuda::driver_unavailable_reason());
    }
  }

  // Runs the battery on `devices` and checks that it launched every kernel with no runtime JIT.
  void expect_clean_run(const std::vector<std::string>& options, std::size_t devices) {
    std::vector<std::string> arguments = {"run", "--steps", "300", "--monitor", "error", "--json"};
    arguments.insert(arguments.end(), options.begin(), options.end());
    const Result r = run(arguments);
    ASSERT_EQ(r.exit_code, 0) << describe(r);
    const json document = zerojit::testing::result_of(r, "run");
    EXPECT_EQ(document.at("mode"), "gpu");
    EXPECT_EQ(document.at("runtime_jit_total"), 0);
    ASSERT_EQ(document.at("devices").size(), devices);
    for (const auto& device : document.at("devices")) {
      ASSERT_FALSE(device.at("kernels").empty()) << device.dump();
      for (const auto& kernel : device.at("kernels")) {
        EXPECT_GT(kernel.at("launches").get<long long>(), 0) << kernel.dump();
        EXPECT_EQ(kernel.at("launches"), kernel.at("hits")) << kernel.dump();
        EXPECT_EQ(kernel.at("misses"), 0) << kernel.dump();
        EXPECT_EQ(kernel.at("compiles"), 0) << kernel.dump();
        EXPECT_EQ(kernel.at("runtime_jit"), 0) << kernel.dump();
      }
    }
  }
};

TEST_F(ZerojitToolGpu, FlashDefaultCompilesNothingAfterWarmup) { expect_clean_run({}, 1); }

TEST_F(ZerojitToolGpu, ProDefaultCompilesNothingAfterWarmup) {
  expect_clean_run({"--model", "dsv4-pro"}, 1);
}

TEST_F(ZerojitToolGpu, OtherCachesAndDcpCompileNothingAfterWarmup) {
  expect_clean_run({"--kv-cache-dtype", "bf16", "--dcp-world-size", "2", "--devices", "0"}, 1);
  expect_clean_run({"--kv-cache-dtype", "fp8_e4m3", "--block-size", "64", "--devices", "0"}, 1);
}

TEST_F(ZerojitToolGpu, NarrowedWarmupFailsOnTheFirstCoarsenedLaunch) {
  const Result r = run({"run", "--steps", "300", "--monitor", "error", "--devices", "0",
                        "--testing-warmup-max-tokens", "256"});
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  EXPECT_NE(r.err.find("dsv4.indexer_q_fp8"), std::string::npos) << describe(r);
  EXPECT_NE(r.err.find("coarsen=4"), std::string::npos) << describe(r);
}

TEST_F(ZerojitToolGpu, TwoDevicesEachShowTheirCounters) {
  if (zerojit::cuda::device_count() < 2) GTEST_SKIP() << "needs two GPUs";
  expect_clean_run({"--devices", "0,1"}, 2);
}

}  // namespace
