// Argument blocks of the C128 RMSNorm -> RoPE -> store kernels (spec sections 6, 7)
// (conventions and launch geometry: dsv4/compressor/compressor_params.h).
#pragma once

#include "dsv4/compressor/compressor_params.h"

namespace zj::dsv4 {

// --- C128 RMSNorm + RoPE + fp8_ds_mla store (spec 6) -----------------------------------------
//
// Token t is active iff slot_mapping[t] >= 0, t < num_positions, p = positions[t] >= 0,
// (p + 1) % 128 == 0, t < num_kv_slots and kv_slot_mapping[t] >= 0. The page size B and the
// page stride are template arguments (compile-time per the spec's key).
struct C128StoreParams {
  const float* compressed_kv;  // [num_tokens, 512] f32, contiguous rows
  const long long* positions;
  long long num_positions;
  const long long* slot_mapping;  // [num_tokens]
  long long num_tokens;
  const void* rms_norm_weight;
  float eps;
  const float* cos_sin_cache;  // contiguous per the spec; the stride is carried anyway
  long long cos_sin_stride;
  unsigned char* k_cache;
  const long long* kv_slot_mapping;
  long long num_kv_slots;
};

// --- C128 RMSNorm + RoPE + full-row store (spec 7) ---------------------------------------------
struct C128StoreFullParams {
  const float* compressed_kv;  // [num_tokens, 512] f32, contiguous rows
  const long long* positions;
  long long num_positions;
  const long long* slot_mapping;  // [num_tokens]
  long long num_tokens;
  const void* rms_norm_weight;
  float eps;
  const float* cos_sin_cache;
  long long cos_sin_stride;
  unsigned char* k_cache;           // [num_blocks, B, 512] bf16 or e4m3, viewed as bytes
  long long kv_block_stride_bytes;  // stride0
  long long kv_row_stride_bytes;    // stride1
  const long long* kv_slot_mapping;
  long long num_kv_slots;
  long long kv_cache_block_size;  // B
  const float* fp8_scale;         // [1]; read only by the e4m3 variant
};

}  // namespace zj::dsv4
