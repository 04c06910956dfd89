// Building an ahead-of-time pack never says ok for a pack that cannot serve its manifest: a
// quota never evicts what the running process uses, and `zerojit warmup --compile-only
// --cache-dir` checks every key's entry afterwards, failing with exit 5 and the missing keys
// under a quota smaller than one entry and on a full filesystem (RLIMIT_FSIZE).
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <set>

#include "unit/disk_cache/support.hpp"

namespace zerojit::test {
namespace {

TEST_F(DiskCacheStore, ItsOwnEvictionsNeverRemoveWhatTheProcessUses) {
  const fs::path root = dir / "cache";
  std::vector<CompiledArtifact> artifacts;
  for (int i = 0; i < 8; ++i) artifacts.push_back(synthetic_artifact(600 + i, 10000));
  const std::uint64_t entry_bytes = encode_entry(artifacts[0]).size();
  DiskCacheOptions o = options(root);
  o.max_bytes = 2 * entry_bytes + entry_bytes / 2;  // room for two
  {
    // One process publishes five under a quota for two: all five stay, one warning says so.
    DiskCache builder(o);
    for (int i = 0; i < 5; ++i) builder.publish(artifacts[static_cast<std::size_t>(i)]);
    EXPECT_EQ(entry_files(root).size(), 5u);
    EXPECT_EQ(builder.counters().evicted, 0u);
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_NE(warnings[0].find("stay over its quota"), std::string::npos) << warnings[0];
    EXPECT_NE(warnings[0].find("ZEROJIT_CACHE_MAX_BYTES"), std::string::npos) << warnings[0];
  }
  // Another process uses two of them (hits), then publishes: it evicts the other three (not
  // in use by it), never its own.
  DiskCache server(o);
  ASSERT_TRUE(server.find(artifacts[0].identity));
  ASSERT_TRUE(server.find(artifacts[1].identity));
  server.publish(artifacts[5]);
  const auto files = entry_files(root);
  const std::set<std::string> present(files.begin(), files.end());
  for (int i : {0, 1, 5}) {
    EXPECT_EQ(present.count(artifacts[static_cast<std::size_t>(i)].identity.hex() + ".zjc"), 1u)
        << i;
  }
  EXPECT_EQ(present.size(), 3u);
  EXPECT_EQ(server.counters().evicted, 3u);
  // An explicit gc trims to the quota whoever uses what.
  EXPECT_EQ(server.gc().removed, 1u);
}

TEST_F(DiskCacheStore, RootEntrySaysWhatTheRootHoldsForAnIdentity) {
  const fs::path root = dir / "cache";
  const CompiledArtifact in_root = synthetic_artifact(32);
  const CompiledArtifact damaged = synthetic_artifact(64);
  const CompiledArtifact held = synthetic_artifact(128);
  const CompiledArtifact in_layer = synthetic_artifact(256);
  {
    DiskCache layer(options(dir / "layer"));
    layer.publish(in_layer);
  }
  DiskCacheOptions o = options(root);
  o.read_only_layers = {dir / "layer"};
  o.lock_timeout = std::chrono::milliseconds(200);
  DiskCache cache(o);
  for (const auto* artifact : {&in_root, &damaged, &held}) cache.publish(*artifact);
  const fs::path damaged_file = root / "entries" / (damaged.identity.hex() + ".zjc");
  std::string bytes = read_file(damaged_file);
  bytes[bytes.size() / 2] ^= 0x20;
  write_file(damaged_file, bytes);
  const fs::path held_file = root / "entries" / (held.identity.hex() + ".zjc");
  const int holder = ::open(held_file.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_EQ(::flock(holder, LOCK_EX), 0);

  const auto good = cache.root_entry(in_root.identity);
  ASSERT_TRUE(good);
  EXPECT_EQ(good->problem, EntryProblem::none);
  EXPECT_FALSE(good->busy);
  EXPECT_EQ(good->kernel, "examples.empty");
  const auto bad = cache.root_entry(damaged.identity);
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->problem, EntryProblem::checksum_mismatch);
  EXPECT_TRUE(fs::exists(damaged_file)) << "only read, not set aside";
  const auto busy = cache.root_entry(held.identity);
  ASSERT_TRUE(busy);
  EXPECT_TRUE(busy->busy);
  EXPECT_FALSE(cache.root_entry(in_layer.identity)) << "a layer's entry is not the root's";
  EXPECT_FALSE(cache.root_entry(synthetic_artifact(512).identity));
  ::close(holder);
}

// The keys the tool's failure document lists as missing from the pack (its result, TOOL.md).
std::vector<std::string> listed_keys(const json& document) {
  std::vector<std::string> keys;
  for (const auto& item : document["result"]["pack_missing"]) {
    keys.push_back(item["kernel"].get<std::string>() + " [" + item["key"].get<std::string>() + "]");
  }
  std::sort(keys.begin(), keys.end());
  return keys;
}

TEST_F(DiskCacheProcesses, APackUnderAQuotaKeepsEveryKeyOrFailsNamingTheMissingOnes) {
  // The entries' sizes with this toolkit (NVRTC versions differ), from a pack without limits.
  const fs::path reference = scratch / "reference";
  expect_warm(run(reference), kExampleKeys, 0);
  std::uintmax_t smallest = ~std::uintmax_t{0}, largest = 0;
  for (const std::string& name : entry_files(reference)) {
    const std::uintmax_t size = fs::file_size(reference / "entries" / name);
    smallest = std::min(smallest, size);
    largest = std::max(largest, size);
  }
  ASSERT_GT(smallest, 1u);

  // A quota smaller than the pack (room for one entry of the five): every key is kept.
  const fs::path pack = scratch / "pack";
  const ToolRun kept = run_tool(
      {"warmup", "--examples", "--compile-only", "--cache-dir", pack.string(), "--in-process",
       "--jobs", "2"},
      scratch.path(), {"ZEROJIT_CACHE_MAX_BYTES=" + std::to_string(largest + largest / 2)});
  ASSERT_EQ(kept.exit_code, 0) << kept.out << kept.err;
  EXPECT_NE(kept.out.find("ok: ahead-of-time pack"), std::string::npos) << kept.out;
  EXPECT_NE(kept.err.find("stay over its quota"), std::string::npos) << kept.err;
  EXPECT_EQ(expect_all_valid(pack), static_cast<std::size_t>(kExampleKeys));

  // A quota smaller than any entry: nothing can be kept, and warmup says so (exit 5).
  const fs::path tiny = scratch / "tiny";
  const ToolRun refused =
      run_tool({"warmup", "--examples", "--compile-only", "--cache-dir", tiny.string(),
                "--in-process", "--json"},
               scratch.path(), {"ZEROJIT_CACHE_MAX_BYTES=" + std::to_string(smallest - 1)});
  EXPECT_EQ(refused.exit_code, 5) << refused.out << refused.err;
  const json report = json::parse(refused.out);
  EXPECT_EQ(report["ok"], false);
  EXPECT_EQ(report["result"]["pack_missing"].size(), static_cast<std::size_t>(kExampleKeys));
  EXPECT_NE(report["error"]["message"].get<std::string>().find("5 of 5 keys are not in it"),
            std::string::npos)
      << report["error"];
  EXPECT_NE(refused.err.find("larger than the whole quota"), std::string::npos) << refused.err;
}

TEST_F(DiskCacheProcesses, APackOnAFullFilesystemFailsNamingTheMissingKeys) {
  // The entries' sizes, from a pack built without limits.
  const fs::path reference = scratch / "reference";
  const WorkerRun built = run(reference);
  expect_warm(built, kExampleKeys, 0);
  std::map<std::string, std::uintmax_t> sizes;  // identity -> entry bytes
  for (const std::string& name : entry_files(reference)) {
    sizes[name.substr(0, 32)] = fs::file_size(reference / "entries" / name);
  }
  std::uintmax_t smallest = sizes.begin()->second, largest = smallest;
  for (const auto& [identity, size] : sizes) {
    smallest = std::min(smallest, size);
    largest = std::max(largest, size);
  }
  if (smallest == largest) GTEST_SKIP() << "every entry has the same size: no limit splits them";
  // Files may not grow past the smallest entry: the larger ones fail with EFBIG, as they
  // would on a filesystem that fills up while the pack is written.
  const fs::path pack = scratch / "pack";
  const ToolRun full = run_tool_with_file_size_limit(
      {"warmup", "--examples", "--compile-only", "--cache-dir", pack.string(), "--json"}, smallest);
  EXPECT_EQ(full.exit_code, 5) << full.out << full.err;
  const json report = json::parse(full.out);
  EXPECT_EQ(report["ok"], false);
  EXPECT_NE(full.err.find("File too large"), std::string::npos) << full.err;
  std::vector<std::string> expected;
  for (const auto& item : built.out["identities"]) {
    if (sizes.at(item["identity"]) > smallest) {
      expected.push_back(item["kernel"].get<std::string>() + " [" + item["key"].get<std::string>() +
                         "]");
    }
  }
  std::sort(expected.begin(), expected.end());
  ASSERT_FALSE(expected.empty());
  EXPECT_EQ(listed_keys(report), expected);
  EXPECT_EQ(entry_files(pack).size(), kExampleKeys - expected.size());
  // Run again without the limit: only the missing keys compile, and the pack is complete.
  const ToolRun healed = run_tool(
      {"warmup", "--examples", "--compile-only", "--cache-dir", pack.string()}, scratch.path());
  EXPECT_EQ(healed.exit_code, 0) << healed.out << healed.err;
  EXPECT_EQ(expect_all_valid(pack), static_cast<std::size_t>(kExampleKeys));
}

}  // namespace
}  // namespace zerojit::test
