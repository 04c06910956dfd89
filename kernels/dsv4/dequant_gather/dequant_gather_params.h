// Argument block and launch constants of the DSv4 dequantize-and-gather kernel (spec section 2):
// fp8_ds_mla paged K cache -> BF16 workspace rows. Shared by the device code (NVRTC), the host
// launch code and the CPU reference, so it holds builtin types only and includes nothing.
#pragma once

namespace zj::dsv4 {

struct DequantGatherParams {
  unsigned short* out;               // bf16 bits [num_reqs, M, 512]; the 512 dims contiguous, each
                                     // row 16-byte aligned.
  long long out_req_stride;          // Elements between requests of `out`.
  long long out_row_stride;          // Elements between rows of `out`.
  long long num_rows_out;            // M = out.shape[1]; rows at or past M are never written.
  const unsigned char* k_cache;      // [num_blocks, B, 584] fp8_ds_mla pages, 32-byte aligned.
  long long page_stride_bytes;       // k_cache.stride(0) in bytes; a multiple of 32 and >= B * 584.
                                     // stride(1) is not used: a page's rows are packed as 576 B
                                     // token data followed by 8 B scale rows.
  const int* seq_lens;               // [num_reqs] int32: L.
  const int* gather_lens;            // [num_reqs] int32: G (the last G positions), or null when the
                                     // key has no gather_lens (then G = L).
  const int* block_table;            // [num_reqs, max_blocks] int32 page numbers.
  long long block_table_row_stride;  // Elements between requests of block_table.
  long long max_blocks;              // block_table.shape[1]; positions past it are skipped.
  long long offset;                  // First destination row: position i of the gather lands
                                     // in row offset + i.
  long long num_reqs;                // grid.x.
  long long num_workers;             // W = grid.y (dequant_gather_num_workers).
};

// Row layout of the fp8_ds_mla cache: 448 e4m3 dims + 64 bf16 dims = 576 B of token data, and
// 8 scale bytes per row (7 UE8M0 exponents for 64-dim groups, 1 pad byte) after the page's
// B * 576 data bytes.
inline constexpr int kDequantGatherHeadDim = 512;
inline constexpr int kDequantGatherFp8Dim = 448;
inline constexpr int kDequantGatherGroupSize = 64;
inline constexpr int kDequantGatherTokenBytes = 576;
inline constexpr int kDequantGatherScaleBytes = 8;

// A CTA is 4 warps; each warp converts whole rows, streaming them through a 4-stage cp.async
// pipeline with 3 rows in flight ahead of the one it converts.
inline constexpr int kDequantGatherWarpsPerBlock = 4;
inline constexpr int kDequantGatherThreadsPerBlock = kDequantGatherWarpsPerBlock * 32;
inline constexpr int kDequantGatherStages = 4;
// The staging buffer is static shared memory (4 warps x 4 stages x 592 B = 9472 B).
inline constexpr int kDequantGatherDynamicSharedBytes = 0;
// Each warp keeps at most 3 rows (1.7 KB) in flight, so bandwidth comes from many resident
// warps: the kernel is register-capped (40 per thread) for 12 CTAs = 48 warps per SM on sm_90.
inline constexpr int kDequantGatherMinBlocksPerSm = 12;
// The grid aims at about this many CTAs in total, split across the requests.
inline constexpr long long kDequantGatherTargetBlocks = 8192;

// W = max(1, min(ceil((M - offset) / 4), ceil(8192 / num_reqs))): enough workers for every
// destination row to get a warp, but no more CTAs than the target. W does not change results.
constexpr long long dequant_gather_num_workers(long long num_rows_out, long long offset,
                                               long long num_reqs) {
  const long long rows = num_rows_out - offset;
  const long long for_rows =
      rows > 0 ? (rows + kDequantGatherWarpsPerBlock - 1) / kDequantGatherWarpsPerBlock : 0;
  const long long for_target =
      num_reqs > 0 ? (kDequantGatherTargetBlocks + num_reqs - 1) / num_reqs : 1;
  const long long workers = for_rows < for_target ? for_rows : for_target;
  return workers > 1 ? workers : 1;
}

}  // namespace zj::dsv4
