// Argument block and launch constants of the DCP top-k candidate packing kernel (spec section
// 12): it turns each rank's local top-k indices into (score, global id) float pairs that the
// DCP group all-gathers before the stable global top-k selection.
//
// Compiled by both the host compiler and NVRTC, so it holds builtin types only and includes
// nothing. The host fills it with device pointers to launch the kernel and with host pointers
// to call the CPU reference (kernels/dsv4/dcp_pack/reference.hpp).
#pragma once

namespace zj::dsv4 {

// 8 warps per block, 2 columns of one row per thread: a block covers one tile of 512
// consecutive top-k columns, as the reference Triton program does (BLOCK_SIZE = 512).
inline constexpr int kDcpPackThreadsPerBlock = 256;
inline constexpr int kDcpPackColumnsPerThread = 2;
inline constexpr int kDcpPackColumnsPerTile = kDcpPackThreadsPerBlock * kDcpPackColumnsPerThread;
// No shared memory and no barriers: every column is independent.
inline constexpr int kDcpPackDynamicSharedBytes = 0;
// Rows map to blockIdx.x, whose limit is 2^31 - 1; decode batches stay far below it.
inline constexpr long long kDcpPackMaxRows = 2147483647LL;

struct DcpPackParams {
  // [num_rows, num_cols] f32, element strides (ls0, ls1). Read at one gathered column per
  // valid candidate; never read for a -1 candidate.
  const float* logits;
  long long logits_stride_row;
  long long logits_stride_col;
  // N: the rank-local logits width. May be 0, in which case every index of the row is -1.
  long long num_cols;
  // [num_rows, TopK] int32 rank-local positions, -1 (any negative value) for an empty slot;
  // element strides (ts0, ts1). Read only.
  const int* topk_indices;
  long long topk_indices_stride_row;
  long long topk_indices_stride_col;
  // [num_rows] int32 column offset of each row (prefill chunks); null and never read unless
  // the kernel is compiled with HasRowStarts.
  const int* row_starts;
  // [num_rows, TopK, 2] f32 output, element strides (ps0, ps1, ps2): [..., 0] = score,
  // [..., 1] = global id as a float value. Only these 2 * TopK floats per row are written.
  float* packed;
  long long packed_stride_row;
  long long packed_stride_col;
  long long packed_stride_pair;
  // R: rows of logits / topk_indices / packed. 0 means no launch.
  long long num_rows;
  // This process's rank in the DCP group, 0 <= rank < WorldSize (validated by the owner). A
  // runtime value so that one binary serves every rank (spec 12.9).
  int rank;
};

// Launch grid of dcp_pack_kernel: x = row, y = tile of kDcpPackColumnsPerTile columns.
struct DcpPackGrid {
  long long rows;   // gridDim.x, at most kDcpPackMaxRows
  long long tiles;  // gridDim.y = ceil(TopK / 512): 1 for 512, 2 for 1024, 4 for 2048
};

constexpr DcpPackGrid dcp_pack_grid(long long num_rows, int topk) {
  return DcpPackGrid{num_rows, (static_cast<long long>(topk) + kDcpPackColumnsPerTile - 1) /
                                   kDcpPackColumnsPerTile};
}

}  // namespace zj::dsv4
