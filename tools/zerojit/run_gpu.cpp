// `zerojit run` on GPUs: warmup on each selected device, then the battery launched through the
// kernels, every launch timed, and each device's monitor counters.
#include <cstdio>
#include <map>

#include "exit_codes.hpp"
#include "json_output.hpp"
#include "run_support.hpp"
#include "terminal.hpp"
#include "zerojit/cuda.hpp"
#include "zerojit/runtime.hpp"

namespace zerojit::tool {
namespace {

using nlohmann::json;

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
  const auto start = RunClock::now();
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
                      "this is a bug in the battery (kernels/dsv4/battery/) or in the "
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

}  // namespace

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
  if (auto missing = failing_for_want_of_nvrtc(report)) throw *missing;
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
    print_json(success_document(
        "run", {{"mode", "gpu"},
                {"monitor", std::string(to_string(mode))},
                {"configuration", config},
                {"warmup", parse_library_json(report.to_json())},
                {"devices", devices_json},
                {"runtime_jit_total", runtime_jit},
                {"counters", parse_library_json(Monitor::instance().counters_json())}}));
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

}  // namespace zerojit::tool
