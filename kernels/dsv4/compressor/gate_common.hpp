// What the compressor kernels' gates share (spec section 7's orchestration).
#pragma once

#include "dsv4/config.hpp"

namespace zerojit::dsv4 {

// The head size the fused compressor kernels are written for (spec §3-§7).
inline constexpr int kCompressorHeadDim = 512;

// The compressor path of a ratio: taken for head-512 models that have a cache and a layer
// with that ratio (CUDA, head_dim == 512).
inline bool runs_compressor(const Dsv4Config& config, int compress_ratio) {
  return config.serving.block_size > 0 && has_compress_ratio(config.model, compress_ratio) &&
         config.model.head_dim == kCompressorHeadDim;
}

inline bool uses_ds_mla_cache(const Dsv4Config& config) {
  return config.serving.kv_cache_dtype == KvCacheDtype::fp8_ds_mla;
}

inline bool stores_full_fp8(const Dsv4Config& config) {
  return config.serving.kv_cache_dtype == KvCacheDtype::fp8_e4m3;
}

}  // namespace zerojit::dsv4
