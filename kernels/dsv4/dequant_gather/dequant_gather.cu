// DSv4 dequantize-and-gather of the fp8_ds_mla paged K cache into a BF16 workspace
// (spec section 2).
//
// Template parameters, in order (the compile key):
//   BlockSize      B, tokens per cache page (256, 64, 16, 2 or 1 for DSv4)
//   HasGatherLens  whether gather_lens is given (G = gather_lens[r]) or G = seq_lens[r]
//
// Launch: grid = (num_reqs, W) with W = dequant_gather_num_workers(M, offset, num_reqs),
// block = 128 threads (4 warps), no dynamic shared memory (9472 B static: 4 warps x 4 stages x
// 592 B), one argument (DequantGatherParams). Warp w of worker k converts the rows
// i = 4k + w + n * 4W, n = 0, 1, ...; lane l writes the 8-element chunks l and l + 32 of a row.
// The kernel strides by gridDim.y, so W only changes the work split, never the result. Each warp
// streams its rows through a 4-stage cp.async pipeline (3 rows in flight ahead of the one it
// converts; the 576 data bytes of a row are fetched with the L2::256B hint, +0.7 % of copy
// bandwidth at 245813 rows on the H200) and looks block-table entries up 32 rows at a time, one
// per lane, a batch ahead.
// Alignment the host must guarantee: k_cache 16-byte aligned and page_stride_bytes a multiple of
// 16 (the spec promises 32), `out` rows 16-byte aligned (strides multiples of 8 elements).
//
// For request r, L = seq_lens[r], G = gather_lens[r] (or L), start = L - G. For i in [0, G):
// position pos = start + i sits in page block_table[r, pos / B], row pos % B, and becomes
// out[r, offset + i, :]: dims [0, 448) = bf16(e4m3 * 2^(E - 127)) with E the UE8M0 byte of the
// dim's 64-group (E = 0 gives +-0), dims [448, 512) = the row's 64 bf16 copied bit for bit.
// The multiply is the BF16 one (mul.rn.bf16x2) by the bf16 power of two with exponent field E;
// the e4m3 -> f16 -> bf16 conversion before it is exact.
//
// Writes only out[r, offset + i, 0:512] for the rows above; every other byte of `out` is left
// as it was. Safety beyond the reference (the CPU reference does the same): a row is skipped
// (left untouched) when its destination offset + i is outside [0, M), when pos < 0 (G > L),
// when its block-table column pos / B is >= max_blocks, or when the page number there is
// negative. Reads: page bytes [0, B * 584) only; stride(1) of the cache is not used.
#include "dsv4/dequant_gather/dequant_gather_params.h"
#include "zerojit/device/async_copy.cuh"
#include "zerojit/device/grid_dependency.cuh"
#include "zerojit/device/numerics.cuh"

namespace zj::dsv4 {
namespace dequant_gather_detail {

// A stage holds one row: 576 data bytes then the 8 scale bytes, rounded up to 16 B so that
// every stage starts 16-byte aligned for cp.async.
inline constexpr int kStageBytes = 592;
inline constexpr int kDataChunks = kDequantGatherTokenBytes / 16;  // 36 chunks of 16 B
inline constexpr int kFp8Chunks = kDequantGatherFp8Dim / 8;        // output chunks 0..55 are fp8

__device__ __forceinline__ void store_16b(void* address, const u32 (&words)[4]) {
  asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(address), "r"(words[0]),
               "r"(words[1]), "r"(words[2]), "r"(words[3])
               : "memory");
}

// 8 e4m3 codes (low byte first) scaled by 2^(E - 127) -> 8 bf16, packed in pairs. The scale is
// the bf16 with exponent field E in both halves; E = 0 makes it +0.
__device__ __forceinline__ void dequantize_chunk(const u32 (&codes)[2], u32 exponent,
                                                 u32 (&out)[4]) {
  const u32 scale = (exponent << 23) | (exponent << 7);
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const u16 pair = static_cast<u16>(codes[k / 2] >> (16 * (k % 2)));
    out[k] = mul_bf16x2_rn(f16x2_to_bf16x2(unpack_e4m3x2_to_f16x2(pair)), scale);
  }
}

// Where a gathered row comes from; page < 0 means the row is skipped.
struct RowSource {
  int page;
  int row;
};

template <int BlockSize>
__device__ __forceinline__ RowSource locate_row(const DequantGatherParams& params,
                                                long long request, long long start, int index) {
  RowSource source;
  source.page = -1;
  source.row = 0;
  const long long position = start + index;
  const long long destination = params.offset + index;
  if (position >= 0 && destination >= 0) {
    const long long column = position / BlockSize;
    if (column < params.max_blocks) {
      source.page = params.block_table[request * params.block_table_row_stride + column];
      source.row = static_cast<int>(position % BlockSize);
    }
  }
  return source;
}

}  // namespace dequant_gather_detail

template <int BlockSize, bool HasGatherLens>
__global__ void __launch_bounds__(kDequantGatherThreadsPerBlock, kDequantGatherMinBlocksPerSm)
    dequant_gather_kernel(const __grid_constant__ DequantGatherParams params) {
  namespace detail = dequant_gather_detail;
  static_assert(BlockSize >= 1, "dequant-gather: block_size must be positive");
  constexpr int kWarps = kDequantGatherWarpsPerBlock;
  constexpr int kStages = kDequantGatherStages;
  constexpr long long kScaleBase = static_cast<long long>(BlockSize) * kDequantGatherTokenBytes;

  __shared__ alignas(16) unsigned char staging[kWarps][kStages][detail::kStageBytes];

  // Programmatic dependent launch: lengths and block-table entries (step metadata) are read
  // before the wait, the K cache (the kernels before write it) after it, and nothing is written
  // before it. A warp that leaves early still waits (GridDependency's destructor).
  GridDependency dependency;
  const long long request = blockIdx.x;
  if (request >= params.num_reqs) return;
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;

  const int seq_len = params.seq_lens[request];
  int gather_len = seq_len;
  if constexpr (HasGatherLens) gather_len = params.gather_lens[request];
  const long long start = static_cast<long long>(seq_len) - gather_len;
  // Rows whose destination would be at or past M are never written.
  long long row_end = gather_len;
  if (params.num_rows_out - params.offset < row_end) row_end = params.num_rows_out - params.offset;

  // Row indices fit in int: they are below G, an int32.
  const int first = static_cast<int>(blockIdx.y) * kWarps + warp;
  const int step = static_cast<int>(gridDim.y) * kWarps;
  if (first >= row_end) return;  // Warp-uniform; the kernel has no CTA-wide barrier.
  const int count = static_cast<int>((row_end - first + step - 1) / step);

  // Block-table lookups for 32 rows at a time, one per lane, fetched a batch ahead so the
  // dependent load never stalls the copy issue. Row n of this warp is i = first + n * step.
  auto lookup = [&](int n) {
    detail::RowSource source;
    source.page = -1;
    source.row = 0;
    if (n < count) source = detail::locate_row<BlockSize>(params, request, start, first + n * step);
    return source;
  };
  detail::RowSource current = lookup(lane);
  detail::RowSource next = lookup(32 + lane);
  dependency.wait();

  const u32 warp_staging = shared_address(&staging[warp][0][0]);
  unsigned stage_valid = 0;  // Bit s: the row in stage s is real (warp-uniform).

  // Starts the copies of row n into stage n % 4; always commits one group (maybe empty) so
  // that wait_group counts rows.
  auto issue = [&](int n) {
    if (n < count) {
      if (n > 0 && (n & 31) == 0) {
        current = next;
        next = lookup(n + 32 + lane);
      }
      const int source_lane = n & 31;
      const int page = __shfl_sync(0xFFFFFFFFu, current.page, source_lane);
      const int row = __shfl_sync(0xFFFFFFFFu, current.row, source_lane);
      const int stage = n % kStages;
      if (page >= 0) {
        const unsigned char* page_base =
            params.k_cache + static_cast<long long>(page) * params.page_stride_bytes;
        const unsigned char* data =
            page_base + static_cast<long long>(row) * kDequantGatherTokenBytes;
        const u32 stage_address = warp_staging + stage * detail::kStageBytes;
        copy_async_16b_stream_l1(stage_address + lane * 16, data + lane * 16);
        if (lane < detail::kDataChunks - 32) {
          copy_async_16b_stream_l1(stage_address + (32 + lane) * 16, data + (32 + lane) * 16);
        }
        if (lane == 4) {
          copy_async_8b(stage_address + kDequantGatherTokenBytes,
                        page_base + kScaleBase + row * kDequantGatherScaleBytes);
        }
        stage_valid |= 1u << stage;
      } else {
        stage_valid &= ~(1u << stage);
      }
    }
    commit_copies();
  };

#pragma unroll
  for (int n = 0; n < kStages - 1; ++n) issue(n);

  for (int n = 0; n < count; ++n) {
    issue(n + kStages - 1);
    wait_copies<kStages - 1>();
    __syncwarp();

    const int stage = n % kStages;
    if (stage_valid & (1u << stage)) {
      const u32 stage_address = warp_staging + stage * detail::kStageBytes;
      const u32 scales = stage_address + kDequantGatherTokenBytes;

      u32 codes[2];
      u32 low_chunk[4];
      load_shared_8b(stage_address + lane * 8, codes);
      detail::dequantize_chunk(codes, load_shared_byte(scales + lane / 8), low_chunk);

      // Chunk lane + 32: fp8 for lanes 0..23, the raw bf16 tail (dims 448..511) for 24..31.
      u32 high_chunk[4];
      const int high = lane + 32;
      if (high < detail::kFp8Chunks) {
        load_shared_8b(stage_address + high * 8, codes);
        detail::dequantize_chunk(codes, load_shared_byte(scales + high / 8), high_chunk);
      } else {
        load_shared_16b(stage_address + kDequantGatherFp8Dim + (high - detail::kFp8Chunks) * 16,
                        high_chunk);
      }

      const long long index = first + static_cast<long long>(n) * step;
      unsigned short* out_row = params.out + request * params.out_req_stride +
                                (params.offset + index) * params.out_row_stride;
      detail::store_16b(out_row + lane * 8, low_chunk);
      detail::store_16b(out_row + high * 8, high_chunk);
    }
    // Stage n % 4 is refilled by the next iteration's issue: every lane must be done reading.
    __syncwarp();
  }
}

}  // namespace zj::dsv4
