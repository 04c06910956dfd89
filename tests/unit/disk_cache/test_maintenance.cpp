// The management calls behind `zerojit cache`: explain, list, verify, gc and clear.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ctime>

#include "examples/examples.hpp"
#include "unit/disk_cache/support.hpp"

namespace zerojit::test {
namespace {

TEST_F(DiskCacheStore, ExplainsWhichComponentOfTheIdentityDiffers) {
  DiskCache cache(options(dir / "cache"));
  const Program block32 = examples::EmptyKernel::instance().program(examples::EmptyKey{32});
  const Program block64 = examples::EmptyKernel::instance().program(examples::EmptyKey{64});
  cache.publish(synthetic_artifact(32, 100, "sm_90a", "13.0"));

  const MissExplanation hit = cache.explain(block32, "sm_90a", "13.0");
  EXPECT_TRUE(hit.present);
  EXPECT_TRUE(hit.differences.empty());

  auto components = [](const MissExplanation& explanation) {
    std::vector<std::string> out;
    for (const auto& d : explanation.differences) out.push_back(d.component);
    return out;
  };
  const MissExplanation arch = cache.explain(block32, "sm_100a", "13.0");
  EXPECT_FALSE(arch.present);
  ASSERT_TRUE(arch.nearest);
  EXPECT_EQ(components(arch), std::vector<std::string>{"arch"});
  EXPECT_EQ(arch.differences[0].wanted, "sm_100a");
  EXPECT_EQ(arch.differences[0].found, "sm_90a");
  EXPECT_EQ(components(cache.explain(block32, "sm_90a", "13.1")),
            std::vector<std::string>{"compiler"});
  // Another key changes the key text and, for this kernel, the options (a -D macro).
  EXPECT_EQ(components(cache.explain(block64, "sm_90a", "13.0")),
            (std::vector<std::string>{"options", "key"}));
  Program edited = block32;
  edited.name_expressions = {"zj::examples::other_kernel"};
  EXPECT_EQ(components(cache.explain(edited, "sm_90a", "13.0")), std::vector<std::string>{"names"});
  const MissExplanation nothing =
      cache.explain(examples::ScaleAddKernel::instance().program({}), "sm_90a", "13.0");
  EXPECT_FALSE(nothing.nearest);
  EXPECT_NE(nothing.summary().find("no entry of kernel examples.scale_add"), std::string::npos);
  const json parsed = json::parse(arch.to_json());
  EXPECT_EQ(parsed["differences"][0]["component"], "arch");
  EXPECT_EQ(parsed["hit"], false);
}

// Every other key of a kernel differs from the one explained in the same components (its key
// text and its name expression), so the nearest entry is the key with the fewest differing
// fields, not the most recent one.
TEST_F(DiskCacheStore, ExplainShowsTheMostSimilarKeyNotTheMostRecentEntry) {
  DiskCache cache(options(dir / "cache"));
  auto& kernel = examples::ScaleAddKernel::instance();
  const auto publish = [&](const examples::ScaleAddKey& key) {
    const Program program = kernel.program(key);
    CompiledArtifact artifact = synthetic_artifact(32);
    artifact.components = identity_components(program, "sm_90a", "13.0");
    artifact.identity = identity_from_components(artifact.components);
    artifact.kernel_name = program.kernel_name;
    artifact.key_text = program.key_text;
    cache.publish(artifact);
    return dir / "cache" / "entries" / (artifact.identity.hex() + ".zjc");
  };
  // One field away (vector_width), used an hour ago; two fields away, used just now.
  const fs::path similar = publish({DType::f32, 4});
  const struct timespec hour_ago[2] = {{std::time(nullptr) - 3600, 0},
                                       {std::time(nullptr) - 3600, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, similar.c_str(), hour_ago, 0), 0);
  publish({DType::f64, 4});

  const MissExplanation explained =
      cache.explain(kernel.program({DType::f32, 1}), "sm_90a", "13.0");
  EXPECT_FALSE(explained.present);
  ASSERT_TRUE(explained.nearest);
  EXPECT_EQ(explained.nearest->key, "dtype=f32, vector_width=4");
  EXPECT_EQ(explained.same_kernel_entries, 2u);
}

TEST_F(DiskCacheStore, ListVerifyGcAndClear) {
  DiskCache cache(options(dir / "cache"));
  for (int i = 0; i < 3; ++i) cache.publish(synthetic_artifact(200 + i));
  const CompiledArtifact damaged = synthetic_artifact(300);
  cache.publish(damaged);
  const fs::path damaged_file = dir / "cache" / "entries" / (damaged.identity.hex() + ".zjc");
  std::string bytes = read_file(damaged_file);
  bytes[bytes.size() / 2] ^= 0x10;
  write_file(damaged_file, bytes);

  const auto listed = cache.list();
  ASSERT_EQ(listed.size(), 4u);
  const json as_json = json::parse(to_json(listed));
  ASSERT_EQ(as_json.size(), 4u);
  CacheVerifyReport report = cache.verify();
  EXPECT_EQ(report.checked, 4u);
  EXPECT_EQ(report.valid, 3u);
  ASSERT_EQ(report.bad.size(), 1u);
  EXPECT_EQ(report.bad[0].problem, EntryProblem::checksum_mismatch);
  EXPECT_TRUE(fs::exists(damaged_file)) << "verify alone changes nothing";
  report = cache.verify(true);
  EXPECT_FALSE(fs::exists(damaged_file));
  EXPECT_EQ(count_files(dir / "cache" / "quarantine"), 1u);
  EXPECT_TRUE(cache.verify().ok());
  EXPECT_EQ(json::parse(report.to_json())["bad"].size(), 1u);

  const CacheGcReport cleared = cache.clear();
  EXPECT_EQ(cleared.removed, 3u);
  EXPECT_TRUE(entry_files(dir / "cache").empty());
  EXPECT_EQ(count_files(dir / "cache" / "quarantine"), 0u);
  EXPECT_EQ(json::parse(cleared.to_json())["removed"], 3);
}

TEST_F(DiskCacheStore, ReportsAreValidJsonWhenPathsAndKeysAreNotUtf8) {
  // A root whose name is not UTF-8, and a program whose key text is not either: every report
  // still parses, with the bad bytes replaced by U+FFFD.
  const fs::path root = dir / "cache-\xff\xfe";
  DiskCache cache(options(root));
  CompiledArtifact artifact = synthetic_artifact(32);
  cache.publish(artifact);
  const std::string replacement = "\xef\xbf\xbd";  // U+FFFD in UTF-8

  const json listed = json::parse(to_json(cache.list()));
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_NE(listed[0]["path"].get<std::string>().find(replacement), std::string::npos);
  EXPECT_NE(listed[0]["layer"].get<std::string>().find(replacement), std::string::npos);
  EXPECT_EQ(json::parse(cache.verify().to_json())["valid"], 1);

  Program odd = examples::EmptyKernel::instance().program(examples::EmptyKey{32});
  odd.key_text = "block_threads=\xe9";
  const MissExplanation explained = cache.explain(odd, "sm_90a\xff", "13.0");
  const json parsed = json::parse(explained.to_json());
  EXPECT_EQ(parsed["key"], "block_threads=" + replacement);
  EXPECT_EQ(parsed["arch"], "sm_90a" + replacement);
  EXPECT_EQ(parsed["nearest"]["layer"].get<std::string>().find(replacement) != std::string::npos,
            true);
  EXPECT_TRUE(warnings.empty());
}

TEST_F(DiskCacheStore, GcRemovesWhatDeadProcessesLeftAndNothingLiveOnes) {
  DiskCache cache(options(dir / "cache"));
  ASSERT_EQ(cache.state(), CacheRootState::writable);
  const fs::path entries = dir / "cache" / "entries";
  const fs::path locks = dir / "cache" / "locks";
  auto age = [](const fs::path& path, int seconds) {
    const timespec times[2] = {{::time(nullptr) - seconds, 0}, {::time(nullptr) - seconds, 0}};
    ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, AT_SYMLINK_NOFOLLOW), 0);
  };
  // A dead writer's temporary (old, unlocked), a live writer's (old but locked), a fresh one.
  write_file(entries / ".tmp-dead", "partial");
  age(entries / ".tmp-dead", 600);
  write_file(entries / ".tmp-live", "partial");
  age(entries / ".tmp-live", 600);
  const int live_writer = ::open((entries / ".tmp-live").c_str(), O_RDONLY);
  ASSERT_EQ(::flock(live_writer, LOCK_EX), 0);
  write_file(entries / ".tmp-fresh", "partial");
  // A lock file left by a dead holder, and one held.
  write_file(locks / "dead.lock", "");
  const CompiledArtifact artifact = synthetic_artifact(32);
  auto guard = cache.lock(artifact.identity);
  ASSERT_NE(guard, nullptr);

  const CacheGcReport report = cache.gc();
  EXPECT_EQ(report.other_files_removed, 2u);
  EXPECT_FALSE(fs::exists(entries / ".tmp-dead"));
  EXPECT_TRUE(fs::exists(entries / ".tmp-live"));
  EXPECT_TRUE(fs::exists(entries / ".tmp-fresh"));
  EXPECT_FALSE(fs::exists(locks / "dead.lock"));
  EXPECT_TRUE(fs::exists(locks / (artifact.identity.hex() + ".lock")));
  guard.reset();
  EXPECT_FALSE(fs::exists(locks / (artifact.identity.hex() + ".lock")))
      << "a holder removes its lock file";
  ::close(live_writer);
}

TEST_F(DiskCacheStore, QuarantineKeepsTheNewestSixteenAndClearEmptiesItDirectoriesToo) {
  const fs::path root = dir / "cache";
  DiskCache cache(options(root));
  ASSERT_EQ(cache.state(), CacheRootState::writable);
  // Twenty bad entries, every fourth a directory (holding a file and a link) planted under
  // an entry name: each is set aside when met, and the quarantine stays at 16.
  std::vector<CompiledArtifact> artifacts;
  for (int i = 0; i < 20; ++i) {
    artifacts.push_back(synthetic_artifact(400 + i));
    const fs::path entry = root / "entries" / (artifacts.back().identity.hex() + ".zjc");
    if (i % 4 == 0) {
      fs::create_directories(entry / "inner");
      write_file(entry / "inner" / "file", "x");
      fs::create_symlink(dir / "outside", entry / "link");
    } else {
      write_file(entry, "not an entry");
    }
    EXPECT_FALSE(cache.find(artifacts.back().identity));
    EXPECT_LE(count_files(root / "quarantine"), 16u) << "after " << i + 1;
  }
  EXPECT_EQ(count_files(root / "quarantine"), 16u);
  EXPECT_EQ(warnings.size(), 20u);
  EXPECT_EQ(cache.counters().bad_entries, 20u);
  // The newest sixteen arrivals are the ones kept.
  for (int i = 4; i < 20; ++i) {
    bool kept = false;
    for (const auto& item : fs::directory_iterator(root / "quarantine")) {
      kept = kept || item.path().filename().string().starts_with(
                         artifacts[static_cast<std::size_t>(i)].identity.hex());
    }
    EXPECT_TRUE(kept) << i;
  }
  const CacheGcReport cleared = cache.clear();
  EXPECT_EQ(count_files(root / "quarantine"), 0u) << "directories set aside are removed too";
  EXPECT_GE(cleared.other_files_removed, 16u);
}

TEST_F(DiskCacheStore, EntriesDatedInTheFutureAreEvictedBeforeTheEntriesInUse) {
  const fs::path root = dir / "cache";
  std::vector<CompiledArtifact> artifacts;
  for (int i = 0; i < 4; ++i) artifacts.push_back(synthetic_artifact(500 + i, 10000));
  const std::uint64_t entry_bytes = encode_entry(artifacts[0]).size();
  DiskCacheOptions o = options(root);
  o.max_bytes = 2 * entry_bytes + entry_bytes / 2;  // room for two
  {
    DiskCache writer(options(root));
    for (const CompiledArtifact& artifact : artifacts) writer.publish(artifact);
  }
  // 1 and 3 come from a clock ten years ahead; 0 and 2 are in use.
  auto entry = [&](int i) {
    return root / "entries" / (artifacts[static_cast<std::size_t>(i)].identity.hex() + ".zjc");
  };
  const timespec future[2] = {{::time(nullptr) + 315360000, 0}, {::time(nullptr) + 315360000, 0}};
  for (int i : {1, 3}) ASSERT_EQ(::utimensat(AT_FDCWD, entry(i).c_str(), future, 0), 0);
  DiskCache cache(o);
  ASSERT_TRUE(cache.find(artifacts[0].identity));
  ASSERT_TRUE(cache.find(artifacts[2].identity));
  const CacheGcReport report = cache.gc();
  EXPECT_EQ(report.removed, 2u);
  EXPECT_TRUE(fs::exists(entry(0)));
  EXPECT_TRUE(fs::exists(entry(2)));
  EXPECT_FALSE(fs::exists(entry(1)));
  EXPECT_FALSE(fs::exists(entry(3)));

  // A future entry that is used gets its time fixed: it then ages like any other.
  DiskCache writer(options(root));
  writer.publish(artifacts[1]);
  ASSERT_EQ(::utimensat(AT_FDCWD, entry(1).c_str(), future, 0), 0);
  ASSERT_TRUE(writer.find(artifacts[1].identity));
  struct stat info {};
  ASSERT_EQ(::stat(entry(1).c_str(), &info), 0);
  EXPECT_LE(info.st_mtim.tv_sec, ::time(nullptr) + 1);
  EXPECT_TRUE(warnings.empty());
}

// Three sparse gigabytes under entry names: damaged files, each reported once and set aside;
// they never count against the quota, so no good entry is evicted for them.
TEST_F(DiskCacheStore, DamagedFilesDoNotCountAgainstTheQuotaAndAreReportedOnce) {
  const fs::path root = dir / "cache";
  std::vector<CompiledArtifact> artifacts;
  for (int i = 0; i < 3; ++i) artifacts.push_back(synthetic_artifact(700 + i, 10000));
  DiskCacheOptions o = options(root);
  o.max_bytes = 4 * encode_entry(artifacts[0]).size();
  DiskCache cache(o);
  cache.publish(artifacts[0]);
  cache.publish(artifacts[1]);
  std::vector<fs::path> sparse;
  for (int i = 0; i < 3; ++i) {
    sparse.push_back(root / "entries" / (synthetic_artifact(900 + i).identity.hex() + ".zjc"));
    write_file(sparse.back(), "");
    fs::resize_file(sparse.back(), std::uint64_t{1} << 30);
  }
  warnings.clear();
  cache.publish(artifacts[2]);  // over the quota only if the damaged files counted
  for (const CompiledArtifact& artifact : artifacts) EXPECT_TRUE(cache.find(artifact.identity));
  EXPECT_EQ(cache.counters().evicted, 0u);
  EXPECT_EQ(cache.counters().bad_entries, 3u);
  std::size_t reported = 0;
  for (const std::string& warning : warnings) {
    reported += warning.find("bad entry") != std::string::npos ? 1 : 0;
  }
  EXPECT_EQ(reported, 3u) << "each damaged file reported once";
  for (const fs::path& file : sparse) EXPECT_FALSE(fs::exists(file)) << "set aside";
  const CacheGcReport again = cache.gc();
  EXPECT_EQ(again.removed, 0u);
  EXPECT_EQ(cache.counters().bad_entries, 3u);
}

}  // namespace
}  // namespace zerojit::test
