// The store in this process: publish and find, read-only layers, least-recently-used
// eviction and the NVRTC version memo.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <set>
#include <thread>

#include "unit/disk_cache/support.hpp"

namespace zerojit::test {
namespace {

TEST_F(DiskCacheStore, PublishesAtomicallyAndFindsWhatItPublished) {
  DiskCache cache(options(dir / "cache"));
  EXPECT_EQ(cache.state(), CacheRootState::writable) << cache.state_reason();
  const CompiledArtifact artifact = synthetic_artifact(32);
  EXPECT_FALSE(cache.find(artifact.identity));
  cache.publish(artifact);
  const auto found = cache.find(artifact.identity);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->cubin, artifact.cubin);
  EXPECT_EQ(entry_files(dir / "cache"), std::vector<std::string>{artifact.identity.hex() + ".zjc"});
  // Nothing else is left in entries/ (the temporary was renamed, the probe removed).
  EXPECT_EQ(count_files(dir / "cache" / "entries"), 1u);
  const DiskCacheCounters counters = cache.counters();
  EXPECT_EQ(counters.published, 1u);
  EXPECT_EQ(counters.hits, 1u);
  EXPECT_EQ(counters.misses, 1u);
  EXPECT_TRUE(warnings.empty());
  const auto mode = fs::status(dir / "cache").permissions();
  EXPECT_EQ(mode & (fs::perms::group_all | fs::perms::others_all), fs::perms::none)
      << "a root the cache creates is private";
}

TEST_F(DiskCacheStore, ReadOnlyLayersAreSearchedFirstAndNeverWritten) {
  const CompiledArtifact in_layer = synthetic_artifact(32);
  {
    DiskCache pack(options(dir / "pack"));
    pack.publish(in_layer);
  }
  DiskCacheOptions o = options(dir / "cache");
  o.read_only_layers = {dir / "pack"};
  DiskCache cache(o);
  const auto found = cache.find(in_layer.identity);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->cubin, in_layer.cubin);
  const CompiledArtifact fresh = synthetic_artifact(64);
  cache.publish(fresh);
  EXPECT_EQ(entry_files(dir / "pack").size(), 1u);
  EXPECT_EQ(entry_files(dir / "cache").size(), 1u);
  const auto listed = cache.list();
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_TRUE(listed[0].read_only);
  EXPECT_EQ(listed[0].kernel, "examples.empty");
  EXPECT_FALSE(listed[1].read_only);
  EXPECT_TRUE(warnings.empty());
}

TEST_F(DiskCacheStore, EvictionKeepsTheMostRecentlyUsedEntries) {
  std::vector<CompiledArtifact> artifacts;
  for (int i = 0; i < 7; ++i) artifacts.push_back(synthetic_artifact(100 + i, 10000));
  const std::uint64_t entry_bytes = encode_entry(artifacts[0]).size();
  auto pause = [] { std::this_thread::sleep_for(std::chrono::milliseconds(25)); };
  {
    DiskCache cache(options(dir / "cache"));
    for (int i = 0; i < 6; ++i) {
      cache.publish(artifacts[static_cast<std::size_t>(i)]);
      pause();
    }
    // Use 0 and 2: recency, oldest first, becomes 1 3 4 5 0 2.
    ASSERT_TRUE(cache.find(artifacts[0].identity));
    pause();
    ASSERT_TRUE(cache.find(artifacts[2].identity));
    pause();
  }
  DiskCacheOptions o = options(dir / "cache");
  o.max_bytes = 4 * entry_bytes + entry_bytes / 2;  // room for four
  DiskCache cache(o);
  const CacheGcReport report = cache.gc();
  EXPECT_EQ(report.removed, 2u);
  EXPECT_EQ(report.kept, 4u);
  auto present = [&] {
    std::set<int> out;
    for (int i = 0; i < 7; ++i) {
      if (fs::exists(dir / "cache" / "entries" /
                     (artifacts[static_cast<std::size_t>(i)].identity.hex() + ".zjc"))) {
        out.insert(i);
      }
    }
    return out;
  };
  EXPECT_EQ(present(), (std::set<int>{0, 2, 4, 5}));
  // Publishing past the quota evicts the least recently used (4) and keeps the new one.
  pause();
  cache.publish(artifacts[6]);
  EXPECT_EQ(present(), (std::set<int>{0, 2, 5, 6}));
  EXPECT_EQ(cache.counters().evicted, 3u);  // two by gc, one by publish
  EXPECT_TRUE(warnings.empty());
}

TEST_F(DiskCacheStore, EvictionNeverRemovesAnEntryBeingRead) {
  DiskCache cache(options(dir / "cache"));
  const CompiledArtifact a = synthetic_artifact(1, 5000);
  const CompiledArtifact b = synthetic_artifact(2, 5000);
  cache.publish(a);
  std::this_thread::sleep_for(std::chrono::milliseconds(25));
  cache.publish(b);
  // A reader elsewhere holds the oldest entry with the shared lock readers take.
  const fs::path oldest = dir / "cache" / "entries" / (a.identity.hex() + ".zjc");
  const int reader = ::open(oldest.c_str(), O_RDONLY);
  ASSERT_GE(reader, 0);
  ASSERT_EQ(::flock(reader, LOCK_SH), 0);
  const CacheGcReport report = cache.gc(0);
  EXPECT_EQ(report.busy, 1u);
  EXPECT_EQ(report.removed, 1u);
  EXPECT_TRUE(fs::exists(oldest));
  ::close(reader);
  EXPECT_EQ(cache.gc(0).removed, 1u);
  EXPECT_FALSE(fs::exists(oldest));
}

TEST_F(DiskCacheStore, NvrtcVersionMemoIsVerified) {
  DiskCache cache(options(dir / "cache"));
  EXPECT_FALSE(cache.recall_nvrtc_version("nvrtc:1:2:3"));
  cache.remember_nvrtc_version("nvrtc:1:2:3", "13.0");
  EXPECT_EQ(cache.recall_nvrtc_version("nvrtc:1:2:3"), "13.0");
  EXPECT_FALSE(cache.recall_nvrtc_version("nvrtc:1:2:4")) << "another library file";
  // Tampering with the version (checksum no longer matches) makes it unknown again.
  std::vector<fs::path> memos;
  for (const auto& item : fs::directory_iterator(dir / "cache" / "nvrtc-version")) {
    memos.push_back(item.path());
  }
  ASSERT_EQ(memos.size(), 1u);
  std::string text = read_file(memos[0]);
  const std::size_t at = text.find("version=13.0");
  ASSERT_NE(at, std::string::npos);
  text[at + 8] = '2';
  write_file(memos[0], text);
  EXPECT_FALSE(cache.recall_nvrtc_version("nvrtc:1:2:3"));
  write_file(memos[0], "");
  EXPECT_FALSE(cache.recall_nvrtc_version("nvrtc:1:2:3"));
}

}  // namespace
}  // namespace zerojit::test
