// The tier between a kernel's in-memory artifacts and NVRTC: a store of compiled artifacts
// shared across processes (the disk cache implements it). The core only needs this interface.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "zerojit/compiler.hpp"

namespace zerojit {

// Released when it dies: while held, other processes wait instead of compiling the same
// identity.
class CompileGuard {
 public:
  virtual ~CompileGuard() = default;
};

// What a lock that does not wait found (ArtifactStore::try_lock).
struct LockAttempt {
  std::unique_ptr<CompileGuard> guard;  // taken: this process compiles (null: cannot lock)
  bool held_elsewhere = false;          // another process holds it now (guard is null)
};

class ArtifactStore {
 public:
  virtual ~ArtifactStore() = default;
  virtual std::string describe() const = 0;

  // A verified artifact for the identity, or std::nullopt. A damaged or foreign entry is
  // reported, set aside and treated as a miss; it is never returned.
  virtual std::optional<CompiledArtifact> find(const ProgramIdentity& identity) = 0;

  // Publishes an artifact. I/O trouble (disk full, permissions) is a warning, never a throw:
  // the compiled kernel is used either way.
  virtual void publish(const CompiledArtifact& artifact) noexcept = 0;

  // Cross-process single flight for one identity; nullptr when the store cannot lock.
  virtual std::unique_ptr<CompileGuard> lock(const ProgramIdentity& identity) = 0;

  // The same lock, but never waiting for another process: held_elsewhere when one holds it.
  // Warmup asks this first, so that it compiles the keys nobody holds while other processes
  // compile theirs, and waits (lock) for the held ones only at the end (docs/CACHE.md,
  // "Warmups share the work"). A store with no such lock waits here as lock does.
  virtual LockAttempt try_lock(const ProgramIdentity& identity) { return {lock(identity), false}; }

  // A remembered NVRTC version for a library fingerprint (see Runtime::nvrtc_version), so a
  // process that finds every artifact on disk never has to load NVRTC to name its version.
  virtual std::optional<std::string> recall_nvrtc_version(std::string_view fingerprint) = 0;
  virtual void remember_nvrtc_version(std::string_view fingerprint,
                                      std::string_view version) noexcept = 0;

  // The compiler versions the stored artifacts of `language` were compiled with for `arch`
  // (for CUDA C++, NVRTC's versions, whatever the arch), as the store records them. A process
  // that cannot load the compiler at all (a serving image with only an ahead-of-time pack, no
  // NVRTC, no Triton) computes its identities with the version when exactly one is recorded
  // (Runtime::compiler_version), so that the pack's entries are found and verified.
  virtual std::vector<std::string> recorded_compiler_versions(Language /*language*/,
                                                              std::string_view /*arch*/) {
    return {};
  }
};

}  // namespace zerojit
