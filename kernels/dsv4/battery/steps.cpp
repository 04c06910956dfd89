// The serving steps the battery drives: options, the step stream and the layer kinds.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "dsv4/battery/workspace.hpp"

namespace zerojit::dsv4 {
namespace {

constexpr std::int64_t kDefaultMaxModelLen = 65536;

}  // namespace

// --- Options, steps, generator -----------------------------------------------------------------

BatteryOptions resolved_battery_options(const Dsv4Config& config, BatteryOptions options) {
  const std::int64_t positions = config.model.max_position_embeddings;
  if (options.max_model_len == 0) options.max_model_len = std::min(positions, kDefaultMaxModelLen);
  if (options.max_model_len < 1 || options.max_model_len > positions) {
    throw ConfigError("battery: max_model_len must be in [1, max_position_embeddings = " +
                      std::to_string(positions) + "], got " +
                      std::to_string(options.max_model_len));
  }
  if (options.max_num_seqs < 1) throw ConfigError("battery: max_num_seqs must be >= 1");
  if (options.max_prefills < 1) throw ConfigError("battery: max_prefills must be >= 1");
  if (options.layers_per_kind < 1) throw ConfigError("battery: layers must be >= 1");
  if (options.kv_pool_blocks < 1 || options.state_pool_blocks < 1) {
    throw ConfigError("battery: the KV and state pools need at least one block");
  }
  return options;
}

int ServingStep::num_decodes() const {
  return static_cast<int>(std::count_if(requests.begin(), requests.end(),
                                        [](const BatteryRequest& r) { return !r.prefill; }));
}
int ServingStep::num_prefills() const { return static_cast<int>(requests.size()) - num_decodes(); }
std::int64_t ServingStep::num_tokens() const { return num_decode_tokens() + num_prefill_tokens(); }
std::int64_t ServingStep::num_decode_tokens() const {
  std::int64_t tokens = 0;
  for (const auto& r : requests) tokens += r.prefill ? 0 : r.query_len;
  return tokens;
}
std::int64_t ServingStep::num_prefill_tokens() const {
  std::int64_t tokens = 0;
  for (const auto& r : requests) tokens += r.prefill ? r.query_len : 0;
  return tokens;
}

std::string ServingStep::summary() const {
  std::int64_t longest = 0;
  for (const auto& r : requests) longest = std::max(longest, r.seq_len());
  return "step " + std::to_string(index) + ": " + std::to_string(num_decodes()) + " decodes, " +
         std::to_string(num_prefills()) + " prefill chunks (T=" + std::to_string(num_tokens()) +
         ", " + std::to_string(num_prefill_tokens()) + " prefill tokens, longest sequence " +
         std::to_string(longest) + ")";
}

StepGenerator::StepGenerator(const Dsv4Config& config, const BatteryOptions& options)
    : random_(options.seed) {
  const BatteryOptions resolved = resolved_battery_options(config, options);
  max_tokens_ = config.serving.max_num_batched_tokens;
  max_model_len_ = resolved.max_model_len;
  max_num_seqs_ = resolved.max_num_seqs;
  max_prefills_ = resolved.max_prefills;
  block_size_ = config.serving.block_size;
}

std::int64_t StepGenerator::log_uniform(std::int64_t low, std::int64_t high) {
  if (high <= low) return low;
  std::uniform_real_distribution<double> unit(std::log(static_cast<double>(low) + 1.0),
                                              std::log(static_cast<double>(high) + 1.0));
  const auto value = static_cast<std::int64_t>(std::llround(std::exp(unit(random_)) - 1.0));
  return std::clamp(value, low, high);
}

std::int64_t StepGenerator::random_context(std::int64_t limit) {
  if (limit <= 0) return 0;
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const double u = unit(random_);
  if (u < 0.2) return 0;  // a first chunk: positions < 7 reach the C4 window's masked rows
  if (u < 0.55) {
    // Just before a compress or page boundary, so the step's tokens cross it.
    std::vector<std::int64_t> periods = {4, 128};
    if (block_size_ > 0) periods.push_back(block_size_);
    const std::int64_t period =
        periods[std::uniform_int_distribution<std::size_t>(0, periods.size() - 1)(random_)];
    const std::int64_t multiples = std::max<std::int64_t>(1, limit / period);
    const std::int64_t k = std::uniform_int_distribution<std::int64_t>(1, multiples)(random_);
    const std::int64_t back = std::uniform_int_distribution<std::int64_t>(0, 3)(random_);
    return std::clamp<std::int64_t>(k * period - back, 0, limit);
  }
  return log_uniform(0, limit);
}

ServingStep StepGenerator::next() {
  ServingStep step;
  step.index = index_++;
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  // The token budget: both ends often (the coarsening and grid edges live there), the rest
  // log-uniform.
  const double size_draw = unit(random_);
  const std::int64_t budget = size_draw < 0.1   ? 1
                              : size_draw < 0.2 ? max_tokens_
                                                : log_uniform(1, max_tokens_);
  const double mix = unit(random_);
  const bool decode_only = mix < 0.35;
  const bool prefill_only = !decode_only && mix < 0.65;
  std::int64_t decodes = 0;
  if (decode_only) {
    decodes = std::min<std::int64_t>(budget, max_num_seqs_);
  } else if (!prefill_only && budget >= 2 && max_num_seqs_ >= 2) {
    decodes = std::uniform_int_distribution<std::int64_t>(
        1, std::min<std::int64_t>(max_num_seqs_ - 1, budget - 1))(random_);
  }
  std::int64_t remaining = decode_only ? 0 : budget - decodes;
  const std::int64_t free_slots = max_num_seqs_ - decodes;
  std::vector<std::int64_t> chunks;
  if (remaining > 0 && free_slots > 0) {
    const std::int64_t count = std::uniform_int_distribution<std::int64_t>(
        1, std::min<std::int64_t>({max_prefills_, remaining, free_slots}))(random_);
    // Random proportions, each chunk at least one token, summing to `remaining`.
    std::vector<double> weights(static_cast<std::size_t>(count));
    for (double& w : weights) w = 0.05 + unit(random_);
    const double total = std::accumulate(weights.begin(), weights.end(), 0.0);
    std::int64_t assigned = 0;
    for (std::size_t i = 0; i < weights.size(); ++i) {
      const std::int64_t left = static_cast<std::int64_t>(weights.size() - i - 1);
      std::int64_t chunk =
          i + 1 == weights.size()
              ? remaining - assigned
              : static_cast<std::int64_t>(static_cast<double>(remaining) * weights[i] / total);
      chunk = std::clamp<std::int64_t>(chunk, 1, remaining - assigned - left);
      chunks.push_back(std::min(chunk, max_model_len_));
      assigned += chunk;
    }
  }
  if (decodes == 0 && chunks.empty()) decodes = 1;
  for (std::int64_t i = 0; i < decodes; ++i) {
    step.requests.push_back({random_context(max_model_len_ - 1), 1, false});
  }
  for (const std::int64_t chunk : chunks) {
    step.requests.push_back({random_context(max_model_len_ - chunk), chunk, true});
  }
  return step;
}

// --- Names -------------------------------------------------------------------------------------

std::string_view to_string(LayerKind kind) {
  switch (kind) {
    case LayerKind::sliding_window:
      return "sliding-window";
    case LayerKind::csa:
      return "c4";
    case LayerKind::hca:
      return "c128";
  }
  return "?";
}

LayerKind layer_kind(int compress_ratio) {
  switch (compress_ratio) {
    case kSlidingWindowOnlyRatio:
      return LayerKind::sliding_window;
    case kCsaCompressRatio:
      return LayerKind::csa;
    case kHcaCompressRatio:
      return LayerKind::hca;
  }
  throw ConfigError("battery: no layer kind has compress ratio " + std::to_string(compress_ratio));
}

std::vector<LayerKind> layer_kinds(const ModelConfig& model) {
  std::vector<LayerKind> kinds;
  if (has_compress_ratio(model, kSlidingWindowOnlyRatio))
    kinds.push_back(LayerKind::sliding_window);
  if (has_compress_ratio(model, kCsaCompressRatio)) kinds.push_back(LayerKind::csa);
  if (has_compress_ratio(model, kHcaCompressRatio)) kinds.push_back(LayerKind::hca);
  return kinds;
}

}  // namespace zerojit::dsv4
