// The zerojit tool, driven as a user drives it: spawned with arguments, judged by its exit
// code and output. CPU only; the compile tests use real NVRTC.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tool_runner.hpp"

namespace {

using namespace zerojit::testing::tool_test;

using ZerojitTool = zerojit::testing::ToolTest;

// The default configuration's manifest: spec section 11's 8 keys with C128 compress as its decode
// and its prefill scan (DESIGN.md).
constexpr int kDefaultKeys = 9;
const std::vector<std::string> kDefaultManifestKernels = {
    "dsv4.indexer_q_fp8",  "dsv4.indexer_q_fp8",  "dsv4.dequant_gather",
    "dsv4.dequant_gather", "dsv4.dequant_gather", "dsv4.c4_store",
    "dsv4.c128_compress",  "dsv4.c128_compress",  "dsv4.c128_store"};

TEST_F(ZerojitTool, KeysJsonIsTheNineKeyDefaultManifest) {
  const Result r = run({"keys", "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  const json document = result_of(r, "keys");
  EXPECT_EQ(document.at("count"), kDefaultKeys);
  ASSERT_EQ(document.at("keys").size(), static_cast<std::size_t>(kDefaultKeys));
  std::vector<std::string> kernels;
  for (const auto& key : document.at("keys")) kernels.push_back(key.at("kernel"));
  EXPECT_EQ(kernels, kDefaultManifestKernels);
  EXPECT_EQ(document.at("keys")[1].at("key").at("coarsen"), 4);
  EXPECT_EQ(document.at("keys")[8].at("key").at("kv_block_stride"), 1728);
  EXPECT_TRUE(document.at("dead_axes").empty());
  EXPECT_EQ(document.at("arch"), "sm_90a");
}

TEST_F(ZerojitTool, KeysTextListsOneLinePerKeyWithoutColourOffATerminal) {
  const Result r = run({"keys"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("dsv4.c128_store"), std::string::npos);
  EXPECT_NE(r.out.find("9 keys in 5 kernels"), std::string::npos);
  EXPECT_EQ(r.out.find('\033'), std::string::npos) << "colour codes on a pipe";
}

TEST_F(ZerojitTool, DcpAddsTwoPackKeys) {
  const Result r = run({"keys", "--json", "--dcp-world-size", "2"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(result_of(r, "keys").at("count"), kDefaultKeys + 2);
}

TEST_F(ZerojitTool, CompileOnlyMakesAPackThatASecondRunReadsFromDisk) {
  TempDir pack;
  const Result first = run({"warmup", "--compile-only", "--cache-dir", pack.str(), "--json"});
  ASSERT_EQ(first.exit_code, 0) << describe(first);
  const json a = result_of(first, "warmup");
  EXPECT_EQ(a.at("totals").at("keys"), kDefaultKeys);
  EXPECT_EQ(a.at("totals").at("compiled").get<int>() + a.at("totals").at("from_disk").get<int>(),
            kDefaultKeys);
  EXPECT_EQ(a.at("totals").at("failed"), 0);
  EXPECT_EQ(a.at("devices").size(), 0u);
  EXPECT_TRUE(a.at("cache_writable").get<bool>());

  // A valid pack: every entry verifies.
  const Result verify = run({"cache", "verify", "--cache-dir", pack.str()});
  EXPECT_EQ(verify.exit_code, 0) << describe(verify);

  const Result second = run({"warmup", "--compile-only", "--cache-dir", pack.str(), "--json"});
  ASSERT_EQ(second.exit_code, 0) << describe(second);
  const json b = result_of(second, "warmup");
  EXPECT_EQ(b.at("totals").at("keys"), kDefaultKeys);
  EXPECT_EQ(b.at("totals").at("from_disk"), kDefaultKeys);
  EXPECT_EQ(b.at("totals").at("compiled"), 0);

  // Mounted read-only as a layer, with the disk cache otherwise off, it still serves all.
  const Result layered =
      run_tool({"warmup", "--compile-only", "--layer", pack.str(), "--json"},
               {{"ZEROJIT_CACHE_DIR", "off"}, {"ZEROJIT_CACHE_READONLY_DIRS", ""}});
  ASSERT_EQ(layered.exit_code, 0) << describe(layered);
  EXPECT_EQ(result_of(layered, "warmup").at("totals").at("from_disk"), kDefaultKeys);
}

// On a terminal warmup draws a bar with the keys done, the rate, the time elapsed and an
// estimate of the time left; on a pipe it prints one line per key instead.
TEST_F(ZerojitTool, WarmupProgressShowsRateElapsedAndTimeLeftOnATerminal) {
  TempDir cache;
  const Result bar =
      run_tool({"warmup", "--examples", "--compile-only", "--cache-dir", cache.str()},
               {{"NO_COLOR", ""}, {"ZEROJIT_CACHE_READONLY_DIRS", ""}},
               /*stderr_on_terminal=*/true);
  ASSERT_EQ(bar.exit_code, 0) << describe(bar);
  EXPECT_NE(bar.err.find("warmup [>"), std::string::npos) << describe(bar);  // drawn at once
  EXPECT_NE(bar.err.find("0/5"), std::string::npos) << describe(bar);
  EXPECT_NE(bar.err.find("5/5"), std::string::npos) << describe(bar);
  EXPECT_NE(bar.err.find(" keys/s"), std::string::npos) << describe(bar);
  EXPECT_NE(bar.err.find(" elapsed, about "), std::string::npos) << describe(bar);
  EXPECT_NE(bar.err.find(" left"), std::string::npos) << describe(bar);
  EXPECT_EQ(bar.err.find("zerojit warmup: [1/5]"), std::string::npos) << "lines on a terminal";

  TempDir other;
  const Result lines = run({"warmup", "--examples", "--compile-only", "--cache-dir", other.str()});
  ASSERT_EQ(lines.exit_code, 0) << describe(lines);
  EXPECT_NE(lines.err.find("zerojit warmup: [1/5]"), std::string::npos) << describe(lines);
  EXPECT_NE(lines.err.find("zerojit warmup: [5/5]"), std::string::npos) << describe(lines);
  EXPECT_EQ(lines.err.find('\r'), std::string::npos) << "a bar drawn on a pipe";
}

TEST_F(ZerojitTool, DispatchOnlyBatteryMeetsOnlyManifestKeys) {
  const Result r = run({"run", "--dispatch-only", "--steps", "10000", "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  const json document = result_of(r, "run");
  EXPECT_EQ(document.at("mode"), "dispatch-only");
  EXPECT_EQ(document.at("battery").at("steps"), 10000);
  EXPECT_EQ(document.at("battery").at("largest_step_tokens"), 8192);
  EXPECT_TRUE(document.at("runtime_jit").empty()) << document.at("runtime_jit").dump();
  // The battery reaches every key warmup compiles: none is wasted.
  EXPECT_EQ(document.at("keys_met"), kDefaultKeys);
  EXPECT_TRUE(document.at("manifest_keys_not_met").empty());
}

// Other serving configurations: the battery stays inside their manifests too.
TEST_F(ZerojitTool, DispatchOnlyBatteryStaysInsideOtherManifests) {
  const std::vector<std::vector<std::string>> configurations = {
      {"--model", "dsv4-pro"},          {"--dcp-world-size", "2", "--cp-interleave", "4"},
      {"--block-size", "64"},           {"--kv-cache-dtype", "bf16"},
      {"--kv-cache-dtype", "fp8_e4m3"}, {"--indexer-dtype", "mxfp4", "--arch", "sm_100a"},
      {"--c128-page-stride", "39168"},  {"--max-num-batched-tokens", "256"},
  };
  for (const auto& options : configurations) {
    std::vector<std::string> arguments = {"run", "--dispatch-only", "--steps", "1500", "--json"};
    arguments.insert(arguments.end(), options.begin(), options.end());
    const Result r = run(arguments);
    ASSERT_EQ(r.exit_code, 0) << options[0] << " " << options[1] << "\n" << describe(r);
    const json document = result_of(r, "run");
    EXPECT_TRUE(document.at("runtime_jit").empty()) << options[0] << " " << options[1];
  }
}

TEST_F(ZerojitTool, NarrowedWarmupFailsErrorModeNamingKernelAndKey) {
  const Result r = run({"run", "--dispatch-only", "--monitor", "error", "--steps", "2000",
                        "--testing-warmup-max-tokens", "256"});
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  EXPECT_NE(r.err.find("dsv4.indexer_q_fp8"), std::string::npos) << describe(r);
  EXPECT_NE(r.err.find("coarsen=4"), std::string::npos) << describe(r);
  EXPECT_NE(r.err.find("runtime descriptors"), std::string::npos) << describe(r);

  const Result as_json = run({"run", "--dispatch-only", "--steps", "2000",
                              "--testing-warmup-max-tokens", "256", "--json"});
  EXPECT_EQ(as_json.exit_code, 1) << describe(as_json);
  const json document = json::parse(as_json.out);
  EXPECT_FALSE(document.at("ok").get<bool>());
  EXPECT_EQ(document.at("error").at("code"), 1);
  EXPECT_EQ(document.at("error").at("runtime_jit").at("kernel"), "dsv4.indexer_q_fp8");
  EXPECT_NE(document.at("error").at("runtime_jit").at("key").get<std::string>().find("coarsen=4"),
            std::string::npos);
}

TEST_F(ZerojitTool, NarrowedWarmupOnlyWarnsInWarnMode) {
  const Result r = run({"run", "--dispatch-only", "--monitor", "warn", "--steps", "2000",
                        "--testing-warmup-max-tokens", "256"});
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.err.find("coarsen=4"), std::string::npos) << describe(r);
}

TEST_F(ZerojitTool, BadOptionsExitWithUsageCode) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"keys", "--block-size", "abc"}, "block_size"},
      {{"keys", "--kv-cache-dtype", "fp9"}, "kv_cache_dtype"},
      {{"keys", "--indexer-dtype", "mxfp4"}, "sm_100"},
      {{"keys", "--arch", "sm_9"}, "target_arch"},
      {{"keys", "--model", "dsv5-ultra"}, "dsv5-ultra"},
      {{"run", "--monitor", "sometimes"}, "--monitor"},
      {{"run", "--dispatch-only", "--max-model-len", "99999999"}, "max_model_len"},
      {{"warmup", "--devices", "0,x"}, "--devices"},
      {{"warmup", "--no-such-option"}, "--no-such-option"},
      {{}, "subcommand"},
  };
  for (const auto& [arguments, expected] : cases) {
    const Result r = run(arguments);
    EXPECT_EQ(r.exit_code, 2) << describe(r);
    EXPECT_NE(r.err.find(expected), std::string::npos) << "expected '" << expected << "'\n"
                                                       << describe(r);
  }
}

TEST_F(ZerojitTool, MalformedConfigJsonExitsWithUsageCode) {
  const std::string data = ZEROJIT_TEST_DATA_DIR;
  const Result bad_json = run({"keys", "--model", data + "/malformed_bad_json.json"});
  EXPECT_EQ(bad_json.exit_code, 2) << describe(bad_json);
  EXPECT_NE(bad_json.err.find("malformed_bad_json.json"), std::string::npos) << describe(bad_json);
  EXPECT_NE(bad_json.err.find("invalid JSON"), std::string::npos) << describe(bad_json);
  EXPECT_NE(bad_json.err.find("what to do"), std::string::npos) << describe(bad_json);

  const Result bad_ratio = run({"run", "--model", data + "/malformed_bad_ratio.json"});
  EXPECT_EQ(bad_ratio.exit_code, 2) << describe(bad_ratio);
  EXPECT_NE(bad_ratio.err.find("compress_ratios"), std::string::npos) << describe(bad_ratio);

  TempDir empty;  // a directory without a config.json
  const Result no_file = run({"warmup", "--compile-only", "--model", empty.str()});
  EXPECT_EQ(no_file.exit_code, 2) << describe(no_file);
}

TEST_F(ZerojitTool, HelpEverywhere) {
  for (const std::vector<std::string>& arguments : {std::vector<std::string>{"--help"},
                                                    {"warmup", "--help"},
                                                    {"keys", "--help"},
                                                    {"run", "--help"},
                                                    {"cache", "--help"}}) {
    const Result r = run(arguments);
    EXPECT_EQ(r.exit_code, 0) << describe(r);
    EXPECT_NE(r.out.find("Usage"), std::string::npos) << describe(r);
  }
  // The testing option stays out of the help.
  EXPECT_EQ(run({"run", "--help"}).out.find("testing"), std::string::npos);
}

}  // namespace
