// C128 (HCA) stage 2: RMSNorm -> RoPE -> fp8_ds_mla store of compressed_kv (spec section 6).
//
// Template parameters:
//   KvCacheBlockSize  B: rows per fp8_ds_mla page (1 or 2 for DSv4).
//   KvBlockStride     page stride in bytes (>= B * 584; 1152, 1728 or a packed stride such as
//                     39168).
//   NormWeightT       element type of rms_norm_weight: `float` or `zj::bf16_t`.
// Launch: grid = c128_store_grid(num_tokens) CTAs (any positive grid is correct: see "token
//   chunks" in compressor_params.h), block = kC128StoreThreads (256), no dynamic shared memory.
//   A CTA examines its chunk of tokens 32 at a time and stores the active ones in turn with the
//   spec's per-token geometry: thread i owns dims 2i, 2i+1; warp w < 7 is quant block w, warp 7
//   the RoPE tail.
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
__global__ void __launch_bounds__(kC128StoreThreads)
    c128_store_kernel(const __grid_constant__ C128StoreParams params) {
  using namespace compressor;
  static_assert(KvCacheBlockSize >= 1, "B must be positive");
  static_assert(KvBlockStride >= static_cast<long long>(KvCacheBlockSize) * kDsMlaRowBytes,
                "the page stride must hold B rows of 584 bytes");
  const int tid = threadIdx.x;
  const int warp = tid >> 5;
  const int lane = tid & 31;
  const bool is_rope = warp == kCompressorNopeDim / kCompressorQuantBlock;

  __shared__ ActiveToken active_tokens[kTokensPerRound];
  const TokenRange range = chunk_tokens(params.num_tokens, blockIdx.x, gridDim.x);
  for (long long first = range.begin; first < range.end; first += kTokensPerRound) {
    const int active_count = collect_active_tokens(
        first, range.end,
        [&](long long token, ActiveToken& record) {
          return c128_store_examine_token(params, token, record);
        },
        active_tokens);
    if (active_count == 0) continue;
    const Float2 weight = load_norm_weights2<NormWeightT>(params.rms_norm_weight, 2 * tid);

    for (int index = 0; index < active_count; ++index) {
      const ActiveToken token = active_tokens[index];
      const Float2 x =
          load_float2(params.compressed_kv + token.token * kCompressorHeadSize + 2 * tid);
      float cos_v = 0.0f;
      float sin_v = 0.0f;
      if (is_rope) {
        // cpos = p - 127 for a boundary token; pair j = lane.
        const float* cs =
            params.cos_sin_cache + (token.position - (kC128Ratio - 1)) * params.cos_sin_stride;
        cos_v = cs[lane];
        sin_v = cs[kCompressorRopeDim / 2 + lane];
      }

      const Float2 y = c128_rms_norm(x, weight, params.eps);

      const DsMlaRow row =
          ds_mla_row(params.k_cache, token.kv_slot, KvCacheBlockSize, KvBlockStride);
      if (!is_rope) {
        const float q0 = round_to_bf16(y.x);
        const float q1 = round_to_bf16(y.y);
        const float amax = group_max<32>(fmaxf(fabsf(q0), fabsf(q1)));
        const u32 exponent = ds_mla_scale_exponent(amax);
        const u32 codes = quantize_e4m3x2(q0, q1, ue8m0_inverse_scale(exponent));
        store_u16(row.data + 2 * tid, static_cast<u16>(codes));
        if (lane == 0) {
          store_u8(row.scales + warp, exponent);
          if (warp == 0) store_u8(row.scales + kDsMlaScaleBytes - 1, 0u);
        }
      } else {
        const RotatedPair r = rope_rotate(y.x, y.y, cos_v, sin_v);
        store_u32(row.data + kCompressorNopeDim + 4 * lane, pack_bf16x2_rn(r.even, r.odd));
      }
      if (index + 1 < active_count) __syncthreads();  // the next token reuses the partials
    }
  }
}

}  // namespace zj::dsv4
