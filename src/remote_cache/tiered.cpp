// The disk cache in front of Redis (docs/CACHE.md, "The remote tier"). The kernel core's order
// is fixed (src/kernel.cpp): find; on a miss lock, find again, compile, publish, release. Redis
// is asked only in the find that follows a lock of this store: the local cross-process lock is
// held then, so the other processes of the host wait for this one and then find its result on
// disk, and N processes of a host make at most one remote request per identity.
#include <map>
#include <mutex>

#include "environment.hpp"
#include "zerojit/disk_cache.hpp"
#include "zerojit/error.hpp"
#include "zerojit/log.hpp"
#include "zerojit/remote_cache.hpp"

namespace zerojit {

// The identities between lock() and the release of their guard, and what Redis said.
struct TieredStore::Pending {
  struct Slot {
    bool asked = false;  // the remote was asked already (once per lock)
    std::unique_ptr<RemoteLock> lock;
  };
  std::mutex mutex;
  std::map<std::string, Slot> slots;  // by identity hex
};

namespace {

class TieredGuard final : public CompileGuard {
 public:
  TieredGuard(std::shared_ptr<TieredStore::Pending> pending, std::string name,
              std::unique_ptr<CompileGuard> local, bool owns_slot)
      : pending_(std::move(pending)),
        name_(std::move(name)),
        local_(std::move(local)),
        owns_slot_(owns_slot) {}
  // The remote lock goes first (after the publish the core made before releasing), then the
  // local one, so a local waiter that wakes finds the entry on disk and asks Redis nothing.
  ~TieredGuard() override {
    if (owns_slot_) {
      std::unique_ptr<RemoteLock> remote;
      {
        std::lock_guard lock(pending_->mutex);
        auto it = pending_->slots.find(name_);
        if (it != pending_->slots.end()) {
          remote = std::move(it->second.lock);
          pending_->slots.erase(it);
        }
      }
      remote.reset();
    }
    local_.reset();
  }

 private:
  std::shared_ptr<TieredStore::Pending> pending_;
  std::string name_;
  std::unique_ptr<CompileGuard> local_;
  bool owns_slot_;
};

}  // namespace

TieredStore::TieredStore(std::shared_ptr<ArtifactStore> local, std::shared_ptr<RemoteCache> remote)
    : local_(std::move(local)), remote_(std::move(remote)), pending_(std::make_shared<Pending>()) {}

TieredStore::~TieredStore() = default;

std::string TieredStore::describe() const {
  return (local_ ? local_->describe() : std::string("memory only")) + "; " + remote_->describe();
}

std::optional<CompiledArtifact> TieredStore::find(const ProgramIdentity& identity) {
  if (local_) {
    if (auto found = local_->find(identity)) return found;
  }
  const std::string name = identity.hex();
  {
    std::lock_guard lock(pending_->mutex);
    auto it = pending_->slots.find(name);
    if (it == pending_->slots.end() || it->second.asked) return std::nullopt;
    it->second.asked = true;
  }
  // Host code (an exported CuTeDSL object) is neither taken from nor sent to Redis unless the
  // deployment opts in: the remote refuses it (RemoteCacheOptions::host_code).
  RemoteCache::Obtained obtained = remote_->obtain(identity);
  if (obtained.artifact) {
    // Verified by obtain; kept on disk so that this host asks Redis for it once.
    if (local_) local_->publish(*obtained.artifact);
    return std::move(obtained.artifact);
  }
  if (obtained.lock) {
    std::lock_guard lock(pending_->mutex);
    auto it = pending_->slots.find(name);
    if (it != pending_->slots.end()) it->second.lock = std::move(obtained.lock);
  }
  return std::nullopt;
}

void TieredStore::publish(const CompiledArtifact& artifact) noexcept {
  if (local_) local_->publish(artifact);
  remote_->store(artifact);
}

std::unique_ptr<CompileGuard> TieredStore::lock(const ProgramIdentity& identity) {
  // The local lock first (it may wait for another process of this host); a store that cannot
  // lock (read-only root, memory only) still gets the remote's single flight.
  return guard_with(identity, local_ ? local_->lock(identity) : nullptr);
}

// Only the local lock is tried without waiting: another process of this host holds it. The
// remote's lock is taken in the find that follows (its wait is bounded by its own expiry).
LockAttempt TieredStore::try_lock(const ProgramIdentity& identity) {
  LockAttempt local = local_ ? local_->try_lock(identity) : LockAttempt{};
  if (local.held_elsewhere) return local;
  return {.guard = guard_with(identity, std::move(local.guard))};
}

std::unique_ptr<CompileGuard> TieredStore::guard_with(const ProgramIdentity& identity,
                                                      std::unique_ptr<CompileGuard> local) {
  std::string name = identity.hex();
  bool owns = false;
  {
    std::lock_guard lock(pending_->mutex);
    owns = pending_->slots.try_emplace(name).second;
  }
  return std::make_unique<TieredGuard>(pending_, std::move(name), std::move(local), owns);
}

std::optional<std::string> TieredStore::recall_nvrtc_version(std::string_view fingerprint) {
  return local_ ? local_->recall_nvrtc_version(fingerprint) : std::nullopt;
}

void TieredStore::remember_nvrtc_version(std::string_view fingerprint,
                                         std::string_view version) noexcept {
  if (local_) local_->remember_nvrtc_version(fingerprint, version);
}

std::vector<std::string> TieredStore::recorded_compiler_versions(Language language,
                                                                 std::string_view arch) {
  return local_ ? local_->recorded_compiler_versions(language, arch) : std::vector<std::string>{};
}

ArtifactStore* local_store_of(ArtifactStore* store) {
  if (auto* tiered = dynamic_cast<TieredStore*>(store)) return tiered->local().get();
  return store;
}

RemoteCache* remote_cache_of(ArtifactStore* store) {
  auto* tiered = dynamic_cast<TieredStore*>(store);
  return tiered != nullptr ? tiered->remote().get() : nullptr;
}

std::shared_ptr<ArtifactStore> with_remote_cache_from_environment(
    std::shared_ptr<ArtifactStore> local) {
  try {
    RemoteCacheOptions options = default_remote_cache_options();
    if (options.url.empty()) return local;
    auto remote = std::make_shared<RemoteCache>(std::move(options));
    return std::make_shared<TieredStore>(std::move(local), std::move(remote));
  } catch (const Error& error) {
    log_warning("remote-cache", std::string(error.what()) + "; the remote cache is not used");
    return local;
  }
}

}  // namespace zerojit
