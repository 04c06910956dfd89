// The zerojit tool's cache commands against a cache warmed by a worker process.
#include "unit/disk_cache/support.hpp"

namespace zerojit::test {
namespace {

TEST_F(DiskCacheProcesses, ToolListsVerifiesTrimsExplainsAndClears) {
  const fs::path root = scratch / "cache";
  const WorkerRun cold = run(root);
  expect_warm(cold, kExampleKeys, 0);
  const std::string dir = root.string();

  ToolRun ls = run_tool({"cache", "ls", "--cache-dir", dir, "--json"}, scratch.path());
  ASSERT_EQ(ls.exit_code, 0) << ls.err;
  const json listed = json::parse(ls.out)["result"]["entries"];
  ASSERT_EQ(listed.size(), 5u);
  EXPECT_EQ(listed[0]["status"], "ok");
  EXPECT_EQ(listed[0]["arch"], "sm_90a");

  ToolRun verify = run_tool({"cache", "verify", "--cache-dir", dir}, scratch.path());
  EXPECT_EQ(verify.exit_code, 0) << verify.out << verify.err;
  const fs::path victim = root / "entries" / entry_files(root)[0];
  std::string bytes = read_file(victim);
  bytes[100] = static_cast<char>(bytes[100] ^ 1);
  write_file(victim, bytes);
  verify = run_tool({"cache", "verify", "--cache-dir", dir, "--json"}, scratch.path());
  EXPECT_EQ(verify.exit_code, 4) << verify.out << verify.err;
  EXPECT_EQ(json::parse(verify.out)["result"]["bad"].size(), 1u);
  verify = run_tool({"cache", "verify", "--cache-dir", dir, "--set-aside"}, scratch.path());
  EXPECT_EQ(verify.exit_code, 4);
  EXPECT_FALSE(fs::exists(victim));

  // The tool explains its own manifest (not the example kernels this cache holds): every
  // key misses, with no entry of its kernel to compare with.
  ToolRun explain =
      run_tool({"cache", "explain", "--cache-dir", dir, "--nvrtc-version", "13.0", "--json"},
               scratch.path());
  ASSERT_EQ(explain.exit_code, 0) << explain.err;
  const json explained = json::parse(explain.out)["result"]["keys"];
  ASSERT_GE(explained.size(), 1u);
  for (const auto& item : explained) {
    EXPECT_EQ(item["hit"], false);
    EXPECT_TRUE(item["nearest"].is_null());
    EXPECT_EQ(item["nvrtc"], "13.0");
  }

  ToolRun gc =
      run_tool({"cache", "gc", "--cache-dir", dir, "--max-size", "0", "--json"}, scratch.path());
  ASSERT_EQ(gc.exit_code, 0) << gc.err;
  EXPECT_EQ(json::parse(gc.out)["result"]["removed"], 4);
  ToolRun clear = run_tool({"cache", "clear", "--cache-dir", dir}, scratch.path());
  EXPECT_EQ(clear.exit_code, 0) << clear.err;

  // A root others can write is refused (exit 2) with the override named.
  const fs::path shared = scratch / "shared";
  fs::create_directories(shared);
  fs::permissions(shared, fs::perms::all);
  ToolRun refused = run_tool({"cache", "ls", "--cache-dir", shared.string()}, scratch.path());
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.err.find("ZEROJIT_CACHE_ALLOW_SHARED"), std::string::npos) << refused.err;
  EXPECT_EQ(
      run_tool({"cache", "ls", "--cache-dir", shared.string(), "--allow-shared"}, scratch.path())
          .exit_code,
      0);
  EXPECT_EQ(run_tool({"cache", "gc", "--max-size", "lots"}, scratch.path()).exit_code, 2);
}

}  // namespace
}  // namespace zerojit::test
