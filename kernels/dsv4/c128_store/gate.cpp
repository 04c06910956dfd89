#include "dsv4/c128_store/gate.hpp"

#include "dsv4/compressor/gate_common.hpp"

namespace zerojit::dsv4 {

std::optional<C128DsMlaStoreGate> c128_ds_mla_store_gate(const Dsv4Config& config) {
  if (!runs_compressor(config, kHcaCompressRatio) || !uses_ds_mla_cache(config)) {
    return std::nullopt;
  }
  return C128DsMlaStoreGate{
      .head_dim = config.model.head_dim,
      .rope_head_dim = config.model.qk_rope_head_dim,
      .kv_cache_block_size = compressed_block_size(config.serving.block_size, kHcaCompressRatio),
      .page_stride_bytes = effective_c128_page_stride_bytes(config.serving),
      .norm_weight_dtype = config.model.dtype,
  };
}

std::optional<C128FullStoreGate> c128_full_store_gate(const Dsv4Config& config) {
  if (!runs_compressor(config, kHcaCompressRatio) || uses_ds_mla_cache(config)) {
    return std::nullopt;
  }
  return C128FullStoreGate{
      .head_dim = config.model.head_dim,
      .rope_head_dim = config.model.qk_rope_head_dim,
      .store_full_fp8 = stores_full_fp8(config),
      .norm_weight_dtype = config.model.dtype,
      .kv_cache_block_size = compressed_block_size(config.serving.block_size, kHcaCompressRatio),
  };
}

}  // namespace zerojit::dsv4
