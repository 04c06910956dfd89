// The tool and the compile cache: refused roots (exit 2 for every command, --allow-shared to
// accept them), one size grammar for options and environment, `cache ls` columns that stay
// aligned, and the JSON envelope of the cache commands. Spawned as a user runs it.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tool_runner.hpp"

namespace {

namespace fs = std::filesystem;
using namespace zerojit::testing::tool_test;

using ZerojitToolCache = zerojit::testing::ToolTest;

std::map<std::string, std::string> environment_for(const TempDir& home,
                                                   const std::string& cache_dir) {
  return {{"ZEROJIT_CACHE_DIR", cache_dir},
          {"ZEROJIT_CACHE_READONLY_DIRS", ""},
          {"ZEROJIT_CACHE_ALLOW_SHARED", ""},
          {"ZEROJIT_CACHE_MAX_BYTES", ""},
          {"ZEROJIT_MONITOR", ""},
          {"NO_COLOR", ""},
          {"HOME", home.str()}};
}

// docs/CACHE.md: a root (or layer) others can write is refused and the tool exits 2. Before,
// warmup and run said ok and ran from memory (exit 0), also with the root from
// ZEROJIT_CACHE_DIR.
TEST_F(ZerojitToolCache, ARefusedRootExitsTwoForEveryCommandBeforeAnyWork) {
  const fs::path shared = home_.path() / "shared";
  fs::create_directories(shared);
  fs::permissions(shared, fs::perms::all);  // 0777, no sticky bit
  const std::string root = shared.string();
  const auto env = environment_for(home_, root);
  const std::vector<std::vector<std::string>> commands = {
      {"warmup", "--examples", "--compile-only", "--cache-dir", root},
      {"warmup", "--examples", "--compile-only"},  // the root from ZEROJIT_CACHE_DIR
      {"run", "--dispatch-only", "--steps", "10", "--cache-dir", root},
      {"run", "--dispatch-only", "--steps", "10"},
      {"cache", "ls", "--cache-dir", root},
      {"cache", "ls"},
  };
  for (const auto& command : commands) {
    const Result r = run_tool(command, env);
    EXPECT_EQ(r.exit_code, 2) << command[0] << "\n" << describe(r);
    EXPECT_NE(r.err.find("refusing cache root " + root), std::string::npos) << describe(r);
    EXPECT_NE(r.err.find("--allow-shared"), std::string::npos) << describe(r);
    EXPECT_NE(r.err.find("what to do: "), std::string::npos) << describe(r);
    EXPECT_EQ(r.err.find("zerojit warmup: [1/"), std::string::npos) << "compiled: " << describe(r);
    EXPECT_EQ(r.out.find("ok:"), std::string::npos) << "said ok: " << describe(r);
  }
  EXPECT_FALSE(fs::exists(shared / "entries")) << "the refused root was written";
  std::vector<std::string> as_json = commands[0];
  as_json.push_back("--json");
  const json document = json::parse(run_tool(as_json, env).out);
  EXPECT_EQ(document.at("error").at("code"), 2);

  // The override: --allow-shared, or ZEROJIT_CACHE_ALLOW_SHARED=1.
  std::vector<std::string> allowed = commands[0];
  allowed.push_back("--allow-shared");
  const Result warm = run_tool(allowed, env);
  EXPECT_EQ(warm.exit_code, 0) << describe(warm);
  EXPECT_TRUE(fs::exists(shared / "entries"));
  const Result run_allowed = run_tool(
      {"run", "--dispatch-only", "--steps", "10", "--cache-dir", root, "--allow-shared"}, env);
  EXPECT_EQ(run_allowed.exit_code, 0) << describe(run_allowed);
  auto env_allowed = env;
  env_allowed["ZEROJIT_CACHE_ALLOW_SHARED"] = "1";
  const Result listed = run_tool({"cache", "ls", "--json"}, env_allowed);
  ASSERT_EQ(listed.exit_code, 0) << describe(listed);
  EXPECT_EQ(result_of(listed, "cache ls").at("count"), 5);

  // A layer others can write is refused the same way.
  const Result layer = run_tool({"warmup", "--examples", "--compile-only", "--layer", root,
                                 "--cache-dir", (home_.path() / "private").string()},
                                env);
  EXPECT_EQ(layer.exit_code, 2) << describe(layer);
  EXPECT_NE(layer.err.find("refusing read-only layer " + root), std::string::npos)
      << describe(layer);
}

// One size grammar: 512m is half a GiB in --max-size and in ZEROJIT_CACHE_MAX_BYTES alike, and a
// size past 2^64 bytes is refused instead of wrapping to a tiny quota that deletes everything.
TEST_F(ZerojitToolCache, SizesReadTheSameInOptionsAndEnvironmentAndNeverWrap) {
  TempDir cache;
  const auto env = environment_for(home_, cache.str());
  ASSERT_EQ(run_tool({"warmup", "--examples", "--compile-only"}, env).exit_code, 0);

  const Result option = run_tool({"cache", "gc", "--max-size", "512m", "--json"}, env);
  ASSERT_EQ(option.exit_code, 0) << describe(option);
  auto env_quota = env;
  env_quota["ZEROJIT_CACHE_MAX_BYTES"] = "512m";
  const Result variable = run_tool({"cache", "gc", "--json"}, env_quota);
  ASSERT_EQ(variable.exit_code, 0) << describe(variable);
  EXPECT_EQ(result_of(option, "cache gc").at("quota_bytes"), 512ull << 20);
  EXPECT_EQ(result_of(variable, "cache gc").at("quota_bytes"), 512ull << 20);

  for (const std::string size : {"17179869184G", "17592186044417M", "18446744073709551616", "-1"}) {
    const Result r = run_tool({"cache", "gc", "--max-size", size}, env);
    EXPECT_EQ(r.exit_code, 2) << size << "\n" << describe(r);
    EXPECT_NE(r.err.find("--max-size"), std::string::npos) << describe(r);
  }
  const Result listed = run_tool({"cache", "ls", "--json"}, env);
  EXPECT_EQ(result_of(listed, "cache ls").at("count"), 5) << "a refused size removed entries";
}

// Long kernel names, keys and paths widen their column; every row stays in line with the
// header (before, fixed widths let a long key push the later columns out of place).
TEST_F(ZerojitToolCache, CacheLsColumnsStayAlignedWithLongKeysAndPaths) {
  fs::path root = home_.path();
  for (int i = 0; i < 4; ++i) root /= std::string(40, static_cast<char>('a' + i));
  const std::string dir = root.string();
  const auto env = environment_for(home_, dir);
  ASSERT_EQ(run_tool({"warmup", "--compile-only"}, env).exit_code, 0);  // DSv4: long keys
  const Result r = run_tool({"cache", "ls"}, env);
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  std::istringstream lines(r.out);
  std::string header;
  std::getline(lines, header);
  const std::size_t arch = header.find("arch");
  const std::size_t size_end = header.find("size") + 4;
  const std::size_t layer = header.find("layer");
  const std::size_t status = header.find("status");
  ASSERT_NE(status, std::string::npos) << r.out;
  std::size_t rows = 0;
  std::size_t longest_key = 0;
  for (std::string row; std::getline(lines, row) && row.find(" entries, ") == std::string::npos;) {
    ++rows;
    EXPECT_EQ(row.substr(arch, 6), "sm_90a") << row;
    EXPECT_EQ(row[size_end - 1], 'B') << row;
    EXPECT_EQ(row.substr(layer, dir.size()), dir) << row;
    EXPECT_EQ(row.substr(status), "ok") << row;
    EXPECT_EQ(row[arch - 1], ' ') << row;
    longest_key = std::max(longest_key, arch - header.find("key"));
  }
  EXPECT_EQ(rows, 9u) << r.out;  // the default manifest
  // The indexer's key (71 characters) is about twice the 36 columns a fixed width once gave keys.
  EXPECT_GT(longest_key, 60u) << "the keys were meant to be long:\n" << r.out;
}

TEST_F(ZerojitToolCache, APackHoldsWhatALayerServedAndAnUnwritableOneFailsBeforeCompiling) {
  // Keys a --layer serves are copied into the pack, which must hold its manifest by itself.
  TempDir layer, pack, other;
  const auto env = environment_for(home_, other.str());
  ASSERT_EQ(run_tool({"warmup", "--examples", "--compile-only", "--cache-dir", layer.str()}, env)
                .exit_code,
            0);
  const Result layered = run_tool(
      {"warmup", "--examples", "--compile-only", "--layer", layer.str(), "--cache-dir", pack.str()},
      env);
  EXPECT_EQ(layered.exit_code, 0) << describe(layered);
  const json verified = result_of(
      run_tool({"cache", "verify", "--cache-dir", pack.str(), "--json"}, env), "cache verify");
  EXPECT_EQ(verified.at("valid"), 5);

  // A --cache-dir that is a file cannot hold a pack: said before anything compiles (exit 5).
  const fs::path file = other.path() / "a-file";
  std::ofstream(file) << "not a directory";
  const Result refused =
      run_tool({"warmup", "--examples", "--compile-only", "--cache-dir", file.string()}, env);
  EXPECT_EQ(refused.exit_code, 5) << describe(refused);
  EXPECT_NE(refused.err.find("no pack can be written to " + file.string()), std::string::npos)
      << describe(refused);
  EXPECT_EQ(refused.err.find("[1/"), std::string::npos)
      << "a key was compiled first: " << describe(refused);
  EXPECT_EQ(refused.err.find("ALLOW_SHARED"), std::string::npos) << describe(refused);
}

TEST_F(ZerojitToolCache, KernelsThatCouldNotBeKeptAreCountedInTheReport) {
  // Not a pack (no --cache-dir): warmup succeeds from memory, but says what the disk lost.
  TempDir cache;
  auto env = environment_for(home_, cache.str());
  env["ZEROJIT_CACHE_MAX_BYTES"] = "1K";  // smaller than any entry
  const json result =
      result_of(run_tool({"warmup", "--examples", "--compile-only", "--json"}, env), "warmup");
  EXPECT_EQ(result.at("disk_cache").at("write_failures"), 5) << result.dump();
  EXPECT_EQ(result.at("disk_cache").at("published"), 0) << result.dump();
  const Result text = run_tool({"warmup", "--examples", "--compile-only"}, env);
  EXPECT_EQ(text.exit_code, 0) << describe(text);
  EXPECT_NE(text.out.find("5 compiled kernels could not be kept on disk"), std::string::npos)
      << describe(text);
}

TEST_F(ZerojitToolCache, AReportThatCannotBeWrittenIsAFailure) {
  // Standard output on a full device: the JSON is lost, so the exit code must not be 0.
  const std::string tool = zerojit::testing::tool_path();
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full on this system";
  const int status = std::system(("'" + tool + "' keys --json > /dev/full 2>/dev/null").c_str());
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 5);
}

TEST_F(ZerojitToolCache, CacheCommandsPrintTheEnvelope) {
  TempDir cache;
  const auto env = environment_for(home_, cache.str());
  ASSERT_EQ(run_tool({"warmup", "--examples", "--compile-only"}, env).exit_code, 0);
  const json listed = result_of(run_tool({"cache", "ls", "--json"}, env), "cache ls");
  EXPECT_EQ(listed.at("count"), 5);
  EXPECT_EQ(listed.at("entries").size(), 5u);
  EXPECT_EQ(listed.at("root"), cache.str());
  EXPECT_EQ(result_of(run_tool({"cache", "verify", "--json"}, env), "cache verify").at("valid"), 5);
  const json explained = result_of(
      run_tool({"cache", "explain", "--nvrtc-version", "13.0", "--json"}, env), "cache explain");
  EXPECT_EQ(explained.at("keys").size(), 9u);  // the tool's own DSv4 manifest
  EXPECT_EQ(explained.at("misses"), 9);

  // A damaged entry: verify fails (exit 4, not ok) and still carries its report.
  fs::path victim;
  for (const auto& entry : fs::directory_iterator(cache.path() / "entries")) victim = entry.path();
  {
    std::fstream file(victim, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(100);
    file.put('\x5a');
  }
  const Result bad = run_tool({"cache", "verify", "--json"}, env);
  EXPECT_EQ(bad.exit_code, 4) << describe(bad);
  const json document = json::parse(bad.out);
  EXPECT_EQ(document.at("command"), "cache verify");
  EXPECT_FALSE(document.at("ok").get<bool>());
  EXPECT_EQ(document.at("error").at("code"), 4);
  EXPECT_NE(document.at("error").at("hint").get<std::string>().find("--set-aside"),
            std::string::npos);
  EXPECT_EQ(document.at("result").at("bad").size(), 1u);

  const json cleared = result_of(run_tool({"cache", "clear", "--json"}, env), "cache clear");
  EXPECT_GE(cleared.at("removed").get<int>(), 4);
}

// What serving processes missed: `cache misses` shows it, `warmup --also` warms it, and a line
// that is damaged or names a kernel this tool does not have is said, never fatal.
TEST_F(ZerojitToolCache, CacheMissesShowsWhatWasMissedAndWarmupAlsoWarmsIt) {
  TempDir home;
  TempDir cache;
  const std::string file = (fs::path(home.str()) / "misses.jsonl").string();
  {
    std::ofstream out(file);
    const std::string scale_add =
        R"({"zerojit_miss":1,"kernel":"examples.scale_add","key":"dtype=f32, vector_width=4",)"
        R"("key_json":{"dtype":"f32","vector_width":4},"descriptors":"x: f32[1024]",)";
    out << scale_add << R"("time":1764900000,"pid":1})"
        << "\n";
    out << scale_add << R"("time":1764990000,"pid":2})"
        << "\n";
    out << "garbage{\n";
    out << R"({"zerojit_miss":1,"kernel":"other.kernel","key":"n=1","key_json":{"n":1},"time":5})"
        << "\n";
  }
  const auto environment = environment_for(home, cache.str());
  const Result shown = run_tool({"cache", "misses", file, "--json"}, environment);
  ASSERT_EQ(shown.exit_code, 0) << describe(shown);
  const json result = result_of(shown, "cache misses");
  ASSERT_EQ(result.at("misses").size(), 2u);
  EXPECT_EQ(result.at("misses")[0].at("kernel"), "examples.scale_add");
  EXPECT_EQ(result.at("misses")[0].at("processes"), 2);
  EXPECT_EQ(result.at("misses")[0].at("first_seen"), 1764900000);
  EXPECT_EQ(result.at("misses")[0].at("last_seen"), 1764990000);
  ASSERT_EQ(result.at("skipped").size(), 1u);
  EXPECT_EQ(result.at("skipped")[0].get<std::string>().rfind("line 3:", 0), 0u);

  const Result warmed =
      run_tool({"warmup", "--examples", "--compile-only", "--also", file, "--json"}, environment);
  ASSERT_EQ(warmed.exit_code, 0) << describe(warmed);
  EXPECT_EQ(result_of(warmed, "warmup").at("learned_misses"), 2);
  EXPECT_NE(warmed.err.find("other.kernel [n=1]: no such kernel"), std::string::npos)
      << describe(warmed);
  EXPECT_NE(warmed.err.find("line 3: not a JSON object"), std::string::npos) << describe(warmed);

  const Result absent = run_tool({"cache", "misses", file + ".absent"}, environment);
  EXPECT_EQ(absent.exit_code, 2) << describe(absent);
  EXPECT_NE(absent.err.find("misses.jsonl.absent"), std::string::npos) << describe(absent);
}

}  // namespace
