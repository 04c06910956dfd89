#include "run_command.hpp"

#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "dsv4/battery/battery.hpp"
#include "exit_codes.hpp"
#include "terminal.hpp"
#include "timing_backend.hpp"
#include "zerojit/cuda.hpp"
#include "zerojit/runtime.hpp"

namespace zerojit::tool {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// What the battery's steps added up to.
struct StepTotals {
  std::int64_t steps = 0;
  std::int64_t tokens = 0;
  std::int64_t largest = 0;
  std::int64_t decode_tokens = 0;
  std::int64_t prefill_tokens = 0;

  void add(const dsv4::ServingStep& step) {
    ++steps;
    tokens += step.num_tokens();
    largest = std::max(largest, step.num_tokens());
    decode_tokens += step.num_decode_tokens();
    prefill_tokens += step.num_prefill_tokens();
  }
  json to_json() const {
    return {{"steps", steps},
            {"tokens", tokens},
            {"largest_step_tokens", largest},
            {"decode_tokens", decode_tokens},
            {"prefill_tokens", prefill_tokens}};
  }
};

std::string kinds_text(const dsv4::Dsv4Config& config) {
  std::string text;
  for (const auto kind : dsv4::layer_kinds(config.model)) {
    text += (text.empty() ? "" : ", ") + std::string(dsv4::to_string(kind));
  }
  return text.empty() ? "none" : text;
}

std::string battery_line(const RunCommand& command, const dsv4::BatteryOptions& battery,
                         const dsv4::Dsv4Config& config) {
  return std::to_string(command.steps) + " steps, seed " + std::to_string(command.seed) + ", " +
         std::to_string(battery.layers_per_kind) + " layer(s) of each kind (" + kinds_text(config) +
         "), up to " + std::to_string(config.serving.max_num_batched_tokens) + " tokens and " +
         std::to_string(battery.max_num_seqs) + " requests a step, sequences up to " +
         std::to_string(battery.max_model_len);
}

std::string runtime_jit_hint(const std::string& kernel, const RunCommand& command) {
  if (command.config.testing_warmup_max_tokens > 0) {
    return "expected in a test: --testing-warmup-max-tokens " +
           std::to_string(command.config.testing_warmup_max_tokens) +
           " narrowed the warmup on purpose; drop it to warm what serving reaches";
  }
  return "the warmup space registered for " + kernel +
         " misses this runtime call: widen it (its gate in kernels/dsv4/gates.cpp and its "
         "warmup_space) so warmup compiles this key; `zerojit keys` lists what warmup "
         "compiles, and --monitor warn reports every miss without failing";
}

std::string jit_details(const std::string& kernel, const std::string& key,
                        const std::string& descriptors, const std::string& step, int device) {
  json details = {
      {"runtime_jit",
       {{"kernel", kernel}, {"key", key}, {"descriptors", descriptors}, {"step", step}}}};
  if (device >= 0) details["runtime_jit"]["device"] = device;
  return details.dump();
}

// --- Dispatch only -------------------------------------------------------------------------------

struct DispatchKernelStats {
  std::uint64_t launches = 0;
  std::map<std::string, std::uint64_t> keys;  // key -> launches
};

int run_dispatch_only(const RunCommand& command, const dsv4::Dsv4Config& config,
                      const dsv4::AttentionKernels& kernels, const dsv4::BatteryOptions& battery,
                      const Manifest& manifest, MonitorMode mode, const std::string& why) {
  std::set<std::pair<std::string, std::string>> warmed;
  std::vector<std::string> order;
  for (const ManifestEntry& entry : manifest.entries) {
    warmed.emplace(entry.kernel->name(), entry.key_text);
    if (order.empty() || order.back() != entry.kernel->name())
      order.push_back(entry.kernel->name());
  }
  std::map<std::string, DispatchKernelStats> stats;
  struct Miss {
    std::string kernel, key, descriptors, step;
    std::uint64_t count = 0;
  };
  std::vector<Miss> misses;
  StepTotals totals;
  const auto start = Clock::now();
  dsv4::StepGenerator generator(config, battery);
  const auto memory = dsv4::make_virtual_battery_memory(0);
  dsv4::BatteryWorkspace workspace(kernels, battery, *memory);
  for (std::int64_t i = 0; i < command.steps; ++i) {
    const dsv4::ServingStep step = generator.next();
    totals.add(step);
    for (const dsv4::AttentionCall& call : workspace.calls(step)) {
      std::vector<dsv4::PlannedLaunch> launches;
      try {
        launches = dsv4::plan_call(kernels, call);
      } catch (const std::exception& error) {
        throw ToolError{kExitFailure,
                        "the battery made a " + std::string(call.kind) +
                            " call that the kernel rejects, at " + step.summary() + ": " +
                            error.what(),
                        "this is a bug in the battery (kernels/dsv4/battery.cpp) or in the "
                        "kernel's argument checks; report it with this command line"};
      }
      for (const dsv4::PlannedLaunch& launch : launches) {
        const std::string& name = launch.kernel->name();
        if (!stats.count(name) && std::find(order.begin(), order.end(), name) == order.end()) {
          order.push_back(name);
        }
        DispatchKernelStats& s = stats[name];
        ++s.launches;
        ++s.keys[launch.key];
        if (warmed.count({name, launch.key})) continue;
        auto it = std::find_if(misses.begin(), misses.end(), [&](const Miss& m) {
          return m.kernel == name && m.key == launch.key;
        });
        if (it == misses.end()) {
          misses.push_back({name, launch.key, launch.descriptors, step.summary(), 0});
          it = std::prev(misses.end());
          if (mode == MonitorMode::error) {
            throw ToolError{kExitRuntimeJit,
                            "runtime JIT: kernel " + name + " [" + launch.key +
                                "] is not in the warmup manifest (dispatch only, monitor in "
                                "error mode)\n  runtime descriptors: " +
                                launch.descriptors + "\n  first met at " + step.summary(),
                            runtime_jit_hint(name, command),
                            jit_details(name, launch.key, launch.descriptors, step.summary(), -1)};
          }
          if (mode == MonitorMode::warn) {
            print_warning("runtime JIT: kernel " + name + " [" + launch.key +
                          "] is not in the warmup manifest\n  runtime descriptors: " +
                          launch.descriptors + "\n  first met at " + step.summary());
          }
        }
        ++it->count;
      }
    }
  }
  const double seconds = seconds_since(start);

  std::vector<std::string> unmet;
  for (const ManifestEntry& entry : manifest.entries) {
    const auto s = stats.find(entry.kernel->name());
    if (s == stats.end() || !s->second.keys.count(entry.key_text)) {
      unmet.push_back(entry.kernel->name() + " " + entry.key_text);
    }
  }
  std::size_t keys_met = 0;
  for (const auto& [name, s] : stats) keys_met += s.keys.size();

  if (command.json) {
    json kernels_json = json::array();
    for (const std::string& name : order) {
      const auto s = stats.find(name);
      if (s == stats.end()) continue;
      json keys = json::array();
      for (const auto& [key, launches] : s->second.keys) {
        keys.push_back(
            {{"key", key}, {"launches", launches}, {"in_manifest", warmed.count({name, key}) > 0}});
      }
      kernels_json.push_back({{"kernel", name}, {"launches", s->second.launches}, {"keys", keys}});
    }
    json misses_json = json::array();
    for (const Miss& m : misses) {
      misses_json.push_back({{"kernel", m.kernel},
                             {"key", m.key},
                             {"descriptors", m.descriptors},
                             {"first_step", m.step},
                             {"launches", m.count}});
    }
    json document = {{"ok", true},
                     {"exit_code", kExitOk},
                     {"mode", "dispatch-only"},
                     {"reason", why},
                     {"monitor", std::string(to_string(mode))},
                     {"configuration", config},
                     {"battery", totals.to_json()},
                     {"seconds", seconds},
                     {"manifest_keys", manifest.size()},
                     {"keys_met", keys_met},
                     {"kernels", kernels_json},
                     {"runtime_jit", misses_json},
                     {"manifest_keys_not_met", unmet}};
    std::cout << document.dump() << "\n";
    return kExitOk;
  }
  const Style out = Style::for_stream(stdout);
  Table table({{"kernel"},
               {"launches", Table::Align::right},
               {"keys met", Table::Align::right},
               {"not in manifest", Table::Align::right}});
  std::uint64_t launches_total = 0;
  for (const std::string& name : order) {
    const auto s = stats.find(name);
    if (s == stats.end()) continue;
    std::size_t missing = 0;
    for (const auto& [key, count] : s->second.keys) missing += warmed.count({name, key}) ? 0 : 1;
    launches_total += s->second.launches;
    table.add_row({name, with_separators(static_cast<long long>(s->second.launches)),
                   std::to_string(s->second.keys.size()),
                   missing ? out.red(std::to_string(missing)) : "0"});
  }
  table.add_footer({"total", with_separators(static_cast<long long>(launches_total)),
                    std::to_string(keys_met),
                    misses.empty() ? "0" : out.red(std::to_string(misses.size()))});
  std::printf("\n");
  table.print(stdout, out);
  std::printf("\n%s steps, %s tokens (largest step %lld) through dispatch in %.2f s\n",
              with_separators(totals.steps).c_str(), with_separators(totals.tokens).c_str(),
              static_cast<long long>(totals.largest), seconds);
  if (!unmet.empty()) {
    std::printf("%s %zu manifest key(s) never met (compiled but not reached by this battery):\n",
                out.yellow("note:").c_str(), unmet.size());
    for (const auto& line : unmet) std::printf("  %s\n", line.c_str());
  }
  if (misses.empty()) {
    std::printf("%s every key met (%zu) is in the warmup manifest (%zu keys)\n",
                out.green("ok:").c_str(), keys_met, manifest.size());
  } else {
    std::printf("%s %zu key(s) met are not in the manifest (monitor %s: not failing)\n",
                out.yellow("runtime JIT:").c_str(), misses.size(),
                std::string(to_string(mode)).c_str());
    for (const Miss& m : misses) {
      std::printf("  %s [%s]: %llu launches, first at %s\n", m.kernel.c_str(), m.key.c_str(),
                  static_cast<unsigned long long>(m.count), m.step.c_str());
    }
  }
  return kExitOk;
}

// --- GPU -----------------------------------------------------------------------------------------

struct DeviceResult {
  int device = 0;
  std::string name;
  std::string arch;
  double seconds = 0.0;
  std::size_t workspace_bytes = 0;
  StepTotals totals;
  std::map<std::string, KernelTiming> timing;
  std::map<std::string, double> bytes;
  std::map<std::string, KernelCounters> counters;  // this device's share (after - before)
};

std::map<std::string, KernelCounters> counters_by_kernel() {
  std::map<std::string, KernelCounters> out;
  for (const KernelCounters& c : Monitor::instance().counters()) out[c.kernel] = c;
  return out;
}

KernelCounters difference(const KernelCounters& after, const KernelCounters& before) {
  KernelCounters d = after;
  d.hits -= before.hits;
  d.misses -= before.misses;
  d.compiles -= before.compiles;
  d.compile_seconds -= before.compile_seconds;
  d.disk_loads -= before.disk_loads;
  d.loads -= before.loads;
  d.runtime_jit -= before.runtime_jit;
  return d;
}

DeviceResult run_on_device(const RunCommand& command, const dsv4::Dsv4Config& config,
                           const dsv4::AttentionKernels& kernels,
                           const dsv4::BatteryOptions& battery, TimingBackend& timing, int device) {
  DeviceResult result;
  result.device = device;
  const cuda::DeviceInfo info = cuda::device_info(device);
  result.name = info.name;
  result.arch = Runtime::instance().target_arch(device);
  cuda::make_device_current(device);
  std::unique_ptr<dsv4::BatteryMemory> memory;
  std::unique_ptr<dsv4::BatteryWorkspace> workspace;
  try {
    memory = dsv4::make_device_battery_memory(device);
    workspace = std::make_unique<dsv4::BatteryWorkspace>(kernels, battery, *memory);
  } catch (const CudaError& error) {
    throw ToolError{kExitFailure,
                    "allocating the battery's caches on device " + std::to_string(device) +
                        " failed: " + error.what(),
                    "free the GPU, or shrink the battery: --max-model-len, --max-num-seqs, "
                    "--layers, --max-num-batched-tokens"};
  }
  result.workspace_bytes = workspace->allocated_bytes();
  const auto before = counters_by_kernel();
  dsv4::StepGenerator generator(config, battery);
  const auto start = Clock::now();
  for (std::int64_t i = 0; i < command.steps; ++i) {
    const dsv4::ServingStep step = generator.next();
    result.totals.add(step);
    try {
      for (const dsv4::AttentionCall& call : workspace->calls(step)) {
        dsv4::run_call(kernels, call);
        for (const auto& traffic : call.traffic)
          result.bytes[std::string(traffic.kernel)] += traffic.bytes;
      }
      timing.collect(result.timing);
    } catch (const RuntimeJitError& error) {
      throw ToolError{
          kExitRuntimeJit,
          "runtime JIT on device " + std::to_string(device) + ": kernel " + error.kernel() + " [" +
              error.key() + "] after warmup\n  " + error.what() + "\n  at " + step.summary(),
          runtime_jit_hint(error.kernel(), command),
          jit_details(error.kernel(), error.key(), error.descriptors(), step.summary(), device)};
    } catch (const CudaError& error) {
      throw ToolError{kExitFailure,
                      "CUDA error on device " + std::to_string(device) + " at " + step.summary() +
                          ": " + error.what(),
                      "a kernel faulted or the device failed; rerun the same --seed under "
                      "compute-sanitizer to find the launch"};
    } catch (const InvalidArgument& error) {
      throw ToolError{kExitFailure,
                      "the battery made a call that the kernel rejects, at " + step.summary() +
                          ": " + error.what(),
                      "this is a bug in the battery (kernels/dsv4/battery.cpp) or in the "
                      "kernel's argument checks; report it with this command line"};
    }
  }
  result.seconds = seconds_since(start);
  const auto after = counters_by_kernel();
  for (const auto& [name, counters] : after) {
    const auto b = before.find(name);
    result.counters[name] = b == before.end() ? counters : difference(counters, b->second);
  }
  return result;
}

json device_json(const DeviceResult& r) {
  json kernels = json::array();
  for (const auto& [name, c] : r.counters) {
    const auto t = r.timing.find(name);
    const bool active = t != r.timing.end() || c.hits || c.misses || c.runtime_jit;
    if (!active) continue;
    const double ms = t != r.timing.end() ? t->second.milliseconds : 0.0;
    const auto b = r.bytes.find(name);
    const double bytes = b != r.bytes.end() ? b->second : 0.0;
    kernels.push_back({{"kernel", name},
                       {"launches", t != r.timing.end() ? t->second.launches : 0},
                       {"milliseconds", ms},
                       {"bytes", bytes},
                       {"gb_per_s", ms > 0 ? bytes / (ms * 1e-3) / 1e9 : 0.0},
                       {"hits", c.hits},
                       {"misses", c.misses},
                       {"compiles", c.compiles},
                       {"loads", c.loads},
                       {"disk_loads", c.disk_loads},
                       {"runtime_jit", c.runtime_jit}});
  }
  return {{"device", r.device},
          {"name", r.name},
          {"arch", r.arch},
          {"seconds", r.seconds},
          {"workspace_bytes", r.workspace_bytes},
          {"battery", r.totals.to_json()},
          {"kernels", kernels}};
}

void print_device(const DeviceResult& r, const Style& out) {
  std::printf("\n%s %s (%s): %s steps, %s tokens in %.2f s; battery workspace %s\n",
              out.bold("device " + std::to_string(r.device)).c_str(), r.name.c_str(),
              r.arch.c_str(), with_separators(r.totals.steps).c_str(),
              with_separators(r.totals.tokens).c_str(), r.seconds,
              bytes_text(static_cast<double>(r.workspace_bytes)).c_str());
  Table table({{"kernel"},
               {"launches", Table::Align::right},
               {"time ms", Table::Align::right},
               {"moved", Table::Align::right},
               {"GB/s", Table::Align::right},
               {"hits", Table::Align::right},
               {"misses", Table::Align::right},
               {"compiles", Table::Align::right},
               {"loads", Table::Align::right},
               {"runtime JIT", Table::Align::right}});
  KernelCounters sum;
  std::uint64_t launches = 0;
  double ms_total = 0, bytes_total = 0;
  const auto count = [&out](std::uint64_t value, bool bad) {
    return bad && value ? out.red(std::to_string(value)) : std::to_string(value);
  };
  for (const auto& [name, c] : r.counters) {
    const auto t = r.timing.find(name);
    if (t == r.timing.end() && !c.hits && !c.misses && !c.runtime_jit) continue;
    const double ms = t != r.timing.end() ? t->second.milliseconds : 0.0;
    const auto b = r.bytes.find(name);
    const double bytes = b != r.bytes.end() ? b->second : 0.0;
    const std::uint64_t n = t != r.timing.end() ? t->second.launches : 0;
    launches += n;
    ms_total += ms;
    bytes_total += bytes;
    sum.hits += c.hits;
    sum.misses += c.misses;
    sum.compiles += c.compiles;
    sum.loads += c.loads;
    sum.runtime_jit += c.runtime_jit;
    table.add_row({name, with_separators(static_cast<long long>(n)), fixed(ms, 2),
                   bytes_text(bytes), ms > 0 ? fixed(bytes / (ms * 1e-3) / 1e9, 1) : "-",
                   count(c.hits, false), count(c.misses, true), count(c.compiles, true),
                   count(c.loads, true), count(c.runtime_jit, true)});
  }
  table.add_footer({"total", with_separators(static_cast<long long>(launches)), fixed(ms_total, 2),
                    bytes_text(bytes_total),
                    ms_total > 0 ? fixed(bytes_total / (ms_total * 1e-3) / 1e9, 1) : "-",
                    count(sum.hits, false), count(sum.misses, true), count(sum.compiles, true),
                    count(sum.loads, true), count(sum.runtime_jit, true)});
  table.print(stdout, out);
}

int run_on_gpus(const RunCommand& command, const dsv4::Dsv4Config& config,
                const dsv4::AttentionKernels& kernels, const dsv4::BatteryOptions& battery,
                WarmupRegistry& registry, std::shared_ptr<TimingBackend> timing, MonitorMode mode) {
  std::vector<int> devices = selected_devices(command.devices);
  if (devices.empty()) {
    for (int d = 0; d < cuda::device_count(); ++d) devices.push_back(d);
  }
  const Style out = Style::for_stream(stdout);
  WarmupOptions options;
  options.arch = config.serving.target_arch;
  options.devices = devices;
  options.jobs = command.jobs;
  options.compile_processes = !command.in_process;
  options.progress = command.json ? ProgressStyle::none : ProgressStyle::automatic;
  const WarmupReport report = registry.warmup(options);
  for (const KeyReport& key : report.keys) {
    if (!key.error.empty()) {
      std::fprintf(stderr, "compile failed: %s [%s] for %s:\n  %s\n", key.kernel.c_str(),
                   key.key.c_str(), key.arch.c_str(), key.error.c_str());
    }
  }
  if (!report.ok()) {
    throw ToolError{kExitCompileFailure,
                    std::to_string(report.failed()) + " of " + std::to_string(report.total_keys()) +
                        " keys failed to compile during warmup; nothing was run",
                    "read the NVRTC log above; `zerojit warmup -v` with the same options shows "
                    "every key"};
  }
  if (!command.json) {
    std::printf("%s %s\n", out.dim("warmup:").c_str(), report.summary_line().c_str());
    std::printf("%s %s mode, %s\n", out.dim("monitor:").c_str(),
                std::string(to_string(mode)).c_str(),
                Monitor::instance().armed() ? "armed" : "not armed");
  }
  for (int device : devices) {
    const std::string arch = Runtime::instance().target_arch(device);
    if (arch != config.serving.target_arch && !command.json) {
      print_note("device " + std::to_string(device) + " is " + arch +
                 " but the configuration targets " + config.serving.target_arch +
                 "; kernels were compiled for the device");
    }
  }
  std::vector<DeviceResult> results;
  for (int device : devices) {
    results.push_back(run_on_device(command, config, kernels, battery, *timing, device));
    if (!command.json) print_device(results.back(), out);
  }
  // Every executor-cache miss after warmup is a compile or a module load; the monitor counts
  // them as runtime JIT only while armed (not with --monitor off), so misses are the measure.
  std::uint64_t runtime_jit = 0;
  for (const auto& r : results) {
    for (const auto& [name, c] : r.counters) runtime_jit += c.misses;
  }
  if (command.json) {
    json devices_json = json::array();
    for (const auto& r : results) devices_json.push_back(device_json(r));
    json document = {{"ok", true},
                     {"exit_code", kExitOk},
                     {"mode", "gpu"},
                     {"monitor", std::string(to_string(mode))},
                     {"configuration", config},
                     {"warmup", json::parse(report.to_json())},
                     {"devices", devices_json},
                     {"runtime_jit_total", runtime_jit},
                     {"counters", json::parse(Monitor::instance().counters_json())}};
    std::cout << document.dump() << "\n";
    return kExitOk;
  }
  std::printf("\n");
  if (runtime_jit == 0) {
    std::printf("%s no runtime JIT on %zu device(s): every launch was served by warmup\n",
                out.green("ok:").c_str(), results.size());
  } else {
    std::printf(
        "%s %llu compile(s) or load(s) after warmup (monitor %s: not failing); see the "
        "warnings above\n",
        out.yellow("runtime JIT:").c_str(), static_cast<unsigned long long>(runtime_jit),
        std::string(to_string(mode)).c_str());
  }
  return kExitOk;
}

}  // namespace

CLI::App* add_run_command(CLI::App& app, RunCommand& command) {
  CLI::App* sub = app.add_subcommand(
      "run",
      "Warm up, arm the monitor, and run a randomized serving battery through the kernels as "
      "the attention layers call them (on each GPU; without one, through dispatch alone)");
  add_config_options(*sub, command.config);
  add_cache_options(*sub, command.cache);
  sub->add_option("--steps", command.steps, "Serving steps (forward passes)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  sub->add_option("--seed", command.seed, "Seed of the battery")->capture_default_str();
  sub->add_option("--monitor", command.monitor,
                  "What a compile after warmup does: off, warn (report, go on) or error (fail "
                  "with exit code 1)")
      ->capture_default_str()
      ->check(CLI::IsMember({"off", "warn", "error"}));
  sub->add_flag("--dispatch-only", command.dispatch_only,
                "No launches: check each call's key against the manifest (the default without "
                "a GPU)");
  sub->add_option("--layers", command.layers, "Layers of each kind (sliding-window, C4, C128)")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  sub->add_option("--max-model-len", command.max_model_len,
                  "Longest sequence of the battery (0: min(max_position_embeddings, 65536))")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--max-num-seqs", command.max_num_seqs, "Requests in one step")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  sub->add_option("--devices", command.devices, "GPUs to run on: all, or a list such as 0,1")
      ->capture_default_str();
  sub->add_option("--jobs", command.jobs, "Parallel compiles during warmup (0: one per core)")
      ->check(CLI::NonNegativeNumber);
  sub->add_flag("--in-process", command.in_process,
                "Compile in threads of this process instead of forked worker processes");
  sub->add_flag("--json", command.json, "Machine-readable output");
  return sub;
}

int run_run(const RunCommand& command) {
  install_cache(command.cache);
  const dsv4::Dsv4Config config = build_config(command.config);
  const dsv4::AttentionKernels kernels(config);
  dsv4::BatteryOptions battery;
  battery.seed = command.seed;
  battery.max_model_len = command.max_model_len;
  battery.max_num_seqs = command.max_num_seqs;
  battery.layers_per_kind = command.layers;
  battery = dsv4::resolved_battery_options(config, battery);
  const MonitorMode mode = parse_monitor_mode(command.monitor).value_or(MonitorMode::error);
  Monitor::instance().set_mode(mode);

  std::string why;
  bool gpu = false;
  if (command.dispatch_only) {
    why = "--dispatch-only";
  } else if (cuda::device_count() == 0) {
    why = "no GPU: " + (cuda::driver_available() ? std::string("the driver reports no device")
                                                 : cuda::driver_unavailable_reason());
    parse_devices(command.devices);  // still reject a malformed list
  } else {
    gpu = true;
  }
  // The timing backend must see every module load, so it goes in before warmup.
  std::shared_ptr<TimingBackend> timing;
  if (gpu) {
    timing = std::make_shared<TimingBackend>(make_cuda_backend());
    Runtime::instance().set_backend(timing);
  }
  WarmupRegistry registry;
  register_dsv4_warmup(config, command.config, registry);
  const Manifest manifest = checked_manifest(registry);
  if (!command.json) {
    const Style out = Style::for_stream(stdout);
    std::string what = describe_config(config);
    if (command.config.testing_warmup_max_tokens > 0) {
      what += " [testing: warmup believes max_num_batched_tokens=" +
              std::to_string(command.config.testing_warmup_max_tokens) + "]";
    }
    std::printf("%s %s\n", out.bold("zerojit run:").c_str(), what.c_str());
    std::printf("%s %s\n", out.dim("battery:").c_str(),
                battery_line(command, battery, config).c_str());
    if (gpu) std::printf("%s %s\n", out.dim("cache:").c_str(), describe_cache().c_str());
    std::fflush(stdout);
  }
  if (!gpu) {
    if (!command.dispatch_only && !command.json) {
      print_note(why + "; running the battery through dispatch only (no launches)");
    }
    return run_dispatch_only(command, config, kernels, battery, manifest, mode, why);
  }
  return run_on_gpus(command, config, kernels, battery, registry, timing, mode);
}

}  // namespace zerojit::tool
