// The kernel contract (DESIGN.md), whole: every part a kernel has, in one place.
//
// A kernel is one owner class, a per-process singleton deriving from JitKernel<Owner, Key,
// Descriptors>, whose arguments are declared once (arguments.hpp): ScaleAddArguments<TensorRef>
// is the call (ScaleAddArgs), ScaleAddArguments<TensorDesc> the descriptors. It writes only what
// is its own:
//
//   class ScaleAddKernel final : public JitKernel<ScaleAddKernel, ScaleAddKey, ScaleAddDescriptors>
//   {
//    public:
//     // descriptors -> key: the single place specialization is decided. Pure.
//     ScaleAddKey dispatch(const ScaleAddDescriptors& d) const override;
//     // key -> what NVRTC compiles: make_program(key, source, instantiate(function, key)).
//     Program program(const ScaleAddKey& key) const override;
//     // (the key dispatch chose, the arguments) -> launch spec (launch.hpp): validate with
//     // checks(), pack the argument block, set the geometry and the device. The base has
//     // already dispatched on descriptors_of(args): plan never calls dispatch.
//     LaunchSpec<ScaleAddKey> plan(const ScaleAddKey& key, const ScaleAddArgs& args) const;
//     // the runtime descriptors a configuration can produce (space.hpp), built from what the
//     // configuration decides (the kernel's gate).
//     WarmupSpace<ScaleAddDescriptors> warmup_space(...) const;
//    private:
//     friend JitKernel;
//     ScaleAddKernel() : JitKernel("examples.scale_add", embedded_files()) {}  // the name, once
//   };
//
// and gets from the base: the singleton (ScaleAddKernel::instance()), a call's launch spec
// (launch_spec(args): dispatch on the call's descriptors, then the owner's plan for that key, so
// the key a call launches is the key warmup computes for the same descriptors), a launch on the
// plan's device and a stream (kernel(args, stream)), compile / compile_many / warm for warmup,
// the executor cache (a warmed launch is a lock-free lookup with no allocation), the artifact
// tiers (memory -> artifact store -> NVRTC) and the JIT monitor, consulted on the one slow path
// (KernelBase::acquire, src/kernel.cpp).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "zerojit/arguments.hpp"
#include "zerojit/backend.hpp"
#include "zerojit/background.hpp"
#include "zerojit/checks.hpp"
#include "zerojit/compiler.hpp"
#include "zerojit/embedded.hpp"
#include "zerojit/error.hpp"
#include "zerojit/executor_cache.hpp"
#include "zerojit/key.hpp"
#include "zerojit/launch.hpp"
#include "zerojit/monitor.hpp"
#include "zerojit/parallel.hpp"
#include "zerojit/program.hpp"
#include "zerojit/runtime.hpp"
#include "zerojit/space.hpp"

namespace zerojit {

// What warming one key did.
struct WarmResult {
  ArtifactOrigin origin = ArtifactOrigin::compiled;
  double compile_seconds = 0.0;  // NVRTC time (0 unless compiled)
  double seconds = 0.0;          // wall time of the whole warm call
  int devices_loaded = 0;
  // Not warmed yet: another process holds the key's compile lock, and the call was made under
  // DeferHeldKeys. Nothing else of the result is meaningful; warm the key again later.
  bool deferred = false;
};

// While one lives, the warm calls of this thread do not wait for another process compiling
// their key (its compile lock in the artifact store held): they return at once with
// WarmResult::deferred, so that warmup compiles the keys nobody holds first and comes back to
// the held ones at the end (docs/CACHE.md, "Warmups share the work"). Without it, N ranks
// warming one cold cache in the same order all wait on whichever rank locked each key first,
// and warm no faster than one. Only warm defers; every other acquire waits as before.
class DeferHeldKeys {
 public:
  DeferHeldKeys();
  ~DeferHeldKeys();
  DeferHeldKeys(const DeferHeldKeys&) = delete;
  DeferHeldKeys& operator=(const DeferHeldKeys&) = delete;
  static bool active();

 private:
  bool previous_;
};

// A key of a kernel named by its text (a learned miss's: misses.hpp), with what warmup needs.
struct NamedKey {
  std::string key_text;
  std::string key_json;
  std::function<WarmResult(std::string_view arch, std::span<const int> devices)> warm;
  std::function<Program()> program;
};

// The runtime descriptors behind a launch, described only when a message needs them (a miss,
// a monitor event): the hit path never builds the text, nor even the descriptors. Refers to
// the object it was made from, which must outlive it.
class DescriptorText {
 public:
  DescriptorText() = default;
  // From a descriptors struct.
  template <Described D>
  static DescriptorText of(const D& descriptors) {
    return DescriptorText(
        [](const void* object) { return describe(*static_cast<const D*>(object)); }, &descriptors);
  }
  // From a call's arguments (declared with roles, arguments.hpp: they describe themselves as
  // their descriptors do).
  template <DeclaredArguments Args>
  static DescriptorText of_args(const Args& args) {
    return DescriptorText(
        [](const void* object) { return describe(*static_cast<const Args*>(object)); }, &args);
  }
  std::string operator()() const { return render_ != nullptr ? render_(object_) : std::string{}; }

 private:
  DescriptorText(std::string (*render)(const void*), const void* object)
      : render_(render), object_(object) {}
  std::string (*render_)(const void*) = nullptr;
  const void* object_ = nullptr;
};

// The untyped half of every kernel: name, embedded files, counters, the artifact tiers and
// the one slow path. Typed executors stay in JitKernel; the slow path reaches them through
// find_executor / insert_executor with the key passed by address.
class KernelBase {
 public:
  virtual ~KernelBase();
  KernelBase(const KernelBase&) = delete;
  KernelBase& operator=(const KernelBase&) = delete;

  const std::string& name() const { return name_; }
  // Where the kernel's sources resolve (nullptr for a kernel whose programs name their own).
  const EmbeddedFileSet* files() const { return files_; }
  KernelCounters counters() const { return stats_.read(name_); }

  // Number of keys with an executor on some device.
  virtual std::size_t executor_count() const = 0;

  // A call whose arguments need another specialization than the one its key compiles (a
  // Triton key's program compiled `n` divisible by 16 and the call passes 17): counted as a
  // miss, reported to the monitor (a RuntimeJitError in error mode), and always refused with
  // InvalidArgument naming `argument` and the class (`detail`: "is 2, and the program compiled
  // it as the constant 1"), since no warmed code fits the call and its key names no other.
  // Nothing is compiled and nothing is launched.
  [[noreturn]] void refuse_specialization(const std::string& key_text, const std::string& argument,
                                          const std::string& detail,
                                          const std::string& descriptors = {});
  // Drops executors and in-memory artifacts and zeroes the counters. For tests only, with no
  // launch running and no background compile of the kernel queued (BackgroundCompiles).
  virtual void reset_for_testing() = 0;

  // In the monitor's fallback mode, for a launch whose key (`key_text`) missed while the
  // kernel's fallback for it is warmed: whether the fallback serves the call. Yes while the key
  // compiles in the background (queued now by `compile`, unless the stream captures a graph, in
  // which case nothing compiles, or the queue is full) and after that compile failed (said once;
  // the fallback keeps serving); no once the key's artifact is ready, so that the caller takes
  // the usual miss, which loads it (a module load, on the calling thread, whose stream is not
  // capturing) and the key serves itself from then on. Each serving call counts as a miss; the
  // first is recorded as a learned miss (misses.hpp).
  bool serve_with_fallback(const std::string& key_text, const std::string& key_json,
                           const std::string& descriptors, bool capturing,
                           std::function<void()> compile);
  // A call served by the fallback serve_with_fallback chose (counted per kernel).
  void count_fallback_launch() { stats_.fallback_launches.fetch_add(1, std::memory_order_relaxed); }

  // The key whose text is `key_text` (describe()'s), or nothing when the text names no key of
  // this kernel (or its keys cannot be read back from text).
  virtual std::optional<NamedKey> key_named(std::string_view key_text) {
    (void)key_text;
    return std::nullopt;
  }

 protected:
  KernelBase(std::string name, const EmbeddedFileSet* files);

  // One request for the compiled program of a key, and optionally its function on a device.
  struct Acquire {
    const void* key = nullptr;  // the typed key, for find_executor / insert_executor
    const Program* program = nullptr;
    std::string_view arch{};
    int device = -1;         // load on this device; -1: compile (and store) only
    bool launching = false;  // a launch's miss: counted as one, refused while capturing
    bool may_defer = false;  // warm's: under DeferHeldKeys, a key held elsewhere is deferred
    cuda::Stream stream = nullptr;
    DescriptorText descriptors{};
  };
  struct Acquired {
    std::shared_ptr<const CompiledArtifact> artifact;
    ArtifactOrigin origin = ArtifactOrigin::compiled;
    const LoadedFunction* function = nullptr;  // when a device was asked for
    bool deferred = false;                     // may_defer and held by another process: no artifact
  };

  // The slow path, for launches that missed and for warmup alike: the artifact from the first
  // tier that has it (this kernel's memory, the artifact store, NVRTC; threads asking for one
  // identity share one compile, processes one through the store's lock), then the module
  // loaded on the device. The JIT monitor is consulted here and nowhere else: once armed, a
  // request that must compile, or load a module, is reported (and refused in error mode) before
  // the work is done. A launch is refused while its stream captures a CUDA graph.
  Acquired acquire(const Acquire& request);

  // The key's fields as JSON (a runtime miss is recorded with them: misses.hpp).
  virtual std::string key_json(const void* key) const = 0;
  virtual const LoadedFunction* find_executor(const void* key, int device) const = 0;
  virtual const LoadedFunction& insert_executor(const void* key, int device,
                                                const LoadedFunction& function) = 0;

  // Launches a packed call on a loaded function in the function's form (PackedCall says what
  // each form takes); the arguments are checked first.
  void launch_loaded(const LoadedFunction& function, PackedCall& call, cuda::Stream stream) const;

  // Throws LaunchError when the packed arguments disagree with the function's parameters.
  void check_arguments(const LoadedFunction& function, const KernelArgs& args) const {
    if (function.param_count < 0) return;
    if (function.param_count == args.count()) {
      bool same = true;
      for (int i = 0; i < args.count(); ++i) {
        same = same && function.param_sizes[static_cast<std::size_t>(i)] == args.size(i);
      }
      if (same) return;
    }
    refuse_arguments(function, args);
  }

  void reset_base_for_testing();

  KernelStats stats_;

 private:
  [[noreturn]] void refuse_arguments(const LoadedFunction& function, const KernelArgs& args) const;
  const LoadedFunction& load_on_device(const Acquire& request, const CompiledArtifact& artifact);

  std::string name_;
  const EmbeddedFileSet* files_;
  std::mutex artifacts_mutex_;
  std::map<ProgramIdentity, std::shared_future<std::shared_ptr<const CompiledArtifact>>> artifacts_;
  std::mutex load_mutex_;  // one module load at a time per kernel; never held on the hot path
  // Keys compiling in the background, or done (serve_with_fallback), by key text. Miss path only.
  enum class BackgroundState { queued, ready, failed };
  std::mutex background_mutex_;
  std::map<std::string, BackgroundState> background_;
};

template <class Owner, CompileKey KeyT, Described DescriptorsT>
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

  // The per-process singleton.
  static Owner& instance() {
    static Owner owner;
    return owner;
  }

  // --- What the owner writes ---------------------------------------------------------------
  // The single place where specialization is decided: runtime descriptors -> key. Pure.
  // Throws InvalidArgument for descriptors the kernel cannot take.
  virtual Key dispatch(const Descriptors& descriptors) const = 0;
  // The source, name expressions and options that compile `key` (use make_program). Throws
  // zerojit::Error for a key the kernel cannot build (e.g. a field outside its values).
  virtual Program program(const Key& key) const = 0;
  // Plus, not virtual because their types are the owner's: `plan(key, args)` returning one of
  // the launch specs of launch.hpp for the key dispatch chose (the base calls dispatch first,
  // so the key a call launches is always the key warmup computes for its descriptors), and
  // `warmup_space(...)` returning a WarmupSpace<Descriptors>. The descriptors are an argument
  // struct declared with roles (arguments.hpp) over TensorDesc; the call is the same struct
  // over TensorRef (CallArgs<Descriptors>).

  // --- What the base provides ---------------------------------------------------------------
  // The launch spec of a call: dispatch on its descriptors, then the owner's plan for that key.
  // (Self defers the check to the call: clang checks a CRTP constraint that names Owner
  // itself while Owner is still incomplete, and remembers the failure.)
  template <class Args, class Self = Owner>
  requires requires(const Self& owner, const Args& args, const Key& key) {
    owner.plan(key, args);
    owner.dispatch(descriptors_of(args));
  }
  auto launch_spec(const Args& args) const {
    return owner().plan(owner().dispatch(descriptors_of(args)), args);
  }

  // Plans the call and launches it on the plan's device and `stream`; returns what the plan's
  // shape returns (nothing, the outputs, or the finalizer's result).
  template <class Args, class Self = Owner>
  requires requires(const Self& owner, const Args& args) { owner.launch_spec(args); }
  auto operator()(const Args& args, cuda::Stream stream = nullptr) {
    auto spec = launch_spec(args);
    const LaunchTarget target{spec.device, stream};
    // The monitor's fallback mode, read first so that other modes pay no lookup of their own.
    if constexpr (requires(const Self& owner, const Key& key) { owner.fallback(key); }) {
      if (Monitor::instance().serving_through_misses() && !spec.geometry.empty()) {
        if (const std::optional<Key> fallback = fallback_serving(spec.key, args, target)) {
          auto served = owner().plan(*fallback, args);
          count_fallback_launch();
          return launch_described(served, target, DescriptorText::of_args(args));
        }
      }
    }
    return launch_described(spec, target, DescriptorText::of_args(args));
  }

  std::string key_text(const Key& key) const { return describe(key); }

  // --- Serving through a miss -----------------------------------------------------------------
  // An owner may declare, for a key, a covering key whose program serves the same calls, less
  // specialized (runtime extents instead of template ones, a smaller coarsening):
  //   std::optional<Key> fallback(const Key& key) const;
  // Warmup warms it whenever the kernel is (registry.hpp), and in the monitor's fallback mode a
  // call whose key misses launches it at once while the key compiles in the background.

  // The key that serves a call whose `key` missed on the target's device, or nothing (the call
  // then takes the usual miss): the owner's fallback, when it is warmed there, until the key's
  // background compile is done (KernelBase::serve_with_fallback).
  template <class Args>
  std::optional<Key> fallback_serving(const Key& key, const Args& args, LaunchTarget target) {
    if (executors_.find(key, target.device) != nullptr) return std::nullopt;  // a hit
    const std::optional<Key> fallback = owner().fallback(key);
    if (!fallback || *fallback == key || executors_.find(*fallback, target.device) == nullptr) {
      return std::nullopt;  // none, or not warmed here: as in warn mode
    }
    const std::string arch = Runtime::instance().target_arch(target.device);
    const bool served =
        serve_with_fallback(describe(key), to_json_text(key), DescriptorText::of_args(args)(),
                            Runtime::instance().backend().is_capturing(target.stream),
                            [this, key, arch] { compile(key, arch); });
    return served ? fallback : std::nullopt;
  }

  // The artifact for `key` on `arch` (memory -> store -> NVRTC). An NVRTC compile after
  // warmup is a monitor event; `descriptors`, when the caller has them (the key is their
  // dispatch), are what its report and a RuntimeJitError name.
  std::shared_ptr<const CompiledArtifact> compile(const Key& key, std::string_view arch,
                                                  const Descriptors* descriptors = nullptr) {
    ArtifactOrigin origin;
    return compile_with_origin(key, arch, origin, descriptors);
  }

  std::shared_ptr<const CompiledArtifact> compile_with_origin(
      const Key& key, std::string_view arch, ArtifactOrigin& origin,
      const Descriptors* descriptors = nullptr) {
    const Program prog = program(key);
    Acquired acquired =
        acquire({.key = &key,
                 .program = &prog,
                 .arch = arch,
                 .descriptors = descriptors ? DescriptorText::of(*descriptors) : DescriptorText{}});
    origin = acquired.origin;
    return std::move(acquired.artifact);
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
    const Program prog = program(key);
    Acquire request{.key = &key, .program = &prog, .arch = arch, .may_defer = true};
    const Acquired compiled = acquire(request);
    request.may_defer = false;
    if (compiled.deferred) {
      result.deferred = true;
      return result;
    }
    result.origin = compiled.origin;
    if (result.origin == ArtifactOrigin::compiled) {
      result.compile_seconds = compiled.artifact->compile_seconds;
    }
    for (int device : devices) {
      if (executors_.find(key, device) == nullptr) {
        request.device = device;
        acquire(request);
      }
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
    return load_slow(key, target,
                     descriptors ? DescriptorText::of(*descriptors) : DescriptorText{});
  }

  // Carries out a plan on an explicit target (see launch.hpp for the three shapes and what
  // each returns). operator() is the usual way; this one is for tests and benchmarks.
  // The spec is taken by reference, never copied (see launch_described); its outputs are moved
  // into the result.
  template <class Spec>
  auto launch(Spec&& spec, LaunchTarget target, const Descriptors* descriptors = nullptr) {
    return launch_described(spec, target,
                            descriptors ? DescriptorText::of(*descriptors) : DescriptorText{});
  }

  // A call a language's packer made (launch.hpp, PackedCall), launched in its loaded function's
  // form: a lock-free lookup on a hit, the one slow path on a miss.
  void launch_packed(const Key& key, PackedCall& call, LaunchTarget target,
                     DescriptorText descriptors = {}) {
    if (call.geometry.empty()) return;
    const LoadedFunction* function = executors_.find(key, target.device);
    if (function == nullptr) {
      function = &load_slow(key, target, descriptors);
    } else {
      stats_.hits.fetch_add(1, std::memory_order_relaxed);
    }
    launch_loaded(*function, call, target.stream);
  }

  // Whether (key, device) has a loaded function: a launch of it takes the hit path.
  bool has_executor(const Key& key, int device) const {
    return executors_.find(key, device) != nullptr;
  }

  std::size_t executor_count() const override { return executors_.size(); }

  void reset_for_testing() override {
    executors_.clear();
    reset_base_for_testing();
  }

 protected:
  JitKernel(std::string name, const EmbeddedFileSet* files = nullptr)
      : KernelBase(std::move(name), files) {}
  JitKernel(std::string name, const EmbeddedFileSet& files) : KernelBase(std::move(name), &files) {}

  // A Program for `key` with what every owner would repeat filled in: the kernel's name, its
  // embedded files, the key's text, and the default options (program.hpp). `name_expression`
  // is the kernel function to compile, e.g. instantiate("zj::examples::scale_add_kernel", key).
  Program make_program(const Key& key, std::string source_path, std::string name_expression,
                       std::vector<std::string> options = {}) const {
    Program prog;
    prog.kernel_name = name();
    prog.files = files();
    prog.source_path = std::move(source_path);
    prog.name_expressions = {std::move(name_expression)};
    prog.options = std::move(options);
    prog.key_text = describe(key);
    return prog;
  }

  // "function<f1, f2, ...>": the key's fields as template arguments, in declaration order.
  static std::string instantiate(std::string_view function, const Key& key) {
    return std::string(function) + "<" + template_arguments(key) + ">";
  }

  // Checks that throw InvalidArgument naming this kernel.
  ArgumentChecks checks() const { return ArgumentChecks(name()); }

 private:
  Owner& owner() { return static_cast<Owner&>(*this); }
  const Owner& owner() const { return static_cast<const Owner&>(*this); }

  // By reference: a spec carries its argument buffer inline (KernelArgs, ~1.3 KB), and a copy
  // per hop is most of the hit path's cost (measured: 250 against 75 ns a launch on a null
  // backend with one extra by-value hop).
  template <class Spec>
  auto launch_described(Spec& spec, LaunchTarget target, DescriptorText descriptors) {
    launch_packed(spec.key, spec.geometry, spec.args, target, descriptors);
    if constexpr (requires { spec.finalize(spec.outputs); }) {
      return spec.finalize(spec.outputs);
    } else if constexpr (requires { spec.outputs; }) {
      return std::move(spec.outputs);
    }
  }

  // The hot path: lookup, argument check, launch. No lock, no allocation on a hit.
  void launch_packed(const Key& key, const LaunchGeometry& geometry, const KernelArgs& args,
                     LaunchTarget target, DescriptorText descriptors) {
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

  const LoadedFunction& load_slow(const Key& key, LaunchTarget target, DescriptorText descriptors) {
    const Program prog = program(key);
    const std::string arch = Runtime::instance().target_arch(target.device);
    return *acquire({.key = &key,
                     .program = &prog,
                     .arch = arch,
                     .device = target.device,
                     .launching = true,
                     .stream = target.stream,
                     .descriptors = descriptors})
                .function;
  }

  std::string key_json(const void* key) const override {
    return to_json_text(*static_cast<const Key*>(key));
  }
  std::optional<NamedKey> key_named(std::string_view text) override {
    if constexpr (key_text_readable<Key>()) {
      Key key;
      try {
        key = key_from_text<Key>(text);
      } catch (const Error&) {
        return std::nullopt;
      }
      if (describe(key) != text) return std::nullopt;
      return NamedKey{describe(key), to_json_text(key),
                      [this, key](std::string_view arch, std::span<const int> devices) {
                        return warm(key, arch, devices);
                      },
                      [this, key] { return owner().program(key); }};
    } else {
      return KernelBase::key_named(text);
    }
  }
  const LoadedFunction* find_executor(const void* key, int device) const override {
    return executors_.find(*static_cast<const Key*>(key), device);
  }
  const LoadedFunction& insert_executor(const void* key, int device,
                                        const LoadedFunction& function) override {
    return executors_.insert(*static_cast<const Key*>(key), device, function);
  }

  ExecutorCache<Key> executors_;
};

}  // namespace zerojit
