// The kernel contract (DESIGN.md): one owner object per kernel, holding its dispatch
// (descriptors -> key), its program (key -> source to compile), its plan (arguments -> launch
// spec), and the executor cache that makes a warmed launch a hash lookup.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "zerojit/backend.hpp"
#include "zerojit/compiler.hpp"
#include "zerojit/error.hpp"
#include "zerojit/executor_cache.hpp"
#include "zerojit/key.hpp"
#include "zerojit/launch.hpp"
#include "zerojit/monitor.hpp"
#include "zerojit/parallel.hpp"
#include "zerojit/program.hpp"
#include "zerojit/runtime.hpp"

namespace zerojit {

// What warming one key did.
struct WarmResult {
  ArtifactOrigin origin = ArtifactOrigin::compiled;
  double compile_seconds = 0.0;  // NVRTC time (0 unless compiled)
  double seconds = 0.0;          // wall time of the whole warm call
  int devices_loaded = 0;
};

// The untyped half of every kernel: name, counters, the artifact tiers (memory -> store ->
// NVRTC), and the launch-argument check.
class KernelBase {
 public:
  explicit KernelBase(std::string name);
  virtual ~KernelBase();
  KernelBase(const KernelBase&) = delete;
  KernelBase& operator=(const KernelBase&) = delete;

  const std::string& name() const { return name_; }
  KernelCounters counters() const;

  // Number of keys with an executor on some device.
  virtual std::size_t executor_count() const = 0;
  // Drops executors and in-memory artifacts and zeroes the counters. For tests only, with no
  // launch running.
  virtual void reset_for_testing() = 0;

 protected:
  // The artifact for a program, from the first tier that has it: this kernel's memory, the
  // artifact store, NVRTC (publishing to the store). Threads asking for one identity share
  // one compile. If `runtime_jit_checked` is false and the monitor is armed, an NVRTC compile
  // is reported to it first (and refused in error mode).
  std::shared_ptr<const CompiledArtifact> obtain_artifact(const Program& program,
                                                          std::string_view arch,
                                                          ArtifactOrigin& origin,
                                                          bool runtime_jit_checked,
                                                          const std::string& descriptors);
  // Whether the in-memory tier already holds this program's artifact for `arch`.
  bool has_artifact_in_memory(const Program& program, std::string_view arch);

  // Throws LaunchError when the packed arguments disagree with the function's parameters.
  void check_arguments(const LoadedFunction& function, const KernelArgs& args,
                       const std::string& key_text) const;
  void check_arguments(const LoadedFunction& function, const KernelArgs& args) const {
    if (function.param_count < 0) return;
    if (function.param_count == args.count()) {
      bool same = true;
      for (int i = 0; i < args.count(); ++i) {
        same = same && function.param_sizes[static_cast<std::size_t>(i)] == args.size(i);
      }
      if (same) return;
    }
    check_arguments(function, args, std::string{});
  }

  void reset_base_for_testing();

  struct Stats {
    std::atomic<std::uint64_t> hits{0};
    std::atomic<std::uint64_t> misses{0};
    std::atomic<std::uint64_t> compiles{0};
    std::atomic<std::uint64_t> compile_nanoseconds{0};
    std::atomic<std::uint64_t> disk_loads{0};
    std::atomic<std::uint64_t> loads{0};
    std::atomic<std::uint64_t> runtime_jit{0};
  };
  Stats stats_;

 private:
  std::string name_;
  std::mutex artifacts_mutex_;
  std::map<ProgramIdentity, std::shared_future<std::shared_ptr<const CompiledArtifact>>> artifacts_;
};

template <CompileKey KeyT, Described DescriptorsT>
class JitKernel : public KernelBase {
 public:
  using Key = KeyT;
  using Descriptors = DescriptorsT;

  struct CompileOutcome {
    Key key;
    std::shared_ptr<const CompiledArtifact> artifact;  // null on failure
    ArtifactOrigin origin = ArtifactOrigin::compiled;
    std::string error;  // the failure's message (names kernel and key)
  };

  using KernelBase::KernelBase;

  // The single place where specialization is decided: runtime descriptors -> key. Pure.
  // Throws InvalidArgument for descriptors the kernel cannot take.
  virtual Key dispatch(const Descriptors& descriptors) const = 0;
  // The source, name expressions and options that compile `key`. Throws zerojit::Error for a
  // key the kernel cannot build (e.g. a field outside its supported values).
  virtual Program program(const Key& key) const = 0;

  std::string key_text(const Key& key) const { return describe(key); }

  // The artifact for `key` on `arch` (memory -> store -> NVRTC). An NVRTC compile after
  // warmup is a monitor event.
  std::shared_ptr<const CompiledArtifact> compile(const Key& key, std::string_view arch) {
    ArtifactOrigin origin;
    return compile_with_origin(key, arch, origin);
  }

  std::shared_ptr<const CompiledArtifact> compile_with_origin(const Key& key, std::string_view arch,
                                                              ArtifactOrigin& origin) {
    return obtain_artifact(program(key), arch, origin, false, std::string{});
  }

  // Compiles many keys, `jobs` at a time. A failing key does not stop the others.
  std::vector<CompileOutcome> compile_many(std::span<const Key> keys, std::string_view arch,
                                           int jobs = 0) {
    std::vector<CompileOutcome> outcomes(keys.size());
    parallel_for(keys.size(), jobs, [&](std::size_t i) {
      outcomes[i].key = keys[i];
      try {
        outcomes[i].artifact = compile_with_origin(keys[i], arch, outcomes[i].origin);
      } catch (const std::exception& error) {
        outcomes[i].error = error.what();
      }
    });
    return outcomes;
  }

  // Compiles `key` for `arch` and loads it, functions resolved eagerly, on each device.
  WarmResult warm(const Key& key, std::string_view arch, std::span<const int> devices) {
    const auto start = std::chrono::steady_clock::now();
    WarmResult result;
    const auto artifact = compile_with_origin(key, arch, result.origin);
    if (result.origin == ArtifactOrigin::compiled)
      result.compile_seconds = artifact->compile_seconds;
    const Program prog = program(key);
    for (int device : devices) {
      if (executors_.find(key, device) == nullptr) load_on_device(key, *artifact, prog, device);
      ++result.devices_loaded;
    }
    result.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return result;
  }

  // The executor for (key, device): a lock-free lookup when warmed; otherwise compile and
  // load (a monitor event after warmup; always an error while the stream captures a graph).
  const LoadedFunction& get_or_compile(const Key& key, LaunchTarget target,
                                       const Descriptors* descriptors = nullptr) {
    if (const LoadedFunction* function = executors_.find(key, target.device)) return *function;
    return load_slow(key, target, descriptors);
  }

  // Carries out a plan (see launch.hpp for the three shapes and what each returns).
  void launch(const LaunchSpec<Key>& spec, LaunchTarget target,
              const Descriptors* descriptors = nullptr) {
    launch_packed(spec.key, spec.geometry, spec.args, target, descriptors);
  }

  template <class Outputs>
  Outputs launch(LaunchSpecWithOutputs<Key, Outputs> spec, LaunchTarget target,
                 const Descriptors* descriptors = nullptr) {
    launch_packed(spec.key, spec.geometry, spec.args, target, descriptors);
    return std::move(spec.outputs);
  }

  template <class Outputs, class Finalizer>
  auto launch(LaunchSpecWithFinalizer<Key, Outputs, Finalizer> spec, LaunchTarget target,
              const Descriptors* descriptors = nullptr) {
    launch_packed(spec.key, spec.geometry, spec.args, target, descriptors);
    return spec.finalize(spec.outputs);
  }

  std::size_t executor_count() const override { return executors_.size(); }

  void reset_for_testing() override {
    executors_.clear();
    reset_base_for_testing();
  }

 private:
  // The hot path: lookup, argument check, launch. No lock, no allocation on a hit.
  void launch_packed(const Key& key, const LaunchGeometry& geometry, const KernelArgs& args,
                     LaunchTarget target, const Descriptors* descriptors) {
    if (geometry.empty()) return;
    const LoadedFunction* function = executors_.find(key, target.device);
    if (function == nullptr) {
      function = &load_slow(key, target, descriptors);
    } else {
      stats_.hits.fetch_add(1, std::memory_order_relaxed);
    }
    check_arguments(*function, args);
    Runtime::instance().backend().launch(*function, geometry, args, target.stream);
  }

  const LoadedFunction& load_slow(const Key& key, LaunchTarget target,
                                  const Descriptors* descriptors) {
    stats_.misses.fetch_add(1, std::memory_order_relaxed);
    Backend& backend = Runtime::instance().backend();
    const Program prog = program(key);
    const std::string described = descriptors != nullptr ? describe(*descriptors) : std::string{};
    if (backend.is_capturing(target.stream)) {
      throw RuntimeJitError(name(), prog.key_text, described,
                            "a compile or module load was requested while the stream is "
                            "capturing a CUDA graph; warm this key up before capturing");
    }
    const std::string arch = Runtime::instance().target_arch(target.device);
    Monitor& monitor = Monitor::instance();
    if (monitor.armed()) {
      stats_.runtime_jit.fetch_add(1, std::memory_order_relaxed);
      const bool compiled_already = has_artifact_in_memory(prog, arch);
      monitor.on_jit(JitEvent{compiled_already ? JitEventKind::load : JitEventKind::compile, name(),
                              prog.key_text, described});
    }
    ArtifactOrigin origin;
    const auto artifact = obtain_artifact(prog, arch, origin, true, described);
    return load_on_device(key, *artifact, prog, target.device);
  }

  const LoadedFunction& load_on_device(const Key& key, const CompiledArtifact& artifact,
                                       const Program& prog, int device) {
    std::lock_guard lock(load_mutex_);
    if (const LoadedFunction* function = executors_.find(key, device)) return *function;
    const std::string& entry = artifact.lowered(prog.name_expressions.front());
    LoadedFunction function = Runtime::instance().backend().load(artifact, entry, device);
    stats_.loads.fetch_add(1, std::memory_order_relaxed);
    return executors_.insert(key, device, function);
  }

  ExecutorCache<Key> executors_;
  std::mutex load_mutex_;  // one module load at a time per kernel; never held on the hot path
};

}  // namespace zerojit
