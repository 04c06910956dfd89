// C128 (HCA) stage 2: RMSNorm -> RoPE -> fp8_ds_mla store of compressed_kv (spec section 6).
//
// Template parameters:
//   KvCacheBlockSize  B: rows per fp8_ds_mla page (1 or 2 for DSv4).
//   KvBlockStride     page stride in bytes (>= B * 584; 1152, 1728 or a packed stride such as
//                     39168).
//   NormWeightT       element type of rms_norm_weight: `float` or `zj::bf16_t`.
// Launch: grid = c128_store_grid(num_tokens) CTAs (any positive grid is correct), block =
//   kC128StoreThreads (256), 48 KiB of static shared memory (each warp's row staging),
//   no dynamic shared memory. One warp per row (for_each_c128_row in
//   compressor_common.cuh): lane l holds dims [128 q + 4 l, +4) for q = 0..3, so a half-warp
//   holds a quant block's 64 dims and each store of the warp is contiguous; chunk 3 of lanes
//   16..31 is the rotated tail.
// Writes, for each active token only (see C128StoreParams), with page = kv_slot / B and
//   row = kv_slot % B:
//   [page * KvBlockStride + row * 576, +576)       448 e4m3 codes, then 64 bf16 (rotated)
//   [page * KvBlockStride + B * 576 + row * 8, +8) 7 UE8M0 exponents, then byte 7 = 0.
// Bytes moved per active token: 2 KiB of compressed_kv read, 584 B written (plus the
// L2-resident weights and cos/sin); every token costs 24 B of metadata reads.
#include "dsv4/c128_store/c128_store_params.h"
#include "dsv4/compressor/compressor_common.cuh"

#ifndef __CUDACC__
#define __grid_constant__
#endif

namespace zj::dsv4 {

template <int KvCacheBlockSize, long long KvBlockStride, typename NormWeightT>
__global__ void __launch_bounds__(kC128StoreThreads, kC128StoreMinBlocksPerSm)
    c128_store_kernel(const __grid_constant__ C128StoreParams params) {
  using namespace compressor;
  static_assert(KvCacheBlockSize >= 1, "B must be positive");
  static_assert(KvBlockStride >= static_cast<long long>(KvCacheBlockSize) * kDsMlaRowBytes,
                "the page stride must hold B rows of 584 bytes");
  const int lane = threadIdx.x & 31;
  GridDependency dependency;
  for_each_c128_row<NormWeightT>(
      params, dependency, [&](const ActiveToken& token, const C128Lane& y) {
        const DsMlaRow row =
            ds_mla_row(params.k_cache, token.kv_slot, KvCacheBlockSize, KvBlockStride);
        // bf16 values, and the |max| of each chunk; two chunks' maxima travel together as bf16x2
        // (exact: they are bf16 values) through the 16-lane butterfly of their quant blocks.
        float q[kC128Chunks][kC128ChunkDims];
        float amax[kC128Chunks];
#pragma unroll
        for (int c = 0; c < kC128Chunks; ++c) {
          amax[c] = 0.0f;
#pragma unroll
          for (int e = 0; e < kC128ChunkDims; ++e) {
            q[c][e] = round_to_bf16(y.v[c][e]);
            amax[c] = fmaxf(amax[c], fabsf(q[c][e]));
          }
        }
#pragma unroll
        for (int c = 0; c < kC128Chunks; c += 2) {
          u32 pair = pack_bf16x2_rn(amax[c], amax[c + 1]);
#pragma unroll
          for (int offset = kC128LanesPerQuantBlock / 2; offset > 0; offset >>= 1) {
            pair = max_bf16x2(pair, __shfl_xor_sync(kFullMask, pair, offset));
          }
          amax[c] = bf16x2_low(pair);
          amax[c + 1] = bf16x2_high(pair);
        }
        // Exponent of chunk c in byte c (0 for the tail chunk); lane 0 holds blocks 0, 2, 4, 6 and
        // lane 16 blocks 1, 3, 5, so one interleave of the two gives the row's 8 scale bytes.
        u32 exponents = 0u;
#pragma unroll
        for (int c = 0; c < kC128Chunks; ++c) {
          if (c128_is_tail(lane, c)) {  // the rotated tail as bf16, after the 448 code bytes
            store_u32x2(
                row.data + kCompressorNopeDim + 2 * (lane - kC128FirstTailLane) * kC128ChunkDims,
                pack_bf16x2_rn(y.v[c][0], y.v[c][1]), pack_bf16x2_rn(y.v[c][2], y.v[c][3]));
            continue;
          }
          const u32 exponent = ds_mla_scale_exponent(amax[c]);
          exponents |= exponent << (8 * c);
          const float multiplier = ue8m0_inverse_scale(exponent);
          store_u32(row.data + c128_chunk_dim(lane, c),
                    quantize_e4m3x2(q[c][0], q[c][1], multiplier) |
                        (quantize_e4m3x2(q[c][2], q[c][3], multiplier) << 16));
        }
        const u32 odd_blocks = __shfl_sync(kFullMask, exponents, kC128LanesPerQuantBlock);
        if (lane == 0) {  // 7 exponents and the zero pad byte in one 8-byte store
          store_u32x2(row.scales, byte_perm(exponents, odd_blocks, 0x5140u),
                      byte_perm(exponents, odd_blocks, 0x7362u));
        }
      });
}

}  // namespace zj::dsv4
