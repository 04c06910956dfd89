// `zerojit warmup --ready-file` and `--metrics-file` (docs/TOOL.md, docs/METRICS.md): the ready
// file exists only after a warmup that succeeded, and the metrics file shows the warmup's
// counters in Prometheus text format.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>

#include "tool_runner.hpp"

namespace {

using nlohmann::json;
using zerojit::testing::describe;
using zerojit::testing::Result;
using zerojit::testing::run_tool;
using zerojit::testing::TempDir;

constexpr int kExampleKeys = 5;  // the examples family's manifest

std::string read(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The sum over every sample of `name` (over its kernels, for a per-kernel counter), checking
// that the family is declared with HELP and TYPE; -1 when it has no sample.
double total(const std::string& text, const std::string& name) {
  EXPECT_NE(text.find("# HELP " + name + " "), std::string::npos) << name;
  EXPECT_NE(text.find("# TYPE " + name + " "), std::string::npos) << name;
  const std::regex sample("^" + name + R"((\{[^}]*\})? (\S+)$)");
  double sum = -1;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (std::regex_match(line, m, sample)) sum = (sum < 0 ? 0 : sum) + std::stod(m[2]);
  }
  return sum;
}

class ZerojitToolMetrics : public zerojit::testing::ToolTest {
 protected:
  Result warmup(const std::vector<std::string>& extra,
                const std::map<std::string, std::string>& environment = {}) {
    std::vector<std::string> arguments = {"warmup",        "--examples",     "--compile-only",
                                          "--cache-dir",   cache_.str(),     "--ready-file",
                                          ready_.string(), "--metrics-file", metrics_.string()};
    arguments.insert(arguments.end(), extra.begin(), extra.end());
    std::map<std::string, std::string> env = environment;
    env.emplace("ZEROJIT_CACHE_READONLY_DIRS", "");
    env.emplace("ZEROJIT_MONITOR", "");
    env.emplace("NO_COLOR", "");
    env.emplace("HOME", home_.str());
    return run_tool(arguments, env);
  }
  TempDir cache_;
  TempDir files_;
  std::filesystem::path ready_ = files_.path() / "ready.json";
  std::filesystem::path metrics_ = files_.path() / "zerojit.prom";
};

TEST_F(ZerojitToolMetrics, ASuccessfulWarmupWritesTheReadyFileAndItsCounters) {
  std::ofstream(ready_) << "left by an earlier warmup";
  const Result first = warmup({});
  ASSERT_EQ(first.exit_code, 0) << describe(first);
  const json ready = json::parse(read(ready_));
  EXPECT_TRUE(ready.at("ready").get<bool>());
  EXPECT_EQ(ready.at("keys"), kExampleKeys);
  EXPECT_EQ(ready.at("family"), "examples");
  EXPECT_TRUE(std::regex_match(ready.at("manifest_digest").get<std::string>(),
                               std::regex("fnv1a64:[0-9a-f]{16}")));
  EXPECT_TRUE(std::regex_match(ready.at("time").get<std::string>(),
                               std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)")));

  // A fresh cache: every key compiled and published, nothing read from disk or loaded.
  const std::string cold = read(metrics_);
  EXPECT_EQ(total(cold, "zerojit_kernel_compiles_total"), kExampleKeys) << cold;
  EXPECT_EQ(total(cold, "zerojit_kernel_disk_loads_total"), 0) << cold;
  EXPECT_EQ(total(cold, "zerojit_kernel_module_loads_total"), 0) << cold;
  EXPECT_EQ(total(cold, "zerojit_kernel_runtime_jit_total"), 0) << cold;
  EXPECT_EQ(total(cold, "zerojit_kernel_fallback_launches_total"), 0) << cold;
  EXPECT_EQ(total(cold, "zerojit_kernel_background_compiles_total"), 0) << cold;
  EXPECT_EQ(total(cold, "zerojit_kernel_background_failures_total"), 0) << cold;
  EXPECT_GT(total(cold, "zerojit_kernel_compile_seconds_total"), 0) << cold;
  EXPECT_EQ(total(cold, "zerojit_disk_cache_published_total"), kExampleKeys) << cold;
  EXPECT_EQ(total(cold, "zerojit_disk_cache_hits_total"), 0) << cold;
  EXPECT_EQ(total(cold, "zerojit_monitor_armed"), 0) << "compile only arms nothing: " << cold;

  // The same warmup again: every key from disk.
  const Result second = warmup({"--json"});
  ASSERT_EQ(second.exit_code, 0) << describe(second);
  const std::string warm = read(metrics_);
  EXPECT_EQ(total(warm, "zerojit_kernel_compiles_total"), 0) << warm;
  EXPECT_EQ(total(warm, "zerojit_kernel_disk_loads_total"), kExampleKeys) << warm;
  EXPECT_EQ(total(warm, "zerojit_disk_cache_hits_total"), kExampleKeys) << warm;
  EXPECT_EQ(json::parse(read(ready_)).at("manifest_digest"), ready.at("manifest_digest"));
  // Written whole through a temporary file, which is gone.
  for (const auto& entry : std::filesystem::directory_iterator(files_.path())) {
    EXPECT_EQ(entry.path().filename().string().find(".tmp-"), std::string::npos) << entry.path();
  }
}

// A warmup that fails (no NVRTC, exit 5) removes the ready file of an earlier one and writes
// none; so does one refused for its options (exit 2).
TEST_F(ZerojitToolMetrics, AFailedWarmupLeavesNoReadyFile) {
  std::ofstream(ready_) << "left by an earlier warmup";
  const Result no_nvrtc = warmup({}, {{"ZEROJIT_NVRTC_LIBRARY", "/nonexistent/libnvrtc.so.13"}});
  EXPECT_EQ(no_nvrtc.exit_code, 5) << describe(no_nvrtc);
  EXPECT_FALSE(std::filesystem::exists(ready_));

  std::ofstream(ready_) << "left by an earlier warmup";
  const Result bad_arch = warmup({"--arch", "sm_12"});
  EXPECT_EQ(bad_arch.exit_code, 2) << describe(bad_arch);
  EXPECT_FALSE(std::filesystem::exists(ready_));
}

TEST_F(ZerojitToolMetrics, AFileThatCannotBeWrittenIsAFailureWithoutReadiness) {
  const std::filesystem::path nowhere = files_.path() / "missing-directory" / "zerojit.prom";
  std::vector<std::string> arguments = {"warmup",        "--examples",     "--compile-only",
                                        "--cache-dir",   cache_.str(),     "--ready-file",
                                        ready_.string(), "--metrics-file", nowhere.string()};
  const Result r = run_tool(arguments, {{"HOME", home_.str()}, {"NO_COLOR", ""}});
  EXPECT_EQ(r.exit_code, 5) << describe(r);
  EXPECT_NE(r.err.find("metrics file"), std::string::npos) << describe(r);
  EXPECT_FALSE(std::filesystem::exists(ready_));
}

}  // namespace
