// `zerojit run`: its options, and the driver that picks a GPU run or a dispatch-only one.
#include "run_command.hpp"

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "dsv4/battery/battery.hpp"
#include "exit_codes.hpp"
#include "run_support.hpp"
#include "terminal.hpp"
#include "timing_backend.hpp"
#include "warmup_command.hpp"
#include "zerojit/cuda.hpp"
#include "zerojit/runtime.hpp"

namespace zerojit::tool {
namespace {

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

}  // namespace

std::string runtime_jit_hint(const std::string& kernel, const RunCommand& command) {
  if (command.config.testing_warmup_max_tokens > 0) {
    return "expected in a test: --testing-warmup-max-tokens " +
           std::to_string(command.config.testing_warmup_max_tokens) +
           " narrowed the warmup on purpose; drop it to warm what serving reaches";
  }
  return "the warmup space registered for " + kernel +
         " misses this runtime call: widen it (its gate, kernels/dsv4/<kernel>/gate.cpp, and its "
         "warmup_space) so warmup compiles this key; `zerojit keys` lists what warmup "
         "compiles, and --monitor warn reports every miss without failing";
}

std::string jit_details(const std::string& kernel, const std::string& key,
                        const std::string& descriptors, const std::string& step, int device) {
  nlohmann::json details = {
      {"runtime_jit",
       {{"kernel", kernel}, {"key", key}, {"descriptors", descriptors}, {"step", step}}}};
  if (device >= 0) details["runtime_jit"]["device"] = device;
  return details.dump();
}

int run_run(const RunCommand& command) {
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

  const RunPlacement placement = run_placement(command.dispatch_only, command.devices);
  const std::string& why = placement.why;
  const bool gpu = !placement.devices.empty();
  // Also without a GPU: a cache root the GPU run would refuse is refused here too.
  install_cache(command.cache, "run");
  if (gpu) require_nvrtc();
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
