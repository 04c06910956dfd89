// Argument blocks and launch constants of the five DSv4 compressor kernels (spec sections 3-7):
//   C4 compress + RMSNorm + RoPE + fp8_ds_mla store         c4_store.cu         C4StoreParams
//   C4 compress + RMSNorm + RoPE + full-row store           c4_store_full.cu    C4StoreFullParams
//   C128 compress (softmax pooling of 128 rows, block8)     c128_compress.cu    C128CompressParams
//   C128 RMSNorm + RoPE + fp8_ds_mla store                  c128_store.cu       C128StoreParams
//   C128 RMSNorm + RoPE + full-row store                    c128_store_full.cu  C128StoreFullParams
//
// Compiled by g++ (host launch code, CPU references) and by NVRTC (device code), so it holds
// builtin types only. The host fills a block with device pointers to launch a kernel and with
// host pointers to run the matching CPU reference (kernels/dsv4/reference/compressor.hpp).
//
// Conventions shared by every block:
//  * Strides are in elements unless the name ends in `_bytes`; lengths are element counts.
//  * `num_tokens` is the length of `slot_mapping`: the tokens the grid covers. Launch with
//    grid = c4_store_grid / c128_compress_grid / c128_store_grid(num_tokens) (see below; the
//    kernels are correct for any positive grid).
//  * Alignment the kernels rely on (the launcher validates it; torch allocations and the DSv4
//    cache layouts satisfy it): `state_cache` 16-byte aligned with both state strides
//    multiples of 16 elements (spec 0.5); `rms_norm_weight` 16-byte aligned; `compressed_kv`
//    16-byte aligned; `k_cache` 16-byte aligned with every byte stride a multiple of 16
//    (fp8_ds_mla pages: 1152, 1728, 37440, 39168...; full rows: 512 or 1024 bytes a row).
//  * Tokens whose position is negative never produce output (positions are >= 0 in DSv4);
//    block-table rows/columns outside [0, block_table_rows) x [0, block_table_width) make the
//    token inactive (it writes nothing) instead of reading outside the table.
#pragma once

namespace zj::dsv4 {

// --- Fixed constants of the family (the owners' compile() rejects any other key value) -------

constexpr int kCompressorHeadSize = 512;   // head_dim
constexpr int kCompressorRopeDim = 64;     // qk_rope_head_dim: the last 64 dims are rotated
constexpr int kCompressorNopeDim = 448;    // head_dim - rope_dim: quantized to e4m3
constexpr int kCompressorQuantBlock = 64;  // elements per UE8M0 scale
constexpr float kCompressorFp8Max = 448.0f;
constexpr int kDsMlaTokenStrideBytes = 576;  // 448 e4m3 bytes + 64 bf16 (128 bytes)
constexpr int kDsMlaScaleBytes = 8;          // 7 UE8M0 exponents + 1 zero pad byte
constexpr int kDsMlaRowBytes = kDsMlaTokenStrideBytes + kDsMlaScaleBytes;  // 584

constexpr int kC4Ratio = 4;
constexpr int kC4StateWidth = 1024;  // W = 2 * head (overlap): a state row is [kv W | score W]
constexpr int kC4PooledRows = 8;     // rows p-7 .. p
constexpr int kC4StoreThreads = 64;  // C4 kernels: 2 warps, one token at a time
// Register budget of the C4 kernels (65536 / (64 * 6) = 170 a thread): each thread keeps its 8
// rows x 16 floats of state in flight; below ~168 registers ptxas starts to spill.
constexpr int kC4StoreMinBlocksPerSm = 6;
constexpr int kC128Ratio = 128;
constexpr int kC128StateBlockSize = 8;     // the C128 compress kernel requires Bs == 8
constexpr int kC128CompressThreads = 256;  // 8 warps, 16 rows each
constexpr int kC128CompressColumns = 64;   // columns of the head one CTA pools
constexpr int kC128CompressColumnTiles = kCompressorHeadSize / kC128CompressColumns;  // 8
constexpr int kC128StoreThreads = 256;  // C128 stores: 8 warps, one row per warp at a time
// Resident CTAs asked of ptxas (<= 64 registers a thread; the 48 KiB of staging a CTA allows
// 4 a SM as well): sparse batches are latency-bound, so more resident warps scanning means
// fewer waves, and dense ones need every warp's copies in flight.
constexpr int kC128StoreMinBlocksPerSm = 4;

// --- Launch geometry: token chunks --------------------------------------------------------------
//
// Only boundary tokens do work (1 in 4 for C4, 1 in 128 for C128). With the spec's one CTA per
// token (C128 compress: 8 per token), the inactive CTAs, each holding its registers for one
// memory latency, cost more than the pooling on prefill batches: measured on H200 with one CTA
// per token, C4 reached 75-81 % and C128 compress 6-8 % of copy bandwidth on 64K-token (C4)
// and 128K-token (C128) prefills; with the grids below, 91 % and 88 %. So every kernel
// splits the tokens into gridDim chunks (C128 compress: gridDim.x / 8 chunks, each covering
// all 8 column tiles): chunk c holds tokens [c K, min(c K + K, num_tokens)) with
// K = ceil(num_tokens / chunks); warp 0 examines them 32 at a time (one coalesced read of
// their metadata) and the CTA processes the active ones in turn.
//
// The kernels derive K from gridDim, so ANY positive grid is correct (one CTA per token is the
// spec's geometry); the helpers below pick the grid. Small batches (decode) keep one token per
// CTA: there, the serial processing of several active tokens in one CTA costs more latency
// than the few inactive CTAs. Larger batches take K = num_tokens / 2048 up to 8 (C4) and
// num_tokens / 256 up to 32 (C128 compress), which keeps about 2048 CTAs or more.
//
// The C128 stores chunk per warp instead (kC128StoreThreads / 32 chunks a CTA, one row per
// warp, no barriers): K = num_tokens / 4096 tokens a warp, from 1 up to 32 (one examine round).
// Sparse batches then cost one metadata latency per warp and few waves (262144 tokens: 1024
// CTAs), and a batch where every token is a boundary still has >= 4096 warps streaming rows
// (65536 tokens: 512 CTAs, one wave at 4 a SM; measured on H200 against K = num_tokens / 2048,
// 256 CTAs: 78 % vs 76 % of copy bandwidth).
// Returns 0 for 0 tokens: do not launch.
constexpr long long compressor_tokens_per_cta(long long num_tokens, long long tokens_per_step,
                                              long long max_tokens_per_cta) {
  const long long k = num_tokens / tokens_per_step;
  return k < 1 ? 1 : (k > max_tokens_per_cta ? max_tokens_per_cta : k);
}
constexpr long long c4_store_grid(long long num_tokens) {
  const long long k = compressor_tokens_per_cta(num_tokens, 2048, 8);
  return (num_tokens + k - 1) / k;
}
constexpr long long c128_compress_grid(long long num_tokens) {
  const long long k = compressor_tokens_per_cta(num_tokens, 256, 32);
  return (num_tokens + k - 1) / k * kC128CompressColumnTiles;
}
constexpr long long c128_store_grid(long long num_tokens) {
  const long long tokens_per_cta =
      compressor_tokens_per_cta(num_tokens, 4096, 32) * (kC128StoreThreads / 32);
  return (num_tokens + tokens_per_cta - 1) / tokens_per_cta;
}

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
