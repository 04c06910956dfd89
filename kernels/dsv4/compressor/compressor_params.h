// Launch constants and geometry shared by the five DSv4 compressor kernels (spec sections 3-7),
// whose argument blocks live in their folders:
//   C4 compress + RMSNorm + RoPE + fp8_ds_mla store    c4_store/c4_store.cu C4StoreParams C4
//   compress + RMSNorm + RoPE + full-row store      c4_store/c4_store_full.cu C4StoreFullParams
//   C128 compress (softmax pooling, block8)            c128_compress/c128_compress.cu
//   C128CompressParams C128 RMSNorm + RoPE + fp8_ds_mla store             c128_store/c128_store.cu
//   C128StoreParams C128 RMSNorm + RoPE + full-row store c128_store/c128_store_full.cu
//   C128StoreFullParams
//
// Compiled by g++ (host launch code, CPU references) and by NVRTC (device code), so the blocks
// hold builtin types only. The host fills a block with device pointers to launch a kernel and
// with host pointers to run the matching CPU reference (each kernel folder's reference.hpp).
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

inline constexpr int kCompressorHeadSize = 512;   // head_dim
inline constexpr int kCompressorRopeDim = 64;     // qk_rope_head_dim: the last 64 dims are rotated
inline constexpr int kCompressorNopeDim = 448;    // head_dim - rope_dim: quantized to e4m3
inline constexpr int kCompressorQuantBlock = 64;  // elements per UE8M0 scale
inline constexpr float kCompressorFp8Max = 448.0f;
inline constexpr int kDsMlaTokenStrideBytes = 576;  // 448 e4m3 bytes + 64 bf16 (128 bytes)
inline constexpr int kDsMlaScaleBytes = 8;          // 7 UE8M0 exponents + 1 zero pad byte
inline constexpr int kDsMlaRowBytes = kDsMlaTokenStrideBytes + kDsMlaScaleBytes;  // 584

inline constexpr int kC4Ratio = 4;
inline constexpr int kC4StateWidth =
    1024;                                // W = 2 * head (overlap): a state row is [kv W | score W]
inline constexpr int kC4PooledRows = 8;  // rows p-7 .. p
inline constexpr int kC4StoreThreads = 64;  // C4 kernels: 2 warps, one token at a time
// Register budget of the C4 kernels (65536 / (64 * 6) = 170 a thread): each thread keeps its 8
// rows x 16 floats of state in flight; below ~168 registers ptxas starts to spill.
inline constexpr int kC4StoreMinBlocksPerSm = 6;
inline constexpr int kC128Ratio = 128;
inline constexpr int kC128StateBlockSize = 8;     // the C128 compress kernel requires Bs == 8
inline constexpr int kC128CompressThreads = 256;  // 8 warps, 16 rows each
inline constexpr int kC128CompressColumns = 64;   // columns of the head one CTA pools
inline constexpr int kC128CompressColumnTiles = kCompressorHeadSize / kC128CompressColumns;  // 8
// Resident C128 compress CTAs an SM: 256 threads of ~80 registers (8 rows x 4 columns of kv
// and of score each in flight).
inline constexpr int kC128CompressBlocksPerSm = 3;
inline constexpr int kC128StoreThreads = 256;  // C128 stores: 8 warps, one row per warp at a time
// Resident CTAs asked of ptxas (<= 64 registers a thread; the 48 KiB of staging a CTA allows
// 4 a SM as well): sparse batches are latency-bound, so more resident warps scanning means
// fewer waves, and dense ones need every warp's copies in flight.
inline constexpr int kC128StoreMinBlocksPerSm = 4;

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
// than the few inactive CTAs. Larger batches take K = num_tokens / 2048 up to 8 (C4), which keeps
// about 2048 CTAs or more; C128 compress sizes its own (c128_compress_grid).
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
// C128 compress: K tokens a chunk, by the prefill's size (measured on the H200, CUDA-graph replay,
// 4 requests of T / 4 tokens; docs/BENCHMARKS.md section 8):
//  * up to 1024 tokens (decode, small prefills) K = T / 128, at least 1: several tokens of one
//    chunk may be boundaries there, and each CTA pools its active tokens one after another;
//  * while one boundary a chunk (K = 128) fits in one wave of resident CTAs
//    (kC128CompressBlocksPerSm an SM), K = 128: 4096 tokens 256 CTAs, 8.2 us (K = 32: 9.0);
//  * up to 32768 tokens K = 64: half the CTAs find no boundary and leave at once, but the
//    active ones stay spread over every SM (16384 tokens 22.9 us; K = 128: 24.0, K = 32: 24.9);
//  * above, K = 256: two boundaries a chunk, the second prefetched into L2 while the first is
//    pooled (131072 tokens 156.2 us; K = 64: 161.4).
// Prefill calls (more than kC128CompressDecodeTokens tokens) have chunks of K >= 64 tokens and
// run the key's cta_scan variant, which scans them with the whole CTA at once into a list passed
// as kC128CompressWideListBytes of dynamic shared memory.
inline constexpr long long kC128CompressDecodeTokens = 1024;
constexpr long long c128_compress_tokens_per_chunk(long long num_tokens, int multiprocessors) {
  if (num_tokens <= kC128CompressDecodeTokens) {
    return compressor_tokens_per_cta(num_tokens, 128, 8);
  }
  const long long resident_chunks =
      static_cast<long long>(multiprocessors) * kC128CompressBlocksPerSm / kC128CompressColumnTiles;
  if ((num_tokens + 127) / 128 <= resident_chunks) return 128;
  return num_tokens <= 32768 ? 64 : 256;
}
constexpr long long c128_compress_grid(long long num_tokens, int multiprocessors) {
  const long long k = c128_compress_tokens_per_chunk(num_tokens, multiprocessors);
  return (num_tokens + k - 1) / k * kC128CompressColumnTiles;
}
inline constexpr int kC128CompressWideListBytes = kC128CompressThreads * 32;  // 256 entries
constexpr long long c128_store_grid(long long num_tokens) {
  const long long tokens_per_cta =
      compressor_tokens_per_cta(num_tokens, 4096, 32) * (kC128StoreThreads / 32);
  return (num_tokens + tokens_per_cta - 1) / tokens_per_cta;
}

}  // namespace zj::dsv4
