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
// The grid gives each warp about kDequantGatherRowsPerWarp rows, so that its pipeline keeps 3 in
// flight and the seq_lens -> block table latency is paid once for several rows, unless that
// leaves fewer than kDequantGatherMinBlocks CTAs in all: small calls need every warp they can
// get, one row each. Measured on the H200 (CUDA-graph replay; docs/BENCHMARKS.md section 8)
// against the previous min(ceil(rows / 4), ceil(8192 / num_reqs)): the SWA call (64 x 128 rows)
// 6.7 -> 6.4 us, the C128 cache (64 x 512) 18.8 -> 18.0, 64 x 16384 rows 463 -> 453, 64 x 65536
// 1868 -> 1807; one warp a row (the previous grid) kept only for 2 x 32 rows.
inline constexpr long long kDequantGatherRowsPerWarp = 10;
inline constexpr long long kDequantGatherMinBlocks = 512;
// Beyond this many workers a request's CTAs only add scheduling (64 x 65536 rows: 1024 is
// CuTeDSL's best fixed grid.y).
inline constexpr long long kDequantGatherMaxWorkers = 1024;

// W = min(ceil((M - offset) / 4), max(ceil((M - offset) / 40), ceil(512 / num_reqs)), 1024),
// at least 1. W does not change results.
constexpr long long dequant_gather_num_workers(long long num_rows_out, long long offset,
                                               long long num_reqs) {
  const long long rows = num_rows_out - offset;
  if (rows <= 0 || num_reqs <= 0) return 1;
  const long long one_row_a_warp =
      (rows + kDequantGatherWarpsPerBlock - 1) / kDequantGatherWarpsPerBlock;
  constexpr long long kRowsPerWorker = kDequantGatherWarpsPerBlock * kDequantGatherRowsPerWarp;
  const long long for_rows = (rows + kRowsPerWorker - 1) / kRowsPerWorker;
  const long long for_grid = (kDequantGatherMinBlocks + num_reqs - 1) / num_reqs;
  long long workers = for_rows > for_grid ? for_rows : for_grid;
  workers = workers < one_row_a_warp ? workers : one_row_a_warp;
  return workers < kDequantGatherMaxWorkers ? workers : kDequantGatherMaxWorkers;
}

}  // namespace zj::dsv4
