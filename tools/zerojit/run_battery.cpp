// run_battery (zerojit/tool.hpp): `run` for any family. The family's battery makes the runtime
// calls; this keeps the contract around them: cache options, the manifest check of every call,
// warmup and the monitor on each GPU, the report and the exit code.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "exit_codes.hpp"
#include "json_output.hpp"
#include "option_values.hpp"
#include "setup.hpp"
#include "terminal.hpp"
#include "warmup_command.hpp"
#include "zerojit/cuda.hpp"
#include "zerojit/error.hpp"
#include "zerojit/monitor.hpp"
#include "zerojit/tool.hpp"

namespace zerojit::tool {

using nlohmann::json;

// What the battery met: every call's key, checked against the manifest.
class RunLedger {
 public:
  RunLedger(const Manifest& manifest, MonitorMode mode) : mode_(mode) {
    for (const ManifestEntry& entry : manifest.entries) {
      warmed_.emplace(entry.kernel->name(), entry.key_text);
      note_kernel(entry.kernel->name());
    }
  }

  // Where the battery is, for the messages: "step 12" (", device 0").
  void at(std::int64_t step, int device) {
    where_ =
        "step " + std::to_string(step) + (device >= 0 ? ", device " + std::to_string(device) : "");
  }

  void check(const std::string& kernel, const std::string& key, const std::string& descriptors) {
    note_kernel(kernel);
    KernelStats& stats = stats_[kernel];
    ++stats.calls;
    ++stats.keys[key];
    ++calls_;
    if (warmed_.count({kernel, key})) return;
    auto miss = std::find_if(misses_.begin(), misses_.end(),
                             [&](const Miss& m) { return m.kernel == kernel && m.key == key; });
    if (miss != misses_.end()) {
      ++miss->calls;
      return;
    }
    misses_.push_back({kernel, key, descriptors, where_, 1});
    const std::string what =
        "runtime JIT: kernel " + kernel + " [" + key +
        "] is not in the warmup manifest\n  runtime descriptors: " + descriptors +
        "\n  first met at " + where_;
    if (mode_ == MonitorMode::error) {
      json details = {
          {"runtime_jit",
           {{"kernel", kernel}, {"key", key}, {"descriptors", descriptors}, {"step", where_}}}};
      throw ToolError{kExitRuntimeJit, what + " (monitor in error mode)",
                      "widen the warmup space of " + kernel +
                          " (the configuration's registration) to cover this call; `" +
                          program_name() +
                          " keys` lists what warmup compiles, and --monitor "
                          "warn reports every miss without failing",
                      details.dump()};
    }
    if (mode_ == MonitorMode::warn) print_warning(what);
  }

  std::uint64_t calls() const { return calls_; }
  std::size_t misses() const { return misses_.size(); }

  std::size_t keys_met() const {
    std::size_t count = 0;
    for (const auto& [name, stats] : stats_) count += stats.keys.size();
    return count;
  }

  std::vector<std::string> unmet(const Manifest& manifest) const {
    std::vector<std::string> out;
    for (const ManifestEntry& entry : manifest.entries) {
      const auto stats = stats_.find(entry.kernel->name());
      if (stats == stats_.end() || !stats->second.keys.count(entry.key_text)) {
        out.push_back(entry.kernel->name() + " " + entry.key_text);
      }
    }
    return out;
  }

  json kernels_json() const {
    json kernels = json::array();
    for (const std::string& name : order_) {
      const auto stats = stats_.find(name);
      if (stats == stats_.end()) continue;
      json keys = json::array();
      for (const auto& [key, calls] : stats->second.keys) {
        keys.push_back(
            {{"key", key}, {"calls", calls}, {"in_manifest", warmed_.count({name, key}) > 0}});
      }
      kernels.push_back({{"kernel", name}, {"calls", stats->second.calls}, {"keys", keys}});
    }
    return kernels;
  }

  json misses_json() const {
    json out = json::array();
    for (const Miss& m : misses_) {
      out.push_back({{"kernel", m.kernel},
                     {"key", m.key},
                     {"descriptors", m.descriptors},
                     {"first_step", m.where},
                     {"calls", m.calls}});
    }
    return out;
  }

  void print_table(const Style& out) const {
    Table table({{"kernel"},
                 {"calls", Table::Align::right},
                 {"keys met", Table::Align::right},
                 {"not in manifest", Table::Align::right}});
    for (const std::string& name : order_) {
      const auto stats = stats_.find(name);
      if (stats == stats_.end()) continue;
      std::size_t missing = 0;
      for (const auto& [key, calls] : stats->second.keys) {
        missing += warmed_.count({name, key}) ? 0 : 1;
      }
      table.add_row({name, with_separators(static_cast<long long>(stats->second.calls)),
                     std::to_string(stats->second.keys.size()),
                     missing ? out.red(std::to_string(missing)) : "0"});
    }
    table.add_footer({"total", with_separators(static_cast<long long>(calls_)),
                      std::to_string(keys_met()),
                      misses_.empty() ? "0" : out.red(std::to_string(misses_.size()))});
    std::printf("\n");
    table.print(stdout, out);
    for (const Miss& m : misses_) {
      std::printf("  not in the manifest: %s [%s], %llu call(s), first at %s\n", m.kernel.c_str(),
                  m.key.c_str(), static_cast<unsigned long long>(m.calls), m.where.c_str());
    }
  }

 private:
  struct KernelStats {
    std::uint64_t calls = 0;
    std::map<std::string, std::uint64_t> keys;  // key -> calls
  };
  struct Miss {
    std::string kernel, key, descriptors, where;
    std::uint64_t calls = 0;
  };

  void note_kernel(const std::string& name) {
    if (std::find(order_.begin(), order_.end(), name) == order_.end()) order_.push_back(name);
  }

  MonitorMode mode_;
  std::set<std::pair<std::string, std::string>> warmed_;
  std::vector<std::string> order_;  // the manifest's kernels first, then others as met
  std::map<std::string, KernelStats> stats_;
  std::vector<Miss> misses_;
  std::uint64_t calls_ = 0;
  std::string where_;
};

void RunStep::call(const KernelBase& kernel, const std::string& key_text,
                   const std::string& descriptors,
                   const std::function<void(cuda::Stream)>& launch) {
  ledger_->check(kernel.name(), key_text, descriptors);
  if (launching() && launch) launch(stream_);
}

namespace {

// Each step's seed: --seed and the step mixed (splitmix64), so steps differ and reruns agree.
std::uint64_t step_seed(std::uint64_t seed, std::int64_t index) {
  std::uint64_t z = seed + 0x9E3779B97F4A7C15ull * (static_cast<std::uint64_t>(index) + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// A stream on `device`, destroyed at the end of the scope.
class DeviceStream {
 public:
  explicit DeviceStream(int device) {
    cuda::make_device_current(device);
    cuda::check(cuda::driver().cuStreamCreate(&stream_, cuda::kStreamNonBlocking),
                "cuStreamCreate");
  }
  ~DeviceStream() { cuda::driver().cuStreamDestroy(stream_); }
  DeviceStream(const DeviceStream&) = delete;
  DeviceStream& operator=(const DeviceStream&) = delete;
  cuda::Stream get() const { return stream_; }

 private:
  cuda::Stream stream_ = nullptr;
};

std::uint64_t monitor_misses() {
  std::uint64_t misses = 0;
  for (const KernelCounters& counters : Monitor::instance().counters()) misses += counters.misses;
  return misses;
}

// Runs the battery's steps once (on `device`, or through dispatch alone with -1), turning what
// a step throws into the tool's errors.
void run_steps(const RunRequest& request, const Battery& battery, RunLedger& ledger, int device) {
  std::unique_ptr<DeviceStream> stream;
  if (device >= 0) stream = std::make_unique<DeviceStream>(device);
  for (std::int64_t i = 0; i < request.steps; ++i) {
    ledger.at(i, device);
    RunStep step(ledger, i, step_seed(request.seed, i), device, stream ? stream->get() : nullptr);
    const std::string where =
        "step " + std::to_string(i) + (device >= 0 ? " on device " + std::to_string(device) : "");
    try {
      battery(step);
      if (stream)
        cuda::check(cuda::driver().cuStreamSynchronize(stream->get()), "cuStreamSynchronize");
    } catch (const RuntimeJitError& error) {
      json details = {{"runtime_jit",
                       {{"kernel", error.kernel()},
                        {"key", error.key()},
                        {"descriptors", error.descriptors()},
                        {"step", where}}}};
      if (device >= 0) details["runtime_jit"]["device"] = device;
      throw ToolError{kExitRuntimeJit, std::string(error.what()) + "\n  at " + where,
                      "widen the warmup space of " + error.kernel() + " to cover this call",
                      details.dump()};
    } catch (const CudaError& error) {
      throw ToolError{kExitFailure, "CUDA error at " + where + ": " + error.what(),
                      "a kernel faulted or the device failed; rerun the same --seed under "
                      "compute-sanitizer to find the launch"};
    } catch (const InvalidArgument& error) {
      throw ToolError{
          kExitFailure,
          "the battery made a call its kernel rejects, at " + where + ": " + error.what(),
          "a bug in the family's battery: it must make only calls serving makes"};
    }
  }
}

// Warms the manifest on the GPUs (the monitor armed at its end); throws the tool's error for a
// warmup that failed.
json warm_devices(const RunRequest& request, const FamilyConfiguration& configuration,
                  WarmupRegistry& registry, const std::vector<int>& devices) {
  WarmupOptions options;
  options.arch = configuration.arch;
  options.devices = devices;
  options.jobs = request.jobs;
  options.compile_processes = !request.in_process;
  options.progress = request.json ? ProgressStyle::none : ProgressStyle::automatic;
  const WarmupReport report = registry.warmup(options);
  std::optional<ToolError> failure = failing_for_want_of_nvrtc(report);
  if (!failure) failure = failing_for_unsupported_arch(report, configuration.arch);
  if (!failure && !report.ok()) {
    for (const KeyReport& key : report.keys) {
      if (key.error.empty()) continue;
      std::fprintf(stderr, "compile failed: %s [%s] for %s:\n  %s\n", key.kernel.c_str(),
                   key.key.c_str(), key.arch.c_str(), key.error.c_str());
    }
    failure =
        ToolError{kExitCompileFailure,
                  std::to_string(report.failed()) + " of " + std::to_string(report.total_keys()) +
                      " keys failed to compile during warmup; nothing was run",
                  compile_failure_advice(report) + "; `" + program_name() +
                      " warmup -v` with the same options shows every key"};
  }
  if (failure) throw *failure;
  if (!request.json) {
    const Style out = Style::for_stream(stdout);
    std::printf("%s %s\n", out.dim("warmup:").c_str(), report.summary_line().c_str());
  }
  return parse_library_json(report.to_json());
}

}  // namespace

int run_battery(const RunRequest& request, const FamilyConfiguration& configuration,
                const Battery& battery) {
  const MonitorMode mode = parse_monitor_mode(request.monitor).value_or(MonitorMode::error);
  Monitor::instance().set_mode(mode);
  const RunPlacement placement = run_placement(request.dispatch_only, request.devices);
  const std::vector<int>& devices = placement.devices;
  const std::string& why = placement.why;
  // Also without a GPU: a cache root the GPU run would refuse is refused here too.
  install_cache({request.cache_dir, request.layers, request.allow_shared, request.remote_cache},
                "run");
  if (!devices.empty()) require_nvrtc();
  WarmupRegistry registry;
  if (configuration.register_warmup) configuration.register_warmup(registry);
  const Manifest manifest = checked_manifest(registry);
  const Style out = Style::for_stream(stdout);
  if (!request.json) {
    std::printf("%s %s\n", out.bold(program_name() + " run:").c_str(),
                configuration.description.c_str());
    std::printf("%s %lld steps, seed %llu, %s\n", out.dim("battery:").c_str(),
                static_cast<long long>(request.steps),
                static_cast<unsigned long long>(request.seed),
                devices.empty() ? ("through dispatch only (" + why + ")").c_str()
                                : ("on " + std::to_string(devices.size()) + " GPU(s)").c_str());
    std::printf("%s %s\n", out.dim("cache:").c_str(), describe_cache().c_str());
    std::fflush(stdout);
  }

  RunLedger ledger(manifest, mode);
  json warmup = nullptr;
  std::uint64_t jit_after_warmup = 0;
  const auto start = std::chrono::steady_clock::now();
  if (devices.empty()) {
    run_steps(request, battery, ledger, -1);
  } else {
    warmup = warm_devices(request, configuration, registry, devices);
    // Every executor-cache miss after warmup is a compile or a module load; the monitor counts
    // them as runtime JIT only while armed (not with --monitor off), so misses are the measure.
    const std::uint64_t before = monitor_misses();
    for (int device : devices) run_steps(request, battery, ledger, device);
    jit_after_warmup = monitor_misses() - before;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (ledger.calls() == 0) {
    throw ToolError{kExitFailure,
                    "the battery made no call in " + std::to_string(request.steps) +
                        " step(s): nothing was checked",
                    "the family's battery must make each runtime call through RunStep::call"};
  }
  const std::vector<std::string> unmet = ledger.unmet(manifest);
  if (request.json) {
    json result = {{"mode", devices.empty() ? "dispatch-only" : "gpu"},
                   {"monitor", std::string(to_string(mode))},
                   {"configuration", parse_library_json(configuration.json)},
                   {"steps", request.steps},
                   {"seed", request.seed},
                   {"seconds", seconds},
                   {"manifest_keys", manifest.size()},
                   {"calls", ledger.calls()},
                   {"keys_met", ledger.keys_met()},
                   {"kernels", ledger.kernels_json()},
                   {"runtime_jit", ledger.misses_json()},
                   {"manifest_keys_not_met", unmet}};
    if (devices.empty()) {
      result["reason"] = why;
    } else {
      result["devices"] = devices;
      result["warmup"] = warmup;
      result["runtime_jit_after_warmup"] = jit_after_warmup;
    }
    print_json(success_document("run", std::move(result)));
    return kExitOk;
  }
  ledger.print_table(out);
  std::printf("\n%lld step(s)%s in %.2f s\n", static_cast<long long>(request.steps),
              devices.empty() ? " through dispatch" : " on each GPU", seconds);
  if (!unmet.empty()) {
    std::printf("%s %zu manifest key(s) never met (compiled but not reached by this battery):\n",
                out.yellow("note:").c_str(), unmet.size());
    for (const auto& line : unmet) std::printf("  %s\n", line.c_str());
  }
  if (ledger.misses() == 0 && jit_after_warmup == 0) {
    std::printf("%s every key met (%zu) is in the warmup manifest (%zu keys)%s\n",
                out.green("ok:").c_str(), ledger.keys_met(), manifest.size(),
                devices.empty() ? "" : "; nothing compiled or loaded after warmup");
  } else {
    std::printf(
        "%s %zu key(s) met are not in the manifest, %llu compile(s) or load(s) after "
        "warmup (monitor %s: not failing)\n",
        out.yellow("runtime JIT:").c_str(), ledger.misses(),
        static_cast<unsigned long long>(jit_after_warmup), std::string(to_string(mode)).c_str());
  }
  return kExitOk;
}

}  // namespace zerojit::tool
