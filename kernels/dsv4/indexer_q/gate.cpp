#include "dsv4/indexer_q/gate.hpp"

#include <string>

namespace zerojit::dsv4 {

namespace {

bool is_power_of_two(int value) { return value > 0 && (value & (value - 1)) == 0; }

// The kernels' domain, refused on the config.json field rather than later in dispatch, whose
// message would name the kernel's argument ("rope_dim 7") and not the values that work: 16
// elements per thread and at most one warp per head; MXFP4 packs 32 elements under one scale,
// so the rotated tail must fill whole blocks.
void check_domain(const Dsv4Config& config) {
  const ModelConfig& model = config.model;
  const std::string runs =
      " for the Lightning Indexer's query kernel, which runs because some layer has compress "
      "ratio 4";
  const int head_dim = model.index_head_dim;
  if (head_dim % 16 != 0 || !is_power_of_two(head_dim / 16) || head_dim / 16 > 32) {
    refuse_model_field(model, "field 'index_head_dim' must be 16, 32, 64, 128, 256 or 512" + runs +
                                  ", got " + std::to_string(head_dim) + " (DSv4 uses 128)");
  }
  const bool mxfp4 = config.serving.indexer_dtype == IndexerDtype::mxfp4;
  const int granule = mxfp4 ? 32 : 16;
  const std::string variant = mxfp4 ? " (indexer_dtype mxfp4)" : " (indexer_dtype fp8)";
  const int rope = model.qk_rope_head_dim;
  if (rope % granule != 0) {
    refuse_model_field(model, "field 'qk_rope_head_dim' must be a multiple of " +
                                  std::to_string(granule) + runs + variant + ", got " +
                                  std::to_string(rope) + " (DSv4 uses 64)");
  }
  if ((head_dim - rope) % granule != 0) {
    refuse_model_field(model, "field 'index_head_dim' minus 'qk_rope_head_dim' (" +
                                  std::to_string(head_dim) + " - " + std::to_string(rope) +
                                  ") must be a multiple of " + std::to_string(granule) + runs +
                                  variant);
  }
}

}  // namespace

std::optional<IndexerQGate> indexer_q_gate(const Dsv4Config& config) {
  const ModelConfig& model = config.model;
  if (config.serving.block_size <= 0 || !has_compress_ratio(model, kCsaCompressRatio) ||
      model.index_n_heads <= 0 || model.index_head_dim <= 0 || model.qk_rope_head_dim <= 0) {
    return std::nullopt;
  }
  check_domain(config);
  return IndexerQGate{
      .variant = config.serving.indexer_dtype,
      .head_dim = model.index_head_dim,
      .rope_dim = model.qk_rope_head_dim,
      .num_heads = model.index_n_heads,
      .cos_sin_dtype = FloatDtype::f32,
      .max_num_tokens = config.serving.max_num_batched_tokens,
  };
}

std::optional<IndexerQGate> indexer_q_fp8_gate(const Dsv4Config& config) {
  auto gate = indexer_q_gate(config);
  if (gate && gate->variant != IndexerDtype::fp8) gate.reset();
  return gate;
}

std::optional<IndexerQGate> indexer_q_mxfp4_gate(const Dsv4Config& config) {
  auto gate = indexer_q_gate(config);
  if (gate && gate->variant != IndexerDtype::mxfp4) gate.reset();
  return gate;
}

}  // namespace zerojit::dsv4
