// Argument blocks of the C4 compress -> RMSNorm -> RoPE -> store kernels (spec sections 3, 4)
// (conventions and launch geometry: dsv4/compressor/compressor_params.h).
#pragma once

#include "dsv4/compressor/compressor_params.h"

namespace zj::dsv4 {

// --- C4: compress (8 overlapping rows) + RMSNorm + RoPE + fp8_ds_mla store (spec 3) ----------
//
// Token t (grid index) is active iff slot_mapping[t] >= 0, t < num_token_to_req,
// t < num_positions, p = positions[t] >= 0, (p + 1) % 4 == 0, t < num_kv_slots,
// kv_slot_mapping[t] >= 0, and its block-table reads are in range. Only active tokens write.
struct C4StoreParams {
  // Compressor state [n_blocks, Bs, 2 * 1024] f32 (spec 0.5).
  const float* state_cache;
  long long state_block_stride;  // elements between state blocks (multiple of 16)
  long long state_row_stride;    // elements between the rows of a block (multiple of 16)
  long long state_block_size;    // Bs: state rows per block (4 for DSv4)
  const int* token_to_req;       // [num_token_to_req]
  long long num_token_to_req;
  const long long* positions;  // [num_positions]
  long long num_positions;
  const long long* slot_mapping;  // [num_tokens] state-cache slots; < 0 = no output
  long long num_tokens;
  const int* block_table;        // [block_table_rows, block_table_width] state block ids
  long long block_table_stride;  // elements between the rows of the table
  long long block_table_rows;    // shape[0]
  long long block_table_width;   // shape[1]
  const void* rms_norm_weight;   // [512], f32 or bf16 per the NormWeightT template argument
  float eps;
  const float* cos_sin_cache;        // [max_pos, 64] f32: cos in [0,32), sin in [32,64)
  long long cos_sin_stride;          // elements between its rows
  unsigned char* k_cache;            // fp8_ds_mla pages (spec 0.4)
  long long kv_block_stride_bytes;   // page stride (>= B * 584; stride1 is ignored)
  const long long* kv_slot_mapping;  // [num_kv_slots] compressed-cache slots; < 0 = skip
  long long num_kv_slots;
  long long kv_cache_block_size;  // B: rows per page (kv_cache.shape[1])
};

// --- C4 full-cache variant (spec 4): same pooling, rows of 512 bf16 or per-tensor e4m3 --------
struct C4StoreFullParams {
  const float* state_cache;
  long long state_block_stride;
  long long state_row_stride;
  long long state_block_size;
  const int* token_to_req;
  long long num_token_to_req;
  const long long* positions;
  long long num_positions;
  const long long* slot_mapping;
  long long num_tokens;
  const int* block_table;
  long long block_table_stride;
  long long block_table_rows;
  long long block_table_width;
  const void* rms_norm_weight;
  float eps;
  const float* cos_sin_cache;
  long long cos_sin_stride;
  unsigned char* k_cache;           // [num_blocks, B, 512] bf16 or e4m3, viewed as bytes
  long long kv_block_stride_bytes;  // stride0 in bytes
  long long kv_row_stride_bytes;    // stride1 in bytes
  const long long* kv_slot_mapping;
  long long num_kv_slots;
  long long kv_cache_block_size;  // B
  const float* fp8_scale;         // [1] per-tensor KV scale; read only by the e4m3 variant
};

}  // namespace zj::dsv4
