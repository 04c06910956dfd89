// Argument block of the C128 compress kernel (spec section 5)
// (conventions and launch geometry: dsv4/compressor/compressor_params.h).
#pragma once

#include "dsv4/compressor/compressor_params.h"

namespace zj::dsv4 {

// --- C128 compress, block8 (spec 5): softmax-pool 128 state rows into compressed_kv -----------
//
// Token t is active iff slot_mapping[t] >= 0, t < num_token_to_req, t < num_positions,
// p = positions[t] >= 0, (p + 1) % 128 == 0, state_block_size == 8, and its block-table reads
// are in range. There is no kv-slot condition. Inactive rows of compressed_kv stay unwritten.
struct C128CompressParams {
  // Compressor state [n_blocks, 8, 2 * 512] f32.
  const float* state_cache;
  long long state_block_stride;
  long long state_row_stride;
  long long state_block_size;  // must be 8; any other value makes every token inactive
  const int* token_to_req;
  long long num_token_to_req;
  const long long* positions;
  long long num_positions;
  const long long* slot_mapping;  // [num_tokens]
  long long num_tokens;
  const int* block_table;
  long long block_table_stride;
  long long block_table_rows;
  long long block_table_width;
  float* compressed_kv;  // [num_tokens, 512] f32, contiguous rows
};

}  // namespace zj::dsv4
