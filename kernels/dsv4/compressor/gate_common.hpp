// What the compressor kernels' gates share (spec section 7's orchestration).
#pragma once

#include <string>

#include "dsv4/config.hpp"

namespace zerojit::dsv4 {

// The head size the fused compressor kernels are written for (spec §3-§7).
inline constexpr int kCompressorHeadDim = 512;

// The width of the RoPE tail the fused compressor kernels rotate.
inline constexpr int kCompressorRopeDim = 64;

// The compressor path of a ratio: taken for head-512 models that have a cache and a layer
// with that ratio (CUDA, head_dim == 512). Where it is taken, a RoPE tail other than 64 is
// refused on its config.json field (ConfigError), as the kernels' keys carry its width.
inline bool runs_compressor(const Dsv4Config& config, int compress_ratio) {
  const ModelConfig& model = config.model;
  if (config.serving.block_size <= 0 || !has_compress_ratio(model, compress_ratio) ||
      model.head_dim != kCompressorHeadDim) {
    return false;
  }
  if (model.qk_rope_head_dim != kCompressorRopeDim) {
    refuse_model_field(model,
                       "field 'qk_rope_head_dim' must be 64 when head_dim is 512 and some layer "
                       "has compress ratio 4 or 128: the compressor kernels rotate a 64-dim "
                       "tail, got " +
                           std::to_string(model.qk_rope_head_dim));
  }
  return true;
}

inline bool uses_ds_mla_cache(const Dsv4Config& config) {
  return config.serving.kv_cache_dtype == KvCacheDtype::fp8_ds_mla;
}

inline bool stores_full_fp8(const Dsv4Config& config) {
  return config.serving.kv_cache_dtype == KvCacheDtype::fp8_e4m3;
}

}  // namespace zerojit::dsv4
