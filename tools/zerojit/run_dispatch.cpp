// `zerojit run` without launches: the battery through dispatch alone, each call planned by its
// kernel and each key checked against the warmup manifest.
#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "exit_codes.hpp"
#include "json_output.hpp"
#include "run_support.hpp"
#include "terminal.hpp"

namespace zerojit::tool {
namespace {

using nlohmann::json;

struct DispatchKernelStats {
  std::uint64_t launches = 0;
  std::map<std::string, std::uint64_t> keys;  // key -> launches
};

struct Miss {
  std::string kernel, key, descriptors, step;
  std::uint64_t count = 0;
};

// What dispatch met, kernel by kernel in the manifest's order (then in order of first launch),
// against the keys the manifest warms.
struct DispatchTally {
  explicit DispatchTally(const Manifest& manifest) {
    for (const ManifestEntry& entry : manifest.entries) {
      warmed.emplace(entry.kernel->name(), entry.key_text);
      if (order.empty() || order.back() != entry.kernel->name())
        order.push_back(entry.kernel->name());
    }
  }

  // Counts one planned launch; a key the manifest lacks is a miss, reported (warn) or fatal
  // (error) the first time it is met.
  void add(const dsv4::PlannedLaunch& launch, const dsv4::ServingStep& step, MonitorMode mode,
           const RunCommand& command) {
    const std::string& name = launch.kernel->name();
    if (!stats.count(name) && std::find(order.begin(), order.end(), name) == order.end()) {
      order.push_back(name);
    }
    DispatchKernelStats& s = stats[name];
    ++s.launches;
    ++s.keys[launch.key];
    if (warmed.count({name, launch.key})) return;
    auto it = std::find_if(misses.begin(), misses.end(),
                           [&](const Miss& m) { return m.kernel == name && m.key == launch.key; });
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

  std::vector<std::string> unmet(const Manifest& manifest) const {
    std::vector<std::string> lines;
    for (const ManifestEntry& entry : manifest.entries) {
      const auto s = stats.find(entry.kernel->name());
      if (s == stats.end() || !s->second.keys.count(entry.key_text)) {
        lines.push_back(entry.kernel->name() + " " + entry.key_text);
      }
    }
    return lines;
  }

  std::size_t keys_met() const {
    std::size_t n = 0;
    for (const auto& [name, s] : stats) n += s.keys.size();
    return n;
  }

  std::set<std::pair<std::string, std::string>> warmed;
  std::vector<std::string> order;
  std::map<std::string, DispatchKernelStats> stats;
  std::vector<Miss> misses;
  StepTotals totals;
};

// Every call of `command.steps` battery steps planned by its kernel, each launch counted.
void plan_battery(const RunCommand& command, const dsv4::Dsv4Config& config,
                  const dsv4::AttentionKernels& kernels, const dsv4::BatteryOptions& battery,
                  MonitorMode mode, DispatchTally& tally) {
  dsv4::StepGenerator generator(config, battery);
  const auto memory = dsv4::make_virtual_battery_memory(0);
  dsv4::BatteryWorkspace workspace(kernels, battery, *memory);
  for (std::int64_t i = 0; i < command.steps; ++i) {
    const dsv4::ServingStep step = generator.next();
    tally.totals.add(step);
    for (const dsv4::AttentionCall& call : workspace.calls(step)) {
      std::vector<dsv4::PlannedLaunch> launches;
      try {
        launches = dsv4::plan_call(kernels, call);
      } catch (const std::exception& error) {
        throw ToolError{kExitFailure,
                        "the battery made a " + std::string(call.kind) +
                            " call that the kernel rejects, at " + step.summary() + ": " +
                            error.what(),
                        "this is a bug in the battery (kernels/dsv4/battery/) or in the "
                        "kernel's argument checks; report it with this command line"};
      }
      for (const dsv4::PlannedLaunch& launch : launches) tally.add(launch, step, mode, command);
    }
  }
}

void print_dispatch_json(const DispatchTally& tally, const dsv4::Dsv4Config& config,
                         const Manifest& manifest, MonitorMode mode, const std::string& why,
                         double seconds) {
  json kernels_json = json::array();
  for (const std::string& name : tally.order) {
    const auto s = tally.stats.find(name);
    if (s == tally.stats.end()) continue;
    json keys = json::array();
    for (const auto& [key, launches] : s->second.keys) {
      keys.push_back({{"key", key},
                      {"launches", launches},
                      {"in_manifest", tally.warmed.count({name, key}) > 0}});
    }
    kernels_json.push_back({{"kernel", name}, {"launches", s->second.launches}, {"keys", keys}});
  }
  json misses_json = json::array();
  for (const Miss& m : tally.misses) {
    misses_json.push_back({{"kernel", m.kernel},
                           {"key", m.key},
                           {"descriptors", m.descriptors},
                           {"first_step", m.step},
                           {"launches", m.count}});
  }
  print_json(success_document("run", {{"mode", "dispatch-only"},
                                      {"reason", why},
                                      {"monitor", std::string(to_string(mode))},
                                      {"configuration", config},
                                      {"battery", tally.totals.to_json()},
                                      {"seconds", seconds},
                                      {"manifest_keys", manifest.size()},
                                      {"keys_met", tally.keys_met()},
                                      {"kernels", kernels_json},
                                      {"runtime_jit", misses_json},
                                      {"manifest_keys_not_met", tally.unmet(manifest)}}));
}

void print_dispatch_table(const DispatchTally& tally, const Manifest& manifest, MonitorMode mode,
                          double seconds) {
  const Style out = Style::for_stream(stdout);
  Table table({{"kernel"},
               {"launches", Table::Align::right},
               {"keys met", Table::Align::right},
               {"not in manifest", Table::Align::right}});
  std::uint64_t launches_total = 0;
  for (const std::string& name : tally.order) {
    const auto s = tally.stats.find(name);
    if (s == tally.stats.end()) continue;
    std::size_t missing = 0;
    for (const auto& [key, count] : s->second.keys) {
      missing += tally.warmed.count({name, key}) ? 0 : 1;
    }
    launches_total += s->second.launches;
    table.add_row({name, with_separators(static_cast<long long>(s->second.launches)),
                   std::to_string(s->second.keys.size()),
                   missing ? out.red(std::to_string(missing)) : "0"});
  }
  const std::size_t keys_met = tally.keys_met();
  table.add_footer({"total", with_separators(static_cast<long long>(launches_total)),
                    std::to_string(keys_met),
                    tally.misses.empty() ? "0" : out.red(std::to_string(tally.misses.size()))});
  std::printf("\n");
  table.print(stdout, out);
  const StepTotals& totals = tally.totals;
  std::printf("\n%s steps, %s tokens (largest step %lld) through dispatch in %.2f s\n",
              with_separators(totals.steps).c_str(), with_separators(totals.tokens).c_str(),
              static_cast<long long>(totals.largest), seconds);
  const std::vector<std::string> unmet = tally.unmet(manifest);
  if (!unmet.empty()) {
    std::printf("%s %zu manifest key(s) never met (compiled but not reached by this battery):\n",
                out.yellow("note:").c_str(), unmet.size());
    for (const auto& line : unmet) std::printf("  %s\n", line.c_str());
  }
  if (tally.misses.empty()) {
    std::printf("%s every key met (%zu) is in the warmup manifest (%zu keys)\n",
                out.green("ok:").c_str(), keys_met, manifest.size());
  } else {
    std::printf("%s %zu key(s) met are not in the manifest (monitor %s: not failing)\n",
                out.yellow("runtime JIT:").c_str(), tally.misses.size(),
                std::string(to_string(mode)).c_str());
    for (const Miss& m : tally.misses) {
      std::printf("  %s [%s]: %llu launches, first at %s\n", m.kernel.c_str(), m.key.c_str(),
                  static_cast<unsigned long long>(m.count), m.step.c_str());
    }
  }
}

}  // namespace

int run_dispatch_only(const RunCommand& command, const dsv4::Dsv4Config& config,
                      const dsv4::AttentionKernels& kernels, const dsv4::BatteryOptions& battery,
                      const Manifest& manifest, MonitorMode mode, const std::string& why) {
  DispatchTally tally(manifest);
  const auto start = RunClock::now();
  plan_battery(command, config, kernels, battery, mode, tally);
  const double seconds = seconds_since(start);
  if (command.json) {
    print_dispatch_json(tally, config, manifest, mode, why, seconds);
  } else {
    print_dispatch_table(tally, manifest, mode, seconds);
  }
  return kExitOk;
}

}  // namespace zerojit::tool
