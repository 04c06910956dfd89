// C128 (HCA) stage 2, full-cache variant (spec section 7): RMSNorm -> RoPE -> store of one
// plain row [512] of bf16 or per-tensor-scaled e4m3 (the FlashInfer layout).
//
// Template parameters:
//   StoreFullFp8  false: bf16 rows; true: e4m3 rows scaled by 1 / fp8_scale[0].
//   NormWeightT   element type of rms_norm_weight: `float` or `zj::bf16_t`.
// Launch: grid = c128_store_grid(num_tokens) CTAs (any positive grid is correct), block =
//   kC128StoreThreads (256), 48 KiB of static shared memory (each warp's row staging),
//   no dynamic shared memory. One warp per row as in c128_store.cu:
//   lane l owns dims [128 q + 4 l, +4), q = 0..3; lanes 16..31 rotate the tail in chunk 3.
// Writes, for each active token only, the row at
//   vbase = (kv_slot / B) * kv_block_stride_bytes + (kv_slot % B) * kv_row_stride_bytes:
//   bf16: [vbase, vbase + 1024) = bf16_rn(y) / bf16_rn(rotated y), LE pairs;
//   e4m3: [vbase, vbase + 512)  = e4m3_rn_sat(clamp(bf16_rn(v) * (1 / fp8_scale), +-448)).
// Bytes moved per active token: 2 KiB of compressed_kv read, 1024 (bf16) or 512 (e4m3) written;
// every token costs 24 B of metadata reads.
#include "dsv4/c128_store/c128_store_params.h"
#include "dsv4/compressor/compressor_common.cuh"

#ifndef __CUDACC__
#define __grid_constant__
#endif

namespace zj::dsv4 {

template <bool StoreFullFp8, typename NormWeightT>
__global__ void __launch_bounds__(kC128StoreThreads, kC128StoreMinBlocksPerSm)
    c128_store_full_kernel(const __grid_constant__ C128StoreFullParams params) {
  using namespace compressor;
  GridDependency dependency;                    // waited for before any copy, or on the way out
  if (params.kv_cache_block_size <= 0) return;  // uniform over the grid: nothing to address
  const int lane = threadIdx.x & 31;

  for_each_c128_row<NormWeightT>(
      params, dependency, [&](const ActiveToken& token, const C128Lane& y) {
        unsigned char* row = full_row(params.k_cache, token.kv_slot, params.kv_cache_block_size,
                                      params.kv_block_stride_bytes, params.kv_row_stride_bytes);
        if (StoreFullFp8) {
          const float multiplier = __fdiv_rn(1.0f, params.fp8_scale[0]);  // read only with work
#pragma unroll
          for (int c = 0; c < kC128Chunks; ++c) {
            store_u32(
                row + c128_chunk_dim(lane, c),
                quantize_e4m3x2(round_to_bf16(y.v[c][0]), round_to_bf16(y.v[c][1]), multiplier) |
                    (quantize_e4m3x2(round_to_bf16(y.v[c][2]), round_to_bf16(y.v[c][3]), multiplier)
                     << 16));
          }
        } else {
#pragma unroll
          for (int c = 0; c < kC128Chunks; ++c) {
            store_u32x2(row + 2 * c128_chunk_dim(lane, c), pack_bf16x2_rn(y.v[c][0], y.v[c][1]),
                        pack_bf16x2_rn(y.v[c][2], y.v[c][3]));
          }
        }
      });
}

}  // namespace zj::dsv4
