// The DSv4 attention chain as a serving step runs it (docs/BENCHMARKS.md section 11): the
// attention-side calls, in the serving battery's order (kernels/dsv4/battery), timed back to
// back with and without programmatic dependent launch (PDL), a layer and a whole step.
//
//   zerojit_bench_chain [--models flash,pro] [--repeat N] [--json PATH]
//
// For DSv4-Flash and DSv4-Pro with the default serving configuration, at decode steps of 1, 8
// and 64 requests (one token each, contexts drawn in [1024, 32768)) and at one prefill chunk of
// 2048 and of 8192 tokens (a fresh prompt), each layer kind's calls (sliding window, C4, C128;
// the battery's BatteryWorkspace, layer 0 of each kind) are timed as:
//  * alone: each kernel in a CUDA graph of its own, without PDL (its share of the chain);
//  * graph: the layer's launches captured in one CUDA graph, replayed after an L2 flush, median
//    of the repetitions; once launched without PDL, once with;
//  * eager: the same launches on a stream (no graph) behind a GPU spin that hides the host's
//    launch cost, after an L2 flush; without and with PDL.
// A step (Flash: 2 sliding-window, 21 C4, 20 C128 = 43 decoder layers; Pro: 30 C4, 31 C128 = 61;
// the MTP layer is left out) is timed as a full-graph engine runs it: every decoder layer's calls
// in the model's layer order, each layer on caches and compressor state of its own, captured in
// one CUDA graph, replayed after an L2 flush (and eager, behind a spin), without and with PDL.
// Between two layers the engine runs other kernels (attention, the MoE), which this chain
// leaves out, so a layer's first kernel here overlaps the previous layer's last one.
// Kernels compile at their first launch (outside every timed region).
//
// Exit codes: 0 = measured; 1 = an error; 77 = no CUDA device (nothing measured).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "dsv4/battery/battery.hpp"
#include "dsv4/config/presets.hpp"
#include "kernels/timing.hpp"
#include "zerojit/testing.hpp"

namespace zerojit::bench {
namespace {

using dsv4::AttentionCall;
using dsv4::LayerKind;

struct StepShape {
  std::string name;
  int decodes = 0;                  // one token each
  std::int64_t prefill_tokens = 0;  // one chunk
};

const StepShape kShapes[] = {{"decode 1", 1, 0},
                             {"decode 8", 8, 0},
                             {"decode 64", 64, 0},
                             {"prefill 2048", 0, 2048},
                             {"prefill 8192", 0, 8192}};

dsv4::ServingStep make_step(const StepShape& shape) {
  dsv4::ServingStep step;
  std::mt19937_64 random(2026 + static_cast<std::uint64_t>(shape.decodes));
  std::uniform_int_distribution<std::int64_t> context(1024, 32767);
  for (int i = 0; i < shape.decodes; ++i) step.requests.push_back({context(random), 1, false});
  if (shape.prefill_tokens > 0) step.requests.push_back({0, shape.prefill_tokens, true});
  return step;
}

// One kernel launch of a call, with PDL on or off.
struct KernelLaunch {
  std::string kernel;
  std::function<void(cuda::Stream, bool)> run;
};

std::vector<KernelLaunch> kernel_launches(const dsv4::AttentionKernels& kernels,
                                          const AttentionCall& call) {
  std::vector<KernelLaunch> out;
  std::visit(
      [&](const auto& call_args) {
        kernels.route(call_args, [&](auto& kernel, const auto& args) {
          auto* owner = &kernel;
          out.push_back({kernel.name(), [owner, args](cuda::Stream stream, bool pdl) {
                           auto launched = args;
                           dsv4::set_pdl(launched, pdl);
                           (*owner)(launched, stream);
                         }});
        });
      },
      call.args);
  return out;
}

Launch chain_launch(const std::vector<KernelLaunch>& chain, bool pdl) {
  return [&chain, pdl](cuda::Stream stream) {
    for (const KernelLaunch& launch : chain) launch.run(stream, pdl);
  };
}

struct PdlPair {
  double graph_us[2] = {0, 0};  // [without PDL, with PDL]
  double eager_us[2] = {0, 0};
};

// Without and with PDL, in turns, twice: the figure of each is the lower median of the two
// rounds (a shared host's noise only ever adds time).
PdlPair time_with_and_without_pdl(Timer& timer, const std::vector<KernelLaunch>& chain,
                                  int repetitions) {
  PdlPair pair;
  for (int round = 0; round < 2; ++round) {
    for (const bool pdl : {false, true}) {
      const Launch launches = chain_launch(chain, pdl);
      const double graph = timer.measure_graph({launches}, repetitions).median_us;
      const double eager = timer.measure({launches}, repetitions, true).median_us;
      double& g = pair.graph_us[pdl ? 1 : 0];
      double& e = pair.eager_us[pdl ? 1 : 0];
      g = round == 0 ? graph : std::min(g, graph);
      e = round == 0 ? eager : std::min(e, eager);
    }
  }
  return pair;
}

struct ChainFigures {
  std::vector<std::string> kernels;
  std::vector<double> alone_us;
  PdlPair chain;
};

ChainFigures time_chain(Timer& timer, const std::vector<KernelLaunch>& chain, int repetitions) {
  ChainFigures figures;
  for (const KernelLaunch& launch : chain) {
    figures.kernels.push_back(launch.kernel);
    const Launch alone = [&launch](cuda::Stream stream) { launch.run(stream, false); };
    figures.alone_us.push_back(timer.measure_graph({alone}, repetitions).median_us);
  }
  figures.chain = time_with_and_without_pdl(timer, chain, repetitions);
  return figures;
}

// The launches of one layer: the calls of layer `index` of its kind.
std::vector<KernelLaunch> layer_launches(const dsv4::AttentionKernels& kernels,
                                         const std::vector<AttentionCall>& calls, LayerKind kind,
                                         int index) {
  std::vector<KernelLaunch> chain;
  for (const AttentionCall& call : calls) {
    if (call.layer != kind || call.layer_index != index) continue;
    for (KernelLaunch& launch : kernel_launches(kernels, call)) chain.push_back(launch);
  }
  return chain;
}

// Every decoder layer's launches in the model's layer order, the n-th layer of a kind on that
// kind's n-th set of caches.
std::vector<KernelLaunch> step_launches(const dsv4::AttentionKernels& kernels,
                                        const std::vector<AttentionCall>& calls,
                                        const dsv4::ModelConfig& model) {
  std::map<LayerKind, int> next_index;
  std::vector<KernelLaunch> step;
  for (const int ratio : model.compress_ratios) {
    const LayerKind kind = dsv4::layer_kind(ratio);
    for (KernelLaunch& launch : layer_launches(kernels, calls, kind, next_index[kind]++)) {
      step.push_back(launch);
    }
  }
  return step;
}

// One layer of a kind in a graph of its own, with and without PDL, and its kernels alone.
nlohmann::json time_layer(Timer& timer, const std::vector<KernelLaunch>& chain, int repetitions,
                          const std::string& row, LayerKind kind, int count) {
  const ChainFigures f = time_chain(timer, chain, repetitions);
  double alone_sum = 0;
  for (const double t : f.alone_us) alone_sum += t;
  const PdlPair& c = f.chain;
  std::printf(
      "%-18s %-14s x%2d  graph %8.2f -> %8.2f us (%.3fx)  eager %8.2f -> %8.2f us (%.3fx)  "
      "kernels alone %8.2f us:",
      row.c_str(), std::string(to_string(kind)).c_str(), count, c.graph_us[0], c.graph_us[1],
      c.graph_us[0] / c.graph_us[1], c.eager_us[0], c.eager_us[1], c.eager_us[0] / c.eager_us[1],
      alone_sum);
  nlohmann::json shares = nlohmann::json::array();
  for (std::size_t i = 0; i < f.kernels.size(); ++i) {
    std::printf(" %s %.2f (%.0f %%)", f.kernels[i].c_str(), f.alone_us[i],
                100.0 * f.alone_us[i] / alone_sum);
    shares.push_back({{"kernel", f.kernels[i]}, {"alone_us", f.alone_us[i]}});
  }
  std::printf("\n");
  return {{"layer", std::string(to_string(kind))},
          {"layers", count},
          {"graph_us", {c.graph_us[0], c.graph_us[1]}},
          {"eager_us", {c.eager_us[0], c.eager_us[1]}},
          {"kernels", shares}};
}

std::map<LayerKind, int> layer_counts(const dsv4::ModelConfig& model) {
  std::map<LayerKind, int> counts;
  for (const int ratio : model.compress_ratios) counts[dsv4::layer_kind(ratio)]++;
  return counts;
}

int run(const std::vector<std::string>& models, int repetitions, const std::string& json_path) {
  const std::string unavailable = zerojit::testing::gpu_unavailable_reason();
  if (!unavailable.empty()) {
    std::fprintf(stderr, "zerojit_bench_chain: %s\n", unavailable.c_str());
    return 77;
  }
  cuda::make_device_current(0);
  const auto& api = cuda::driver();
  cuda::DeviceHandle device = 0;
  cuda::check(api.cuDeviceGet(&device, 0), "cuDeviceGet");
  constexpr int kAttributeClockRate = 13;  // CU_DEVICE_ATTRIBUTE_CLOCK_RATE, kHz
  int clock_khz = 0, l2_bytes = 0;
  cuda::check(api.cuDeviceGetAttribute(&clock_khz, kAttributeClockRate, device),
              "cuDeviceGetAttribute");
  cuda::check(api.cuDeviceGetAttribute(&l2_bytes, cuda::kAttributeL2CacheSize, device),
              "cuDeviceGetAttribute");
  zerojit::testing::Stream stream;
  Timer timer(stream.get(), clock_khz, l2_bytes > 0 ? l2_bytes : 50 << 20);
  std::printf(
      "zerojit_bench_chain: %d repetitions a figure (graph: median after an L2 flush; "
      "eager: median behind a spin, after a flush)\n",
      repetitions);

  nlohmann::json records = nlohmann::json::array();
  for (const std::string& model_name : models) {
    dsv4::Dsv4Config config = dsv4::default_config();
    if (model_name == "pro") config.model = dsv4::dsv4_pro();
    const dsv4::AttentionKernels kernels(config);
    const std::map<LayerKind, int> counts = layer_counts(config.model);
    dsv4::BatteryOptions options;
    options.max_num_seqs = 128;
    for (const auto& [kind, count] : counts) {
      options.layers_per_kind = std::max(options.layers_per_kind, count);
    }
    const auto memory = dsv4::make_device_battery_memory(0);
    dsv4::BatteryWorkspace workspace(kernels, options, *memory);
    for (const StepShape& shape : kShapes) {
      const std::vector<AttentionCall> calls = workspace.calls(make_step(shape));
      const std::string row = model_name + " " + shape.name;
      for (const auto& [kind, count] : counts) {
        const std::vector<KernelLaunch> chain = layer_launches(kernels, calls, kind, 0);
        if (chain.empty()) continue;
        nlohmann::json record = time_layer(timer, chain, repetitions, row, kind, count);
        record["model"] = model_name;
        record["shape"] = shape.name;
        records.push_back(std::move(record));
      }
      const int layers = static_cast<int>(config.model.compress_ratios.size());
      const PdlPair step = time_with_and_without_pdl(
          timer, step_launches(kernels, calls, config.model), repetitions);
      std::printf(
          "%-18s step of %d layers, one graph: %9.1f -> %9.1f us (%.3fx, %.2f -> %.2f us a "
          "layer)  eager %9.1f -> %9.1f us (%.3fx)\n",
          row.c_str(), layers, step.graph_us[0], step.graph_us[1],
          step.graph_us[0] / step.graph_us[1], step.graph_us[0] / layers, step.graph_us[1] / layers,
          step.eager_us[0], step.eager_us[1], step.eager_us[0] / step.eager_us[1]);
      records.push_back({{"model", model_name},
                         {"shape", shape.name},
                         {"step_layers", layers},
                         {"step_graph_us", {step.graph_us[0], step.graph_us[1]}},
                         {"step_eager_us", {step.eager_us[0], step.eager_us[1]}}});
    }
  }
  if (!json_path.empty()) std::ofstream(json_path) << records.dump(2) << "\n";
  return 0;
}

}  // namespace
}  // namespace zerojit::bench

int main(int argc, char** argv) {
  CLI::App app{"The DSv4 attention chain with and without programmatic dependent launch"};
  std::vector<std::string> models = {"flash", "pro"};
  int repetitions = 50;
  std::string json_path;
  app.add_option("--models", models, "flash, pro")
      ->delimiter(',')
      ->check(CLI::IsMember({"flash", "pro"}));
  app.add_option("--repeat", repetitions, "repetitions a figure")->check(CLI::Range(3, 100000));
  app.add_option("--json", json_path, "write the figures here");
  CLI11_PARSE(app, argc, argv);
  try {
    return zerojit::bench::run(models, repetitions, json_path);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "zerojit_bench_chain: %s\n", error.what());
    return 1;
  }
}
