// What the tool finds of its surroundings, and what it says when something is missing or
// misconfigured: `zerojit --version`, explicit NVRTC locations that point nowhere, and a
// missing NVRTC said once, up front, with exit code 5. Spawned as a user runs it.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tool_runner.hpp"

namespace {

using namespace zerojit::testing::tool_test;

std::size_t count(const std::string& text, const std::string& part) {
  std::size_t n = 0;
  for (std::size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) {
    ++n;
  }
  return n;
}

// Like ToolTest::run, with more of the environment set.
class ZerojitToolEnvironment : public zerojit::testing::ToolTest {
 protected:
  Result run_with(const std::vector<std::string>& arguments,
                  std::map<std::string, std::string> environment) {
    environment.emplace("ZEROJIT_CACHE_DIR", (home_.path() / "cache").string());
    environment.emplace("ZEROJIT_CACHE_READONLY_DIRS", "");
    environment.emplace("ZEROJIT_MONITOR", "");
    environment.emplace("NO_COLOR", "");
    environment.emplace("HOME", home_.str());
    return run_tool(arguments, environment);
  }
};

TEST_F(ZerojitToolEnvironment, VersionSaysWhatItFoundWithAndWithoutAToolkit) {
  const Result found = run({"--version"});
  ASSERT_EQ(found.exit_code, 0) << describe(found);
  EXPECT_EQ(found.out.rfind("zerojit " ZEROJIT_EXPECTED_VERSION "\n", 0), 0u) << describe(found);
  // These tests compile with NVRTC, so this machine has one: its version and file.
  EXPECT_NE(found.out.find("\nNVRTC 1"), std::string::npos) << describe(found);
  EXPECT_NE(found.out.find("libnvrtc.so"), std::string::npos) << describe(found);
  EXPECT_NE(found.out.find("\nCUDA driver"), std::string::npos) << describe(found);

  const Result as_json = run({"--version", "--json"});
  ASSERT_EQ(as_json.exit_code, 0) << describe(as_json);
  const json result = result_of(as_json, "version");
  EXPECT_EQ(result.at("version"), ZEROJIT_EXPECTED_VERSION);
  EXPECT_TRUE(result.at("nvrtc").at("found").get<bool>());
  EXPECT_NE(result.at("nvrtc").at("path").get<std::string>().find("libnvrtc.so"),
            std::string::npos);
  const json& driver = result.at("driver");
  EXPECT_TRUE(driver.at("found").get<bool>() ? driver.contains("version")
                                             : !driver.at("reason").get<std::string>().empty())
      << driver.dump();

  // No toolkit (as far as the tool can tell): still exit 0, and why not.
  const Result missing = run_with({"--version"}, {{"ZEROJIT_NVRTC_LIBRARY", "/nonexistent/nvrtc"}});
  ASSERT_EQ(missing.exit_code, 0) << describe(missing);
  EXPECT_NE(missing.out.find("NVRTC: not found: "), std::string::npos) << describe(missing);
  EXPECT_NE(missing.out.find("ZEROJIT_NVRTC_LIBRARY=/nonexistent/nvrtc"), std::string::npos)
      << describe(missing);
  const Result missing_json =
      run_with({"--version", "--json"}, {{"ZEROJIT_NVRTC_LIBRARY", "/nonexistent/nvrtc"}});
  const json nvrtc = result_of(missing_json, "version").at("nvrtc");
  EXPECT_FALSE(nvrtc.at("found").get<bool>());
  EXPECT_NE(nvrtc.at("reason").get<std::string>().find("ZEROJIT_NVRTC_LIBRARY"), std::string::npos);
}

// Before: an explicit location that does not exist was skipped and the search went on (or
// found nothing and every key failed on its own). Now it is an error naming the variable,
// said once before anything is compiled, exit 5.
TEST_F(ZerojitToolEnvironment, NvrtcVariablesThatPointNowhereAreNamedOnceBeforeAnyCompile) {
  for (const auto& [variable, value] : std::vector<std::pair<std::string, std::string>>{
           {"ZEROJIT_NVRTC_LIBRARY", "/nonexistent/libnvrtc.so.13"},
           {"CUDA_HOME", "/nonexistent/cuda"}}) {
    TempDir cache;
    const Result r =
        run_with({"warmup", "--examples", "--compile-only", "--cache-dir", cache.str()},
                 {{variable, value}});
    EXPECT_EQ(r.exit_code, 5) << variable << "\n" << describe(r);
    EXPECT_EQ(count(r.err, variable + "=" + value), 1u) << variable << "\n" << describe(r);
    EXPECT_EQ(count(r.err, "zerojit: error: "), 1u) << describe(r);
    EXPECT_NE(r.err.find("what to do: "), std::string::npos) << describe(r);
    EXPECT_EQ(r.err.find("zerojit warmup: [1/"), std::string::npos) << "compiled: " << describe(r);
    EXPECT_EQ(r.err.find("compile failed"), std::string::npos) << describe(r);

    const Result j =
        run_with({"warmup", "--examples", "--compile-only", "--cache-dir", cache.str(), "--json"},
                 {{variable, value}});
    EXPECT_EQ(j.exit_code, 5) << describe(j);
    const json document = json::parse(j.out);
    EXPECT_EQ(document.at("error").at("code"), 5);
    EXPECT_NE(document.at("error").at("message").get<std::string>().find(variable),
              std::string::npos);
  }
  // What needs no NVRTC still works: the manifest, and the battery through dispatch.
  const std::map<std::string, std::string> no_nvrtc = {{"ZEROJIT_NVRTC_LIBRARY", "/nonexistent"}};
  EXPECT_EQ(run_with({"keys"}, no_nvrtc).exit_code, 0);
  const Result dispatch = run_with({"run", "--dispatch-only", "--steps", "50"}, no_nvrtc);
  EXPECT_EQ(dispatch.exit_code, 0) << describe(dispatch);
}

// With a read-only layer the cache may serve keys without NVRTC, so warmup tries; the keys it
// could not serve are summed up in one error (exit 5), not one failure report per key.
TEST_F(ZerojitToolEnvironment, KeysALayerCannotServeWithoutNvrtcAreSummedUpOnce) {
  TempDir layer;
  std::filesystem::create_directories(layer.path() / "entries");
  TempDir cache;
  const Result r = run_with({"warmup", "--examples", "--compile-only", "--layer", layer.str(),
                             "--cache-dir", cache.str()},
                            {{"ZEROJIT_NVRTC_LIBRARY", "/nonexistent"}});
  EXPECT_EQ(r.exit_code, 5) << describe(r);
  EXPECT_EQ(count(r.err, "zerojit: error: "), 1u) << describe(r);
  EXPECT_NE(r.err.find("5 of 5 keys"), std::string::npos) << describe(r);
  EXPECT_EQ(count(r.err, "the same error as above"), 4u) << describe(r);
  EXPECT_EQ(r.err.find("compile failed"), std::string::npos) << describe(r);
  EXPECT_EQ(r.out.find("ok:"), std::string::npos) << "said ok: " << describe(r);
}

}  // namespace

// The yes/no variables share one rule. Before: ZEROJIT_NVRTC_DISABLE took only "1" and
// ZEROJIT_MONITOR_VERBOSE only "1", so `=true` was silently "no"; a value that is neither yes
// nor no is now named in a warning (once) instead of read as "no" without a word.
TEST_F(ZerojitToolEnvironment, YesNoVariablesTakeTheUsualWordsAndNameAnyOther) {
  for (const std::string yes : {"1", "true", "TRUE", "yes", "On"}) {
    const Result disabled = run_with({"--version"}, {{"ZEROJIT_NVRTC_DISABLE", yes}});
    ASSERT_EQ(disabled.exit_code, 0) << describe(disabled);
    EXPECT_NE(disabled.out.find(
                  "NVRTC: not found: NVRTC is disabled (ZEROJIT_NVRTC_DISABLE=" + yes + ")"),
              std::string::npos)
        << yes << "\n"
        << describe(disabled);
    EXPECT_EQ(disabled.err.find("warning"), std::string::npos) << describe(disabled);
  }
  for (const std::string no : {"", "0", "false", "No", "off"}) {
    const Result enabled = run_with({"--version"}, {{"ZEROJIT_NVRTC_DISABLE", no}});
    ASSERT_EQ(enabled.exit_code, 0) << describe(enabled);
    EXPECT_NE(enabled.out.find("\nNVRTC 1"), std::string::npos) << no << "\n" << describe(enabled);
    EXPECT_EQ(enabled.err.find("warning"), std::string::npos) << describe(enabled);
  }
  const Result unclear = run_with({"--version"}, {{"ZEROJIT_NVRTC_DISABLE", "maybe"}});
  ASSERT_EQ(unclear.exit_code, 0) << describe(unclear);
  EXPECT_NE(unclear.out.find("\nNVRTC 1"), std::string::npos) << describe(unclear);
  EXPECT_EQ(count(unclear.err, "ignoring ZEROJIT_NVRTC_DISABLE=maybe"), 1u) << describe(unclear);

  // A pack-only process: `=true` now hides NVRTC, so a warmup with an empty cache cannot
  // compile and says why, up front (exit 5), instead of compiling.
  const Result warmup = run_with({"warmup"}, {{"ZEROJIT_NVRTC_DISABLE", "true"}});
  EXPECT_EQ(warmup.exit_code, 5) << describe(warmup);
  EXPECT_NE(warmup.err.find("ZEROJIT_NVRTC_DISABLE=true"), std::string::npos) << describe(warmup);
}
