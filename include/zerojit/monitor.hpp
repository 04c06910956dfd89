// The JIT monitor: armed when warmup ends, it sees every compile and module load that
// happens afterwards, and reports it (warn), refuses it (error), or, in fallback mode, lets a
// kernel serve the call with its warmed fallback while the missing key compiles in the
// background (reported as warn reports).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace zerojit {

// fallback: keep serving through a miss (docs/TOOL.md, "Serving through a miss"): a launch
// whose key misses runs its kernel's warmed fallback at once and the key compiles in the
// background; a kernel without a fallback behaves as in warn. Compiles and loads are reported
// as in warn.
enum class MonitorMode { off, warn, error, fallback };
std::string_view to_string(MonitorMode mode);
// "off" | "warn" | "error" | "fallback" (case-insensitive); std::nullopt otherwise.
std::optional<MonitorMode> parse_monitor_mode(std::string_view text);

// What the monitor saw: a compile, a module load, or a call whose arguments need another
// specialization than the one its key compiles (a Triton key that does not name a class its
// call falls into, e.g. an integer not divisible by 16 where the key compiled divisibility).
enum class JitEventKind { compile, load, specialization };
std::string_view to_string(JitEventKind kind);

// One runtime JIT the monitor saw.
struct JitEvent {
  JitEventKind kind = JitEventKind::compile;
  std::string kernel;
  std::string key;
  std::string descriptors;  // the runtime descriptors that produced the key (may be empty)
  std::string detail;       // what needs the other specialization (the argument and class)
  // A compile or load of a kernel zerojit does not own (Monitor::on_foreign_jit): it has no
  // warmup space to widen.
  bool foreign = false;
};

// A kernel's counters, as read at one moment.
struct KernelCounters {
  std::string kernel;
  std::uint64_t hits = 0;                 // launches served by the executor cache
  std::uint64_t misses = 0;               // executor-cache misses (each a compile or load)
  std::uint64_t compiles = 0;             // NVRTC compiles
  double compile_seconds = 0.0;           // time spent in them
  std::uint64_t disk_loads = 0;           // artifacts read from the artifact store
  std::uint64_t loads = 0;                // module loads onto a device
  std::uint64_t runtime_jit = 0;          // compiles and loads seen after the monitor was armed
  std::uint64_t fallback_launches = 0;    // missed calls served by the kernel's fallback key
  std::uint64_t background_compiles = 0;  // missed keys compiled in the background
  std::uint64_t background_failures = 0;  // of them, failed (the fallback kept serving)
};

// The live counters a kernel keeps: relaxed atomics bumped on the launch and compile paths.
// The monitor reads them through track(); it needs nothing else of the kernel.
struct KernelStats {
  std::atomic<std::uint64_t> hits{0};
  std::atomic<std::uint64_t> misses{0};
  std::atomic<std::uint64_t> compiles{0};
  std::atomic<std::uint64_t> compile_nanoseconds{0};
  std::atomic<std::uint64_t> disk_loads{0};
  std::atomic<std::uint64_t> loads{0};
  std::atomic<std::uint64_t> runtime_jit{0};
  std::atomic<std::uint64_t> fallback_launches{0};
  std::atomic<std::uint64_t> background_compiles{0};
  std::atomic<std::uint64_t> background_failures{0};

  KernelCounters read(std::string_view kernel) const;
  void reset();
};

class Monitor {
 public:
  // The singleton. Its mode starts from $ZEROJIT_MONITOR (off, warn, error; default off);
  // $ZEROJIT_MONITOR_VERBOSE=1 makes warn report every event, not once per (kernel, key).
  static Monitor& instance();

  MonitorMode mode() const { return mode_.load(std::memory_order_acquire); }
  // Entering fallback mode starts the background compile thread (background.hpp).
  void set_mode(MonitorMode mode);
  bool verbose() const { return verbose_.load(std::memory_order_relaxed); }
  void set_verbose(bool verbose) { verbose_.store(verbose, std::memory_order_relaxed); }

  // Warmup arms the monitor when it ends; arm/disarm are also public for callers that warm up
  // by other means.
  void arm();
  // Armed in fallback mode: a kernel's miss launches its fallback and compiles in the
  // background (read on the miss path only).
  bool serving_through_misses() const { return armed() && mode() == MonitorMode::fallback; }
  void disarm() { armed_.store(false, std::memory_order_release); }
  bool armed() const { return armed_.load(std::memory_order_acquire); }

  // Called by a kernel before a compile or load. Does nothing unless armed; in warn and
  // fallback mode it reports (once per kernel and key unless verbose) and counts; in error mode
  // it throws RuntimeJitError naming the kernel, the key and the descriptors.
  void on_jit(const JitEvent& event);

  // A compile or module load of a kernel zerojit does not own (another library's Triton kernel,
  // seen by the Python module's Triton guard): counted under `counter` (a pseudo-kernel in
  // counters(), e.g. "triton.foreign"), then handled as on_jit handles an event (reported, or
  // refused in error mode). Counted even while the monitor is not armed (a warmup's own).
  void on_foreign_jit(const JitEvent& event, const std::string& counter);

  // Where warnings go (default: the library log, log.hpp, as warnings of component
  // "monitor"). Tests capture them.
  void set_sink(std::function<void(std::string_view)> sink);
  // Called with every event the armed monitor sees (warn and error mode), before an error is
  // thrown, on the thread that asked for the compile or load. For engines that count or
  // report events their own way. nullptr removes it.
  void set_event_callback(std::function<void(const JitEvent&)> callback);

  // Every event seen since the last reset (both modes), for tests and the tool.
  std::vector<JitEvent> events() const;
  void reset_events();

  // Kernels register their counters here for as long as they live (KernelBase does).
  void track(const std::string* kernel, const KernelStats* stats);
  void untrack(const KernelStats* stats);

  // Counters of every live kernel, and the same as JSON:
  // {"mode":"error","armed":true,"kernels":[{"kernel":"...","hits":..,...}]}
  std::vector<KernelCounters> counters() const;
  std::string counters_json() const;

  // Holds the monitor disarmed during a warmup and restores the armed state after it.
  class WarmupScope {
   public:
    WarmupScope();
    ~WarmupScope();
    WarmupScope(const WarmupScope&) = delete;
    WarmupScope& operator=(const WarmupScope&) = delete;

   private:
    bool was_armed_;
  };

 private:
  Monitor();

  std::atomic<MonitorMode> mode_{MonitorMode::off};
  std::atomic<bool> verbose_{false};
  std::atomic<bool> armed_{false};
  mutable std::mutex mutex_;
  std::function<void(std::string_view)> sink_;
  std::function<void(const JitEvent&)> event_callback_;
  std::vector<std::pair<const std::string*, const KernelStats*>> tracked_;
  struct ForeignCounter {
    std::string name;
    KernelStats stats;
  };
  std::vector<std::unique_ptr<ForeignCounter>> foreign_;  // tracked as kernels, never removed
  std::set<std::pair<std::string, std::string>> reported_;
  std::vector<JitEvent> events_;
};

}  // namespace zerojit
