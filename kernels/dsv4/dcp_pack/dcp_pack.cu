// DCP top-k candidate packing (spec section 12; vLLM's PackDCPTopkCandidatesKernel).
//
// Under decode context parallelism each rank scores its own shard of the indexer KV and takes a
// local top-k. This kernel turns those rank-local indices into (score, global id) float pairs;
// the DCP group all-gathers them rank-major and a stable selector picks the global top-k.
//
// Template parameters, in order (the compile key, spec 12.9):
//   TopK          columns of topk_indices / packed (512, 1024 or 2048 for DSA models)
//   HasRowStarts  prefill (row_starts read) or decode (row_starts never read)
//   WorldSize     DCP world size W
//   CpInterleave  cp_kv_cache_interleave_size I
// The rank is the runtime value params.rank (0 <= rank < WorldSize, checked by the owner), so
// one binary serves every rank of the group.
//
// Launch geometry (dcp_pack_grid in dsv4/dcp_pack_params.h):
//   grid  = (num_rows, ceil(TopK / 512), 1): blockIdx.x = row, blockIdx.y = tile of 512 columns
//   block = (256, 1, 1), 2 columns per thread; dynamic shared memory = 0; no barriers.
//   num_rows <= 2^31 - 1 (the gridDim.x limit); num_rows = 0 means no launch.
//
// Writes: for every row r < num_rows and column c < TopK, exactly the two floats
//   packed[r*ps0 + c*ps1]       = score (a bit copy of the gathered logit, or -inf)
//   packed[r*ps0 + c*ps1 + ps2] = global id as a float value (RNE), or -1.0f
// and nothing else. Reads: topk_indices[r, c] for c < TopK, row_starts[r] when HasRowStarts,
// and one logit per valid (>= 0) index at column clamp(l + row_start, 0, max(N - 1, 0)).
//
// All offsets are 64-bit: decode logits of R x ~1M columns exceed 2^31 elements.
// Programmatic dependent launch: every read comes after the grid-dependency wait
// (zerojit/device/grid_dependency.cuh; see the row start's load for why).
#include "dsv4/dcp_pack/dcp_pack_params.h"
#include "zerojit/device/grid_dependency.cuh"
#include "zerojit/device/numerics.cuh"

namespace zj::dsv4 {

namespace dcp_pack_detail {

// Bit patterns rather than floats, so that a NaN payload crosses the kernel untouched.
inline constexpr u32 kNegativeInfinityBits = 0xFF800000u;
inline constexpr u32 kMinusOneBits = 0xBF800000u;  // -1.0f: the id of an empty slot

struct PackedCandidate {
  u32 score_bits;
  u32 id_bits;
};

// One column of spec 12.3. Negative indices (-1 marks an empty slot) produce (-inf, -1.0f)
// without touching the logits.
template <int WorldSize, int CpInterleave>
__device__ __forceinline__ PackedCandidate pack_candidate(const u32* logits_row,
                                                          long long logits_stride_col,
                                                          long long row_start, long long last_col,
                                                          int local_index, int rank) {
  PackedCandidate candidate;
  if (local_index < 0) {
    candidate.score_bits = kNegativeInfinityBits;
    candidate.id_bits = kMinusOneBits;
    return candidate;
  }
  // Clamp, not mask (spec 12.3): an index past the row reads its last column. The lower bound
  // only matters for a negative row start, which the caller never passes; it keeps the read
  // inside the row instead of before it.
  long long col = static_cast<long long>(local_index) + row_start;
  col = col < last_col ? col : last_col;
  col = col > 0 ? col : 0;
  asm volatile("ld.global.u32 %0, [%1];"
               : "=r"(candidate.score_bits)
               : "l"(logits_row + col * logits_stride_col));

  // Global position of local position l on this rank: g = (l / I) * (W * I) + rank * I + l % I.
  // Computed in 64 bits so that no index wraps; ids above 2^24 round to nearest even when
  // converted, as the reference's (float)g does.
  const u32 local = static_cast<u32>(local_index);
  const long long global = static_cast<long long>(local / static_cast<u32>(CpInterleave)) *
                               (static_cast<long long>(WorldSize) * CpInterleave) +
                           static_cast<long long>(rank) * CpInterleave +
                           static_cast<long long>(local % static_cast<u32>(CpInterleave));
  candidate.id_bits = __float_as_uint(__ll2float_rn(global));
  return candidate;
}

// One int. Volatile asm, and coherent (not __ldg or .nc): the compiler may move a read-only
// intrinsic, and ptxas a non-coherent load, above the kernel's grid-dependency wait, and the
// indices and logits are what the kernels before write.
__device__ __forceinline__ int load_int(const int* address) {
  int value;
  asm volatile("ld.global.s32 %0, [%1];" : "=r"(value) : "l"(address));
  return value;
}

__device__ __forceinline__ bool is_aligned(const void* pointer, unsigned long long alignment) {
  return (reinterpret_cast<unsigned long long>(pointer) & (alignment - 1)) == 0;
}

}  // namespace dcp_pack_detail

template <int TopK, bool HasRowStarts, int WorldSize, int CpInterleave>
__global__ void __launch_bounds__(kDcpPackThreadsPerBlock)
    dcp_pack_kernel(const __grid_constant__ DcpPackParams params) {
  static_assert(TopK > 0, "TopK must be positive");
  static_assert(WorldSize >= 1, "WorldSize must be at least 1");
  static_assert(CpInterleave >= 1, "CpInterleave must be at least 1");
  using dcp_pack_detail::is_aligned;
  using dcp_pack_detail::pack_candidate;
  using dcp_pack_detail::PackedCandidate;

  // Programmatic dependent launch: the dependents released first thing, the top-k indices and
  // logits (the kernels before produce them) read after the wait; a thread that leaves early
  // still waits (GridDependency's destructor).
  GridDependency dependency;
  const long long row = blockIdx.x;
  if (row >= params.num_rows) return;
  const int col0 = static_cast<int>(blockIdx.y) * kDcpPackColumnsPerTile +
                   static_cast<int>(threadIdx.x) * kDcpPackColumnsPerThread;
  if (col0 >= TopK) return;
  const bool has_second = col0 + 1 < TopK;

  dependency.wait();

  // Both indices are loaded first, so the two logit gathers that depend on them are
  // independent and overlap. Volatile, coherent loads (see load_int).
  const int* index_row = params.topk_indices + row * params.topk_indices_stride_row;
  int index0;
  int index1 = -1;
  if (has_second && params.topk_indices_stride_col == 1 && is_aligned(index_row + col0, 8)) {
    asm volatile("ld.global.v2.s32 {%0, %1}, [%2];"
                 : "=r"(index0), "=r"(index1)
                 : "l"(index_row + col0));
  } else {
    index0 = dcp_pack_detail::load_int(index_row + col0 * params.topk_indices_stride_col);
    if (has_second) {
      index1 = dcp_pack_detail::load_int(index_row + (col0 + 1) * params.topk_indices_stride_col);
    }
  }
  // The row start is step metadata and could be read before the wait, but there its load came
  // first and its use stalled the thread before the index loads were issued: one more memory
  // latency a CTA (the serving-size pack 2.5 % slower, docs/BENCHMARKS.md section 11). Issued
  // after them, the three loads overlap.
  long long row_start = 0;
  if constexpr (HasRowStarts) row_start = dcp_pack_detail::load_int(params.row_starts + row);
  const long long last_col = params.num_cols > 0 ? params.num_cols - 1 : 0;
  const u32* logits_row =
      reinterpret_cast<const u32*>(params.logits) + row * params.logits_stride_row;

  const PackedCandidate first = pack_candidate<WorldSize, CpInterleave>(
      logits_row, params.logits_stride_col, row_start, last_col, index0, params.rank);
  PackedCandidate second = first;
  if (has_second) {
    second = pack_candidate<WorldSize, CpInterleave>(logits_row, params.logits_stride_col,
                                                     row_start, last_col, index1, params.rank);
  }

  u32* out = reinterpret_cast<u32*>(params.packed) + row * params.packed_stride_row +
             col0 * params.packed_stride_col;
  if (has_second && params.packed_stride_pair == 1 && params.packed_stride_col == 2 &&
      is_aligned(out, 16)) {
    // The contiguous [R, K, 2] layout the caller allocates: both pairs in one 16-byte store.
    asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(out), "r"(first.score_bits),
                 "r"(first.id_bits), "r"(second.score_bits), "r"(second.id_bits)
                 : "memory");
  } else {
    out[0] = first.score_bits;
    out[params.packed_stride_pair] = first.id_bits;
    if (has_second) {
      u32* out1 = out + params.packed_stride_col;
      out1[0] = second.score_bits;
      out1[params.packed_stride_pair] = second.id_bits;
    }
  }
}

}  // namespace zj::dsv4
