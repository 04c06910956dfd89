// C128 (HCA) stage 2: RMSNorm -> RoPE -> fp8_ds_mla store of compressed_kv (spec section 6).
//
// Template parameters:
//   KvCacheBlockSize  B: rows per fp8_ds_mla page (1 or 2 for DSv4).
//   KvBlockStride     page stride in bytes (>= B * 584; 1152, 1728 or a packed stride such as
//                     39168).
//   NormWeightT       element type of rms_norm_weight: `float` or `zj::bf16_t`.
// Launch: grid = c128_store_grid(num_tokens) CTAs (any positive grid is correct), block =
//   kC128StoreThreads (256), no dynamic shared memory. One warp per row (for_each_c128_row in
//   compressor_common.cuh): lane l < 28 quantizes dims [16 l, 16 l + 16), a quarter of quant
//   block l / 4; lanes 28..31 write the rotated tail.
// Writes, for each active token only (see C128StoreParams), with page = kv_slot / B and
//   row = kv_slot % B:
//   [page * KvBlockStride + row * 576, +576)       448 e4m3 codes, then 64 bf16 (rotated)
//   [page * KvBlockStride + B * 576 + row * 8, +8) 7 UE8M0 exponents, then byte 7 = 0.
// Bytes moved per active token: 2 KiB of compressed_kv read, 584 B written (plus the
// L2-resident weights and cos/sin); every token costs 24 B of metadata reads.
#include "dsv4/compressor_common.cuh"

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

  for_each_c128_row<NormWeightT>(params, [&](const ActiveToken& token, const C128Lane& y) {
    const DsMlaRow row = ds_mla_row(params.k_cache, token.kv_slot, KvCacheBlockSize, KvBlockStride);
    // Every lane takes part in the amax butterfly (the tail lanes' result is unused): a
    // shuffle must not sit inside the lane-dependent branch below.
    float q[kC128DimsPerLane];
    float amax = 0.0f;
#pragma unroll
    for (int e = 0; e < kC128DimsPerLane; ++e) {
      q[e] = round_to_bf16(y.v[e]);
      amax = fmaxf(amax, fabsf(q[e]));
    }
    amax = group_max<kC128LanesPerQuantBlock>(amax);
    if (lane < kC128FirstRopeLane) {
      const u32 exponent = ds_mla_scale_exponent(amax);
      const float multiplier = ue8m0_inverse_scale(exponent);
      u32 words[kC128DimsPerLane / 4];
#pragma unroll
      for (int k = 0; k < kC128DimsPerLane / 4; ++k) {
        words[k] = quantize_e4m3x2(q[4 * k], q[4 * k + 1], multiplier) |
                   (quantize_e4m3x2(q[4 * k + 2], q[4 * k + 3], multiplier) << 16);
      }
      store_u32x4(row.data + lane * kC128DimsPerLane, words[0], words[1], words[2], words[3]);
      if (lane % kC128LanesPerQuantBlock == 0) {
        store_u8(row.scales + lane / kC128LanesPerQuantBlock, exponent);
        if (lane == 0) store_u8(row.scales + kDsMlaScaleBytes - 1, 0u);
      }
    } else {
      // The tail as bf16: 8 pairs = 32 bytes a lane, after the 448 code bytes.
      unsigned char* tail =
          row.data + kCompressorNopeDim + 2 * (lane - kC128FirstRopeLane) * kC128DimsPerLane;
      u32 pairs[kC128DimsPerLane / 2];
#pragma unroll
      for (int k = 0; k < kC128DimsPerLane / 2; ++k) {
        pairs[k] = pack_bf16x2_rn(y.v[2 * k], y.v[2 * k + 1]);
      }
      store_u32x4(tail, pairs[0], pairs[1], pairs[2], pairs[3]);
      store_u32x4(tail + 16, pairs[4], pairs[5], pairs[6], pairs[7]);
    }
  });
}

}  // namespace zj::dsv4
