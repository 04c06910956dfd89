// A warmup defers a key whose compile lock another process holds (docs/CACHE.md, "Warmups
// share the work"), against a store that says which identities are held and records every
// question asked of it, in order: the other keys are tried first, the held one is locked
// (waited for) only after them, and each key is reported once.
#include <algorithm>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "support/core_fixture.hpp"

namespace zerojit {
namespace {

class HeldStore final : public ArtifactStore {
 public:
  explicit HeldStore(std::set<std::string> held) : held_(std::move(held)) {}

  std::string describe() const override { return "a store with held locks"; }
  std::optional<CompiledArtifact> find(const ProgramIdentity& identity) override {
    std::lock_guard lock(mutex_);
    const auto found = entries_.find(identity.hex());
    if (found == entries_.end()) return std::nullopt;
    return found->second;
  }
  void publish(const CompiledArtifact& artifact) noexcept override {
    std::lock_guard lock(mutex_);
    events_.push_back("publish " + artifact.identity.hex());
    entries_.insert_or_assign(artifact.identity.hex(), artifact);
  }
  // The waiting lock: the holder is taken to have timed out (nothing published), so the
  // caller compiles by itself, as DiskCache::lock does after its bound.
  std::unique_ptr<CompileGuard> lock(const ProgramIdentity& identity) override {
    std::lock_guard lock(mutex_);
    events_.push_back("lock " + identity.hex());
    return nullptr;
  }
  LockAttempt try_lock(const ProgramIdentity& identity) override {
    std::lock_guard lock(mutex_);
    events_.push_back("try " + identity.hex());
    if (held_.count(identity.hex())) return {.guard = nullptr, .held_elsewhere = true};
    return {.guard = std::make_unique<CompileGuard>()};
  }
  std::optional<std::string> recall_nvrtc_version(std::string_view) override {
    return std::nullopt;
  }
  void remember_nvrtc_version(std::string_view, std::string_view) noexcept override {}

  std::vector<std::string> events() const {
    std::lock_guard lock(mutex_);
    return events_;
  }

 private:
  mutable std::mutex mutex_;
  std::set<std::string> held_;
  std::map<std::string, CompiledArtifact> entries_;
  std::vector<std::string> events_;
};

class DeferredWarmup : public testing::CoreTest {
 protected:
  void TearDown() override {
    Runtime::instance().set_artifact_store(nullptr);
    CoreTest::TearDown();
  }
};

TEST_F(DeferredWarmup, AHeldKeyIsTriedFirstWaitedForLastAndCountedOnce) {
  WarmupRegistry registry;
  examples::register_examples(registry);
  const Manifest manifest = registry.manifest();
  ASSERT_GE(manifest.size(), 3u);
  const std::string nvrtc = Runtime::instance().nvrtc_version();
  std::vector<std::string> identities;
  for (const ManifestEntry& entry : manifest.entries) {
    identities.push_back(compute_identity(entry.program(), "sm_90a", nvrtc).hex());
  }
  // Every key but one is held, so that whatever order the warmup starts them in, the one
  // free key is done before any held one.
  std::set<std::string> held(identities.begin() + 1, identities.end());
  auto store = std::make_shared<HeldStore>(held);
  Runtime::instance().set_artifact_store(store);

  std::vector<std::string> done;  // "<kernel> <key>" in the order the keys finished
  const WarmupReport report = registry.warmup(
      WarmupOptions{.compile_only = true,
                    .jobs = 1,
                    .progress = ProgressStyle::none,
                    .on_progress = [&](const WarmupProgress& progress) {
                      done.push_back(progress.key->kernel + " " + progress.key->key);
                    }});
  ASSERT_TRUE(report.ok()) << report.to_json();
  EXPECT_EQ(report.deferred, static_cast<int>(held.size()));
  EXPECT_EQ(report.compiled(), static_cast<int>(manifest.size())) << "each key once";
  EXPECT_EQ(report.total_keys(), static_cast<int>(manifest.size()));
  ASSERT_EQ(done.size(), manifest.size()) << "each key reported once, when done";
  EXPECT_EQ(done.front(), manifest.entries[0].kernel->name() + " " + manifest.entries[0].key_text);

  // Each key tried once without waiting, all before the first wait; then one wait per held
  // key, and none for the free one (it was locked by the try).
  const std::vector<std::string> events = store->events();
  std::size_t tries = 0, first_lock = events.size();
  std::set<std::string> locked;
  for (std::size_t i = 0; i < events.size(); ++i) {
    if (events[i].starts_with("try ")) {
      ++tries;
      EXPECT_LT(i, first_lock) << "a try after a wait: " << events[i];
    } else if (events[i].starts_with("lock ")) {
      first_lock = std::min(first_lock, i);
      EXPECT_TRUE(locked.insert(events[i].substr(5)).second) << "waited twice: " << events[i];
    }
  }
  EXPECT_EQ(tries, manifest.size());
  EXPECT_EQ(locked, held);
  EXPECT_EQ(std::count_if(events.begin(), events.end(),
                          [](const std::string& e) { return e.starts_with("publish "); }),
            static_cast<std::ptrdiff_t>(manifest.size()));
}

TEST_F(DeferredWarmup, OnlyWarmDefersAndOnlyUnderItsScope) {
  WarmupRegistry registry;
  examples::register_examples(registry);
  const Manifest manifest = registry.manifest();
  const std::string nvrtc = Runtime::instance().nvrtc_version();
  const ManifestEntry& entry = manifest.entries.at(0);
  const std::string identity = compute_identity(entry.program(), "sm_90a", nvrtc).hex();
  auto store = std::make_shared<HeldStore>(std::set<std::string>{identity});
  Runtime::instance().set_artifact_store(store);

  {
    DeferHeldKeys defer;
    const WarmResult deferred = entry.warm("sm_90a", {});
    EXPECT_TRUE(deferred.deferred);
  }
  EXPECT_EQ(store->events(), std::vector<std::string>{"try " + identity});
  // Outside the scope the same key waits at the lock (here: its holder timed out) and
  // compiles; the claim the deferred call gave back is no obstacle.
  const WarmResult warmed = entry.warm("sm_90a", {});
  EXPECT_FALSE(warmed.deferred);
  EXPECT_EQ(warmed.origin, ArtifactOrigin::compiled);
  EXPECT_EQ(store->events(), (std::vector<std::string>{"try " + identity, "lock " + identity,
                                                       "publish " + identity}));
}

}  // namespace
}  // namespace zerojit
