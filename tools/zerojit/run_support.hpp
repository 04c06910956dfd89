// What the parts of `zerojit run` share: the battery's step totals and the runtime-JIT report.
// run_command.cpp parses and drives; run_dispatch.cpp checks keys through dispatch alone;
// run_gpu.cpp launches on each GPU, timed.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "dsv4/battery/battery.hpp"
#include "run_command.hpp"
#include "timing_backend.hpp"
#include "zerojit/monitor.hpp"
#include "zerojit/registry.hpp"

namespace zerojit::tool {

using RunClock = std::chrono::steady_clock;

inline double seconds_since(RunClock::time_point start) {
  return std::chrono::duration<double>(RunClock::now() - start).count();
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
  nlohmann::json to_json() const {
    return {{"steps", steps},
            {"tokens", tokens},
            {"largest_step_tokens", largest},
            {"decode_tokens", decode_tokens},
            {"prefill_tokens", prefill_tokens}};
  }
};

// What to do about a runtime JIT of `kernel` (the testing option makes one on purpose).
std::string runtime_jit_hint(const std::string& kernel, const RunCommand& command);

// The JSON details of a runtime JIT: kernel, key, descriptors, step (and device when >= 0).
std::string jit_details(const std::string& kernel, const std::string& key,
                        const std::string& descriptors, const std::string& step, int device);

// The battery through dispatch alone: every call planned, every key checked against the
// manifest. `why` says why no GPU runs it.
int run_dispatch_only(const RunCommand& command, const dsv4::Dsv4Config& config,
                      const dsv4::AttentionKernels& kernels, const dsv4::BatteryOptions& battery,
                      const Manifest& manifest, MonitorMode mode, const std::string& why);

// Warms the manifest on each selected GPU, then launches the battery on each in turn, timed
// by `timing` (installed as the runtime's backend before warmup).
int run_on_gpus(const RunCommand& command, const dsv4::Dsv4Config& config,
                const dsv4::AttentionKernels& kernels, const dsv4::BatteryOptions& battery,
                WarmupRegistry& registry, std::shared_ptr<TimingBackend> timing, MonitorMode mode);

}  // namespace zerojit::tool
