// The warmup registry. Code that selects a kernel at run time registers it here, under the
// same predicate, with a builder for its warmup space; warmup then compiles the union of every
// registration's keys in a bounded pool, loads each module on every selected device, and arms
// the monitor.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "zerojit/compiler.hpp"
#include "zerojit/fallback.hpp"
#include "zerojit/kernel.hpp"
#include "zerojit/misses.hpp"
#include "zerojit/space.hpp"

namespace zerojit {

// One (kernel, key) that warmup will compile.
struct ManifestEntry {
  KernelBase* kernel = nullptr;
  std::string key_text;  // describe(key)
  std::string key_json;  // to_json_text(key)
  // Compiles for an arch and loads on the given devices.
  std::function<WarmResult(std::string_view arch, std::span<const int> devices)> warm;
  // The program the key compiles (for explaining cache misses, listing identities).
  std::function<Program()> program;
};

// What expanding the registrations found.
struct Manifest {
  std::vector<ManifestEntry> entries;  // per kernel in registration order, keys deduplicated
  struct DeadAxis {
    std::string kernel;
    std::string tag;
    std::string axis;
  };
  std::vector<DeadAxis> dead_axes;

  std::size_t size() const { return entries.size(); }
  // One line per entry: "<kernel> <key text>".
  std::vector<std::string> lines() const;
  // [{"kernel":"...","key":{...}}, ...]
  std::string to_json() const;
};

struct KeyReport;

enum class ProgressStyle { automatic, bar, lines, none };

struct KeyReport;
// One key of a warmup is done (compiled, found on disk or in memory, or failed).
struct WarmupProgress {
  std::size_t done = 0;            // keys done so far, this one included
  std::size_t total = 0;           // keys of the warmup
  const KeyReport* key = nullptr;  // the key just done; valid during the call only
};

struct WarmupOptions {
  // The arch to compile for when nothing is loaded (compile_only, or no GPU). With devices,
  // each device's own arch is used.
  std::string arch = "sm_90a";
  std::vector<int> devices{};                         // empty: every visible device
  bool compile_only = false;                          // compile (and store), load nothing
  int jobs = 0;                                       // <= 0: one per core
  ProgressStyle progress = ProgressStyle::automatic;  // bar on a terminal, else lines
  // Called after each key, for an engine that shows progress its own way (set progress to
  // none then). Calls come from the compiling threads one at a time, in the order keys finish;
  // the callback must not start another warmup.
  std::function<void(const WarmupProgress&)> on_progress{};
  bool arm_monitor = true;  // arm the monitor at the end (when its mode is not off)
  // Run the compiles in forked worker processes (compile_pool.hpp) when more than one job
  // compiles: NVRTC scales across processes, not across threads. Off by default in the library,
  // since it forks the calling process; the zerojit tool turns it on.
  bool compile_processes = false;
  // Asked before each key starts, from the compiling threads (the calling thread among them);
  // once it returns true, no further key starts: the keys in flight finish, the others are
  // reported failed with "warmup cancelled", and the report says cancelled (the monitor is then
  // not armed). For an engine that lets its user interrupt a long warmup (the Python module
  // maps Ctrl-C onto it).
  std::function<bool()> cancel_requested{};
};

struct KeyReport {
  std::string kernel;
  std::string key;
  std::string arch;
  Language language = kNvrtcLanguage;  // whose compiler compiled it (or failed to)
  ArtifactOrigin origin = ArtifactOrigin::compiled;
  double seconds = 0.0;
  double compile_seconds = 0.0;
  std::string error;  // empty on success
};

struct KernelReport {
  std::string kernel;
  int keys = 0;
  int from_memory = 0;
  int from_disk = 0;
  int compiled = 0;
  int failed = 0;
  double seconds = 0.0;  // sum over its keys
};

struct WarmupReport {
  std::vector<KeyReport> keys;
  std::vector<KernelReport> kernels;
  std::vector<std::string> archs;
  std::vector<int> devices;  // devices loaded on (empty: compile only)
  double wall_seconds = 0.0;
  bool monitor_armed = false;
  int compile_workers = 0;    // worker processes forked for the compiles (compile_processes)
  int compile_fallbacks = 0;  // compiles run in this process because a worker failed
  bool cancelled = false;     // cancel_requested stopped it: some keys never started
  // Keys put off because another process held their compile lock, warmed after the others
  // (each is still counted once, by how it was finally warmed).
  int deferred = 0;

  int total_keys() const;
  int from_memory() const;
  int from_disk() const;
  int compiled() const;
  int failed() const;
  bool ok() const { return failed() == 0; }
  std::string to_json() const;
  // "8 keys in 5 kernels: 8 compiled, 0 from disk, 0 from memory, 0 failed; 1.23 s"
  std::string summary_line() const;
};

class WarmupRegistry {
 public:
  // Registers `kernel` with a builder of its warmup space. Registrations with the same kernel
  // and tag are duplicates (e.g. every layer of a type registering once) and are dropped.
  template <class KernelT>
  void add(KernelT& kernel, std::string tag,
           std::function<WarmupSpace<typename KernelT::Descriptors>()> build_space) {
    add_expansion(kernel, std::move(tag),
                  [&kernel, build_space = std::move(build_space)](
                      std::vector<ManifestEntry>& entries, std::vector<std::string>& dead_axes) {
                    const auto space = build_space();
                    auto expansion =
                        space.expand([&kernel](const typename KernelT::Descriptors& descriptors) {
                          return kernel.dispatch(descriptors);
                        });
                    dead_axes = expansion.dead_axes;
                    for (const auto& key : expansion.keys) {
                      entries.push_back(entry_for(kernel, key));
                    }
                    if constexpr (HasFallback<KernelT>) add_fallbacks(kernel, space, entries);
                  });
  }

  // The manifest entry that warms `key` of `kernel`.
  template <class KernelT>
  static ManifestEntry entry_for(KernelT& kernel, const typename KernelT::Key& key) {
    ManifestEntry entry;
    entry.kernel = &kernel;
    entry.key_text = describe(key);
    entry.key_json = to_json_text(key);
    entry.warm = [&kernel, key](std::string_view arch, std::span<const int> devices) {
      return kernel.warm(key, arch, devices);
    };
    entry.program = [&kernel, key] { return kernel.program(key); };
    return entry;
  }

  // Fills a kernel's manifest entries and dead axes (the names of its space's dead axes).
  using Expansion =
      std::function<void(std::vector<ManifestEntry>& entries, std::vector<std::string>& dead_axes)>;
  // Registers a kernel whose keys are not a C++ type (a Python kernel, whose keys were expanded
  // beforehand): `expand` fills the entries as add() does. Same duplicate rule as add().
  void add_expansion(KernelBase& kernel, std::string tag, Expansion expand) {
    for (const auto& existing : registrations_) {
      if (existing.kernel == &kernel && existing.tag == tag) return;
    }
    registrations_.push_back({&kernel, std::move(tag), std::move(expand)});
  }

  // Adds the keys of a misses file (misses.hpp) to the warmup, each as a registration of its
  // kernel (any kernel of the process). Returns a note for each miss it cannot add (its kernel
  // is not in this process, or its text names no key of it) and each line the file skipped.
  std::vector<std::string> add_learned(const MissesFile& misses);

  std::size_t registration_count() const { return registrations_.size(); }

  // The union of every registration's keys: per kernel (in first-registration order), keys
  // deduplicated in first-seen order. Nothing is compiled.
  Manifest manifest() const;

  // Compiles (and loads) the manifest. Failures are reported per key, naming kernel and key;
  // the other keys still compile. Arms the monitor at the end when options.arm_monitor, the
  // monitor's mode is not off and no key failed: a monitor armed over a failed warmup would
  // report (or refuse) the failed keys' first launches as if the space had missed them.
  WarmupReport warmup(const WarmupOptions& options = {}) const;

 private:
  // Adds the fallback of every key of `space` (fallback.hpp), after the keys. A key whose
  // fallback would refuse a call of the space the key accepts fails (its entry's warm throws,
  // naming both keys and the call's refusal); the others warm.
  template <class KernelT>
  static void add_fallbacks(KernelT& kernel,
                            const WarmupSpace<typename KernelT::Descriptors>& space,
                            std::vector<ManifestEntry>& entries) {
    std::map<std::string, std::string> refused;  // key text -> why its fallback does not serve
    std::set<std::string> added;
    for (const auto& entry : entries) added.insert(entry.key_text);
    std::vector<ManifestEntry> fallbacks;
    space.for_each_point([&](std::size_t, const std::vector<std::size_t>&,
                             const typename KernelT::Descriptors* point) {
      if (point == nullptr) return;
      const auto key = kernel.dispatch(*point);  // expand() accepted every point
      const auto fallback = kernel.fallback(key);
      if (!fallback || *fallback == key) return;
      if (added.insert(describe(*fallback)).second) {
        fallbacks.push_back(entry_for(kernel, *fallback));
      }
      const std::string key_text = describe(key);
      if (refused.count(key_text)) return;
      std::string why = fallback_refusal(kernel, key, *fallback, *point);
      if (!why.empty()) {
        refused[key_text] = "key [" + key_text + "]: its fallback [" + describe(*fallback) +
                            "] would refuse a call the key accepts (" + describe(*point) +
                            "): " + why;
      }
    });
    for (auto& entry : entries) {
      const auto found = refused.find(entry.key_text);
      if (found == refused.end()) continue;
      entry.warm = [name = std::string(kernel.name()), why = found->second](
                       std::string_view, std::span<const int>) -> WarmResult {
        throw InvalidArgument(name, "fallback", why);
      };
    }
    for (auto& entry : fallbacks) entries.push_back(std::move(entry));
  }

  struct Registration {
    KernelBase* kernel = nullptr;
    std::string tag;
    Expansion expand;
  };
  std::vector<Registration> registrations_;
};

}  // namespace zerojit
