// Whether a configuration runs the C4 compress -> norm -> RoPE -> store kernels (spec §3, §4).
#pragma once

#include <optional>
#include <tuple>

#include "dsv4/config.hpp"
#include "zerojit/key.hpp"

namespace zerojit::dsv4 {

// The ds_mla store runs iff ratio 4 is present, kv_cache_dtype == fp8_ds_mla and head_dim ==
// 512 (and the configuration has a KV cache).
struct C4DsMlaStoreGate {
  int head_dim;                  // 512
  int state_width;               // 2 * head_dim: the C4 state rows overlap two windows
  int rope_head_dim;             // qk_rope_head_dim
  FloatDtype norm_weight_dtype;  // the model dtype (BF16 for DSv4)
  int kv_cache_block_size;       // B_k = compressed_block_size(block_size, 4)

  bool operator==(const C4DsMlaStoreGate&) const = default;
  static constexpr auto fields() {
    return std::tuple{field("head_dim", &C4DsMlaStoreGate::head_dim),
                      field("state_width", &C4DsMlaStoreGate::state_width),
                      field("rope_head_dim", &C4DsMlaStoreGate::rope_head_dim),
                      field("norm_weight_dtype", &C4DsMlaStoreGate::norm_weight_dtype),
                      field("kv_cache_block_size", &C4DsMlaStoreGate::kv_cache_block_size)};
  }
};
std::optional<C4DsMlaStoreGate> c4_ds_mla_store_gate(const Dsv4Config& config);

// The full-cache store replaces it for the bf16 and fp8_e4m3 caches.
struct C4FullStoreGate {
  int head_dim;
  int state_width;
  int rope_head_dim;
  bool store_full_fp8;  // true for the fp8_e4m3 cache, false for bf16
  FloatDtype norm_weight_dtype;
  int kv_cache_block_size;  // B_k

  bool operator==(const C4FullStoreGate&) const = default;
  static constexpr auto fields() {
    return std::tuple{field("head_dim", &C4FullStoreGate::head_dim),
                      field("state_width", &C4FullStoreGate::state_width),
                      field("rope_head_dim", &C4FullStoreGate::rope_head_dim),
                      field("store_full_fp8", &C4FullStoreGate::store_full_fp8),
                      field("norm_weight_dtype", &C4FullStoreGate::norm_weight_dtype),
                      field("kv_cache_block_size", &C4FullStoreGate::kv_cache_block_size)};
  }
};
std::optional<C4FullStoreGate> c4_full_store_gate(const Dsv4Config& config);

}  // namespace zerojit::dsv4
