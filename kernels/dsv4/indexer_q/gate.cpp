#include "dsv4/indexer_q/gate.hpp"

namespace zerojit::dsv4 {

std::optional<IndexerQGate> indexer_q_gate(const Dsv4Config& config) {
  const ModelConfig& model = config.model;
  if (config.serving.block_size <= 0 || !has_compress_ratio(model, kCsaCompressRatio) ||
      model.index_n_heads <= 0 || model.index_head_dim <= 0 || model.qk_rope_head_dim <= 0) {
    return std::nullopt;
  }
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
