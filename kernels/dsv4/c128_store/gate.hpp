// Whether a configuration runs the C128 norm -> RoPE -> store kernels (spec §6, §7).
#pragma once

#include <cstdint>
#include <optional>
#include <tuple>

#include "dsv4/config.hpp"
#include "zerojit/key.hpp"

namespace zerojit::dsv4 {

// The ds_mla store runs iff ratio 128 is present, kv_cache_dtype == fp8_ds_mla and head_dim ==
// 512; its page geometry is compile-time.
struct C128DsMlaStoreGate {
  int head_dim;
  int rope_head_dim;
  int kv_cache_block_size;         // B_k = compressed_block_size(block_size, 128)
  std::int64_t page_stride_bytes;  // effective_c128_page_stride_bytes(serving)
  FloatDtype norm_weight_dtype;

  bool operator==(const C128DsMlaStoreGate&) const = default;
  static constexpr auto fields() {
    return std::tuple{field("head_dim", &C128DsMlaStoreGate::head_dim),
                      field("rope_head_dim", &C128DsMlaStoreGate::rope_head_dim),
                      field("kv_cache_block_size", &C128DsMlaStoreGate::kv_cache_block_size),
                      field("page_stride_bytes", &C128DsMlaStoreGate::page_stride_bytes),
                      field("norm_weight_dtype", &C128DsMlaStoreGate::norm_weight_dtype)};
  }
};
std::optional<C128DsMlaStoreGate> c128_ds_mla_store_gate(const Dsv4Config& config);

// The full-cache store replaces it for the other caches.
struct C128FullStoreGate {
  int head_dim;
  int rope_head_dim;
  bool store_full_fp8;  // true for the fp8_e4m3 cache, false for bf16
  FloatDtype norm_weight_dtype;
  int kv_cache_block_size;  // B_k

  bool operator==(const C128FullStoreGate&) const = default;
  static constexpr auto fields() {
    return std::tuple{field("head_dim", &C128FullStoreGate::head_dim),
                      field("rope_head_dim", &C128FullStoreGate::rope_head_dim),
                      field("store_full_fp8", &C128FullStoreGate::store_full_fp8),
                      field("norm_weight_dtype", &C128FullStoreGate::norm_weight_dtype),
                      field("kv_cache_block_size", &C128FullStoreGate::kv_cache_block_size)};
  }
};
std::optional<C128FullStoreGate> c128_full_store_gate(const Dsv4Config& config);

}  // namespace zerojit::dsv4
