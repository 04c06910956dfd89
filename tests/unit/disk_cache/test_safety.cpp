// The safety rules: roots other users can write, sticky roots, foreign owners, symbolic links
// inside the root, and roots that cannot be created.
#include <unistd.h>

#include "unit/disk_cache/support.hpp"

namespace zerojit::test {
namespace {

TEST_F(DiskCacheStore, RefusesARootOtherUsersCanWriteUnlessAllowed) {
  for (const fs::perms mode :
       {fs::perms::all, fs::perms::owner_all | fs::perms::group_all | fs::perms::others_read |
                            fs::perms::others_exec}) {
    const fs::path root = dir / ("shared-" + std::to_string(static_cast<int>(mode)));
    fs::create_directories(root);
    fs::permissions(root, mode);
    warnings.clear();
    DiskCache cache(options(root));
    EXPECT_EQ(cache.state(), CacheRootState::unusable);
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_NE(warnings[0].find("refusing cache root"), std::string::npos) << warnings[0];
    EXPECT_NE(warnings[0].find("other users can write it"), std::string::npos) << warnings[0];
    EXPECT_NE(warnings[0].find("ZEROJIT_CACHE_ALLOW_SHARED=1"), std::string::npos) << warnings[0];
    const CompiledArtifact artifact = synthetic_artifact(32);
    cache.publish(artifact);
    EXPECT_FALSE(cache.find(artifact.identity));
    EXPECT_EQ(cache.lock(artifact.identity), nullptr);
    EXPECT_FALSE(fs::exists(root / "entries")) << "a refused root is not written";
    EXPECT_EQ(warnings.size(), 1u) << "reported once";

    DiskCacheOptions allowed = options(root);
    allowed.allow_shared_root = true;
    DiskCache overridden(allowed);
    EXPECT_EQ(overridden.state(), CacheRootState::writable) << overridden.state_reason();
  }
  // The environment variable is the same override.
  const fs::path root = dir / "shared-env";
  fs::create_directories(root);
  fs::permissions(root, fs::perms::all);
  ::setenv("ZEROJIT_CACHE_ALLOW_SHARED", "1", 1);
  DiskCache by_environment(options(root));
  EXPECT_EQ(by_environment.state(), CacheRootState::writable);
  // Any of the yes words (the library's one rule for yes/no variables); a word that is neither
  // yes nor no is not taken as yes.
  ::setenv("ZEROJIT_CACHE_ALLOW_SHARED", "On", 1);
  DiskCache by_word(options(root));
  EXPECT_EQ(by_word.state(), CacheRootState::writable) << by_word.state_reason();
  ::setenv("ZEROJIT_CACHE_ALLOW_SHARED", "sure", 1);
  DiskCache unclear(options(root));
  EXPECT_NE(unclear.state(), CacheRootState::writable);
  ::unsetenv("ZEROJIT_CACHE_ALLOW_SHARED");
}

TEST_F(DiskCacheStore, AStickyRootIsAcceptedButAForeignSubdirectoryIsNot) {
  // Like /tmp: others may add names but cannot replace ours, and everything the cache reads
  // lives in subdirectories it created and owns.
  const fs::path sticky = dir / "sticky";
  fs::create_directories(sticky);
  fs::permissions(sticky, fs::perms::all | fs::perms::sticky_bit);
  DiskCache cache(options(sticky));
  EXPECT_EQ(cache.state(), CacheRootState::writable) << cache.state_reason();
  // A subdirectory others can write is refused even under a sticky root.
  const fs::path other = dir / "sticky2";
  fs::create_directories(other / "entries");
  fs::permissions(other, fs::perms::all | fs::perms::sticky_bit);
  fs::permissions(other / "entries", fs::perms::all);
  warnings.clear();
  DiskCache refused(options(other));
  EXPECT_EQ(refused.state(), CacheRootState::unusable);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("entries/"), std::string::npos) << warnings[0];
}

TEST_F(DiskCacheStore, ARootOwnedByAnotherUserIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a directory to another user";
  const fs::path root = dir / "theirs";
  fs::create_directories(root);
  ASSERT_EQ(::chown(root.c_str(), 65534, 65534), 0);
  DiskCache cache(options(root));
  EXPECT_EQ(cache.state(), CacheRootState::unusable);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("owned by uid 65534"), std::string::npos) << warnings[0];
}

TEST_F(DiskCacheStore, NeverFollowsASymlinkOutOfTheRoot) {
  const CompiledArtifact artifact = synthetic_artifact(32);
  // A valid entry outside the root, and a link to it where the entry would be.
  const fs::path outside = dir / "outside.zjc";
  write_file(outside, encode_entry(artifact));
  {
    DiskCache cache(options(dir / "cache"));
    ASSERT_EQ(cache.state(), CacheRootState::writable);
    const fs::path entry = dir / "cache" / "entries" / (artifact.identity.hex() + ".zjc");
    fs::create_symlink(outside, entry);
    EXPECT_FALSE(cache.find(artifact.identity));
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_NE(warnings[0].find("not-a-regular-file"), std::string::npos) << warnings[0];
    EXPECT_FALSE(fs::is_symlink(entry)) << "the link is set aside";
    EXPECT_EQ(read_file(outside), encode_entry(artifact)) << "its target is untouched";
    // A lock file that is a link to a file outside: not followed, not created.
    const fs::path target = dir / "lock-target";
    fs::create_symlink(target, dir / "cache" / "locks" / (artifact.identity.hex() + ".lock"));
    EXPECT_EQ(cache.lock(artifact.identity), nullptr);
    EXPECT_FALSE(fs::exists(target));
  }
  // entries/ itself a link to a directory outside (holding that valid entry): not used.
  const fs::path other = dir / "other";
  fs::create_directories(other);
  fs::create_directories(dir / "elsewhere");
  fs::copy_file(outside, dir / "elsewhere" / (artifact.identity.hex() + ".zjc"));
  fs::create_directory_symlink(dir / "elsewhere", other / "entries");
  warnings.clear();
  DiskCache linked(options(other));
  EXPECT_EQ(linked.state(), CacheRootState::unusable);
  EXPECT_FALSE(linked.find(artifact.identity));
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("symbolic link"), std::string::npos) << warnings[0];
}

TEST_F(DiskCacheStore, AnUncreatableRootMeansMemoryOnlyWithOneWarning) {
  write_file(dir / "a-file", "x");
  DiskCache cache(options(dir / "a-file" / "cache"));
  EXPECT_EQ(cache.state(), CacheRootState::unusable);
  const CompiledArtifact artifact = synthetic_artifact(32);
  EXPECT_FALSE(cache.find(artifact.identity));
  cache.publish(artifact);
  EXPECT_EQ(cache.lock(artifact.identity), nullptr);
  EXPECT_FALSE(cache.recall_nvrtc_version("nvrtc:1"));
  cache.remember_nvrtc_version("nvrtc:1", "13.0");
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("memory only"), std::string::npos) << warnings[0];
}

// An exported CuTeDSL object (host code) and a cubin, published in `root` by this user.
struct HostAndCubin {
  CompiledArtifact host = synthetic_language_artifact(Language::cutedsl);
  CompiledArtifact cubin = synthetic_artifact(32);
};

HostAndCubin publish_host_and_cubin(const DiskCacheOptions& in_root) {
  HostAndCubin published;
  DiskCache cache(in_root);
  cache.publish(published.host);
  cache.publish(published.cubin);
  return published;
}

// Host code (an exported CuTeDSL object) is code execution: a trusted root is not enough, the
// entry file itself must be one nobody else can write (docs/CACHE.md, "Host code"). A cubin in
// the same file is still served: loading one runs nothing on the host.
TEST_F(DiskCacheStore, HostCodeIsServedOnlyFromEntryFilesNobodyElseCanWrite) {
  const fs::path root = dir / "root";
  const auto [host, cubin] = publish_host_and_cubin(options(root));
  ASSERT_TRUE(DiskCache(options(root)).find(host.identity)) << "as published: mode 0644";
  const fs::path host_file = root / "entries" / (host.identity.hex() + ".zjc");
  const fs::path cubin_file = root / "entries" / (cubin.identity.hex() + ".zjc");
  const auto refused = [&](const std::string& why) {
    warnings.clear();
    DiskCache cache(options(root));
    EXPECT_FALSE(cache.find(host.identity)) << why;
    EXPECT_FALSE(cache.find(host.identity)) << why;  // asked again: reported once
    ASSERT_EQ(warnings.size(), 1u) << why;
    EXPECT_NE(warnings[0].find(host_file.string()), std::string::npos) << warnings[0];
    EXPECT_NE(warnings[0].find(why), std::string::npos) << warnings[0];
    EXPECT_NE(warnings[0].find("compiling it instead"), std::string::npos) << warnings[0];
  };
  for (const fs::perms writable : {fs::perms::others_write, fs::perms::group_write}) {
    fs::permissions(host_file, writable, fs::perm_options::add);
    fs::permissions(cubin_file, writable, fs::perm_options::add);
    refused("other users can write it");
    DiskCache cache(options(root));
    EXPECT_TRUE(cache.find(cubin.identity)) << "a cubin's file mode does not matter";
    fs::permissions(host_file, writable, fs::perm_options::remove);
  }
  fs::create_hard_link(host_file, dir / "another-name");
  refused("it has 2 links");
  fs::remove(dir / "another-name");
  if (::geteuid() == 0) {  // only root can give a file away
    ASSERT_EQ(::chown(host_file.c_str(), 12345, 12345), 0);
    refused("owned by uid 12345");
    ASSERT_EQ(::chown(host_file.c_str(), 0, 0), 0);
  }
  // The same rules for a read-only layer (a pack copied with cp -a keeps others' modes).
  fs::permissions(host_file, fs::perms::others_write, fs::perm_options::add);
  DiskCacheOptions layered = options(dir / "empty-root");
  layered.read_only_layers = {root};
  warnings.clear();
  DiskCache layer(layered);
  EXPECT_FALSE(layer.find(host.identity));
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("other users can write it"), std::string::npos) << warnings[0];
  fs::permissions(host_file, fs::perms::others_write, fs::perm_options::remove);
  DiskCache sound(layered);
  EXPECT_TRUE(sound.find(host.identity));
}

// A root others may write, accepted (ZEROJIT_CACHE_ALLOW_SHARED): its cubins are served, its host
// code never, and the refusal is said once per entry, however often the key is asked for.
TEST_F(DiskCacheStore, ASharedRootRefusesHostCodeOnceAndServesCubins) {
  const fs::path root = dir / "shared";
  const auto [host, cubin] = publish_host_and_cubin(options(root));
  fs::permissions(root, fs::perms::group_write | fs::perms::others_write, fs::perm_options::add);
  DiskCacheOptions shared = options(root);
  shared.allow_shared_root = true;
  warnings.clear();
  DiskCache cache(shared);
  for (int ask = 0; ask < 3; ++ask) {
    EXPECT_FALSE(cache.find(host.identity)) << "host code from a root others may write";
    EXPECT_TRUE(cache.find(cubin.identity)) << "a cubin from it is served";
  }
  std::size_t refusals = 0;
  for (const std::string& warning : warnings) {
    if (warning.find("it is host code") != std::string::npos) ++refusals;
  }
  EXPECT_EQ(refusals, 1u) << "the refusal is said once for the entry";
  fs::permissions(root, fs::perms::group_write | fs::perms::others_write, fs::perm_options::remove);
}

}  // namespace
}  // namespace zerojit::test
