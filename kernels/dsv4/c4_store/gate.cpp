#include "dsv4/c4_store/gate.hpp"

#include "dsv4/compressor/gate_common.hpp"

namespace zerojit::dsv4 {

std::optional<C4DsMlaStoreGate> c4_ds_mla_store_gate(const Dsv4Config& config) {
  if (!runs_compressor(config, kCsaCompressRatio) || !uses_ds_mla_cache(config)) {
    return std::nullopt;
  }
  return C4DsMlaStoreGate{
      .head_dim = config.model.head_dim,
      .state_width = 2 * config.model.head_dim,
      .rope_head_dim = config.model.qk_rope_head_dim,
      .norm_weight_dtype = config.model.dtype,
      .kv_cache_block_size = compressed_block_size(config.serving.block_size, kCsaCompressRatio),
  };
}

std::optional<C4FullStoreGate> c4_full_store_gate(const Dsv4Config& config) {
  if (!runs_compressor(config, kCsaCompressRatio) || uses_ds_mla_cache(config)) {
    return std::nullopt;
  }
  return C4FullStoreGate{
      .head_dim = config.model.head_dim,
      .state_width = 2 * config.model.head_dim,
      .rope_head_dim = config.model.qk_rope_head_dim,
      .store_full_fp8 = stores_full_fp8(config),
      .norm_weight_dtype = config.model.dtype,
      .kv_cache_block_size = compressed_block_size(config.serving.block_size, kCsaCompressRatio),
  };
}

}  // namespace zerojit::dsv4
