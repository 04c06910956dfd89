// Ahead-of-time packs: a pack (or a warm root) serves a process that has no NVRTC at all,
// through the NVRTC version its entries record. NVRTC is hidden with ZEROJIT_NVRTC_DISABLE=1,
// since the dynamic loader's cache would find an installed one whatever the environment says.
#include <cstdlib>

#include "unit/disk_cache/support.hpp"

namespace zerojit::test {
namespace {

const std::vector<std::string> kNoNvrtc{"ZEROJIT_NVRTC_DISABLE=1"};

TEST_F(DiskCacheStore, TheRootRecordsTheNvrtcVersionsOfItsEntries) {
  const fs::path root = dir / "cache";
  {
    DiskCache cache(options(root));
    EXPECT_TRUE(cache.recorded_compiler_versions(Language::cuda, "sm_90a").empty());
    cache.publish(synthetic_artifact(32, 100, "sm_90a", "13.0"));
    cache.publish(synthetic_artifact(64, 100, "sm_90a", "13.0"));
    EXPECT_EQ(cache.recorded_compiler_versions(Language::cuda, "sm_90a"),
              std::vector<std::string>{"13.0"});
    cache.publish(synthetic_artifact(32, 100, "sm_90a", "12.8"));
    EXPECT_EQ(cache.recorded_compiler_versions(Language::cuda, "sm_90a"),
              (std::vector<std::string>{"12.8", "13.0"}));
  }
  EXPECT_TRUE(fs::is_regular_file(root / "nvrtc-version" / "compiled-with-13.0"));
  // A layer copied from the root carries its records; a planted name that is no version is
  // not believed.
  write_file(root / "nvrtc-version" / "compiled-with-13.0; rm -rf", "");
  DiskCacheOptions layered = options(dir / "front");
  layered.read_only_layers = {root};
  DiskCache front(layered);
  EXPECT_EQ(front.recorded_compiler_versions(Language::cuda, "sm_90a"),
            (std::vector<std::string>{"12.8", "13.0"}));
  // The records describe the entries: clear removes them with the last entry.
  DiskCache cache(options(root));
  cache.clear();
  EXPECT_TRUE(cache.recorded_compiler_versions(Language::cuda, "sm_90a").empty());
  EXPECT_TRUE(warnings.empty());
}

TEST_F(DiskCacheStore, AHitInARootWithoutRecordsRecordsItsVersion) {
  // A root written before versions were recorded learns them from the entries it serves.
  const fs::path root = dir / "cache";
  const CompiledArtifact artifact = synthetic_artifact(32, 100, "sm_90a", "13.0");
  {
    DiskCache cache(options(root));
    cache.publish(artifact);
  }
  fs::remove(root / "nvrtc-version" / "compiled-with-13.0");
  DiskCache cache(options(root));
  EXPECT_TRUE(cache.recorded_compiler_versions(Language::cuda, "sm_90a").empty());
  ASSERT_TRUE(cache.find(artifact.identity));
  EXPECT_EQ(cache.recorded_compiler_versions(Language::cuda, "sm_90a"),
            std::vector<std::string>{"13.0"});
}

TEST_F(DiskCacheProcesses, APackServesAProcessWithoutNvrtc) {
  const fs::path pack = scratch / "pack";
  const WorkerRun built = run(pack);
  expect_warm(built, kExampleKeys, 0);
  const std::string version = built.out["nvrtc_version"];

  // Mounted as a read-only layer in front of an empty root: every key from disk, 0 compiles.
  const WorkerRun layered = run(scratch / "front", {"--layer", pack.string()}, kNoNvrtc);
  expect_warm(layered, 0, kExampleKeys);
  EXPECT_FALSE(layered.out["nvrtc_loaded"].get<bool>());
  EXPECT_EQ(layered.out["nvrtc_version"], version);
  EXPECT_EQ(identities_by_key(layered), identities_by_key(built));
  EXPECT_TRUE(layered.warnings().empty()) << layered.describe();

  // The warm root itself, used as the root.
  const WorkerRun direct = run(pack, {}, kNoNvrtc);
  expect_warm(direct, 0, kExampleKeys);
  EXPECT_FALSE(direct.out["nvrtc_loaded"].get<bool>());

  // Two layers that agree on the version are as good as one.
  const fs::path copy = scratch / "copy";
  fs::copy(pack, copy, fs::copy_options::recursive);
  const WorkerRun agreeing =
      run(scratch / "front2", {"--layer", pack.string(), "--layer", copy.string()}, kNoNvrtc);
  expect_warm(agreeing, 0, kExampleKeys);

  // The tool's warmup, as a serving host without a toolkit runs it: exit 0, nothing compiled.
  const ToolRun tool =
      run_tool({"warmup", "--examples", "--compile-only", "--layer", pack.string(), "--json"},
               scratch.path(),
               {"ZEROJIT_NVRTC_DISABLE=1", "ZEROJIT_CACHE_DIR=" + (scratch / "front3").string()});
  ASSERT_EQ(tool.exit_code, 0) << tool.out << tool.err;
  const json report = json::parse(tool.out);
  EXPECT_EQ(report["ok"], true);
  EXPECT_NE(tool.out.find("\"from_disk\":5"), std::string::npos) << tool.out;
}

TEST_F(DiskCacheProcesses, WithoutNvrtcAPackOfSeveralVersionsOrOfNoneIsRefusedByName) {
  const fs::path pack = scratch / "pack";
  expect_warm(run(pack), kExampleKeys, 0);
  // The version this toolkit recorded, whatever it is.
  std::vector<std::string> recorded;
  for (const auto& item : fs::directory_iterator(pack / "nvrtc-version")) {
    const std::string name = item.path().filename().string();
    if (name.starts_with("compiled-with-")) recorded.push_back(name.substr(14));
  }
  ASSERT_EQ(recorded.size(), 1u);
  // Another version recorded beside it (one no toolkit has yet, so it sorts last): no choice is
  // safe, and the error says why.
  write_file(pack / "nvrtc-version" / "compiled-with-99.9", "");
  const WorkerRun several = run(scratch / "front", {"--layer", pack.string()}, kNoNvrtc);
  EXPECT_NE(several.exit_code, 0) << several.describe();
  EXPECT_EQ(several.count("compiled"), 0);
  ASSERT_TRUE(several.out.is_object()) << several.describe();
  const std::string error = several.out["nvrtc_error"];
  EXPECT_NE(error.find("several NVRTC versions (" + recorded[0] + ", 99.9)"), std::string::npos)
      << error;
  EXPECT_NE(error.find("ZEROJIT_NVRTC_DISABLE=1"), std::string::npos) << error;

  // No record at all: the plain "NVRTC unavailable" failure.
  for (const auto& item : fs::directory_iterator(pack / "nvrtc-version")) fs::remove(item);
  const WorkerRun none = run(scratch / "front2", {"--layer", pack.string()}, kNoNvrtc);
  EXPECT_NE(none.exit_code, 0) << none.describe();
  ASSERT_TRUE(none.out.is_object()) << none.describe();
  EXPECT_EQ(none.out["nvrtc_error"], "NVRTC is disabled (ZEROJIT_NVRTC_DISABLE=1)");
}

}  // namespace
}  // namespace zerojit::test
