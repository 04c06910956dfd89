// C4 (CSA, ratio 4) compress -> RMSNorm -> RoPE -> fp8_ds_mla store (spec section 3).
//
// Template parameters:
//   NormWeightT  element type of rms_norm_weight: `float` or `zj::bf16_t`.
// Launch: grid = c4_store_grid(num_tokens) CTAs (any positive grid is correct: see "token
//   chunks" in compressor_params.h), block = kC4StoreThreads (64), no dynamic shared memory
//   (static ~3.1 KiB: the active-token list, 8 row offsets, the 512 pooled values, 2 partial
//   sums). A CTA examines its chunk of tokens 32 at a time and processes the active ones in
//   token order, each with the spec's per-token geometry: thread tid owns elements
//   [8 tid, 8 tid + 8) (it pools another split, see c4_pool_and_norm); quant group g = tid / 8
//   is the 64-element block g (groups 0..6 are quantized, group 7 is the RoPE tail).
// Writes, for each active token only (see C4StoreParams), into its page
//   page = kv_slot / B, row = kv_slot % B of k_cache:
//   [page * stride0 + row * 576, +576)     448 e4m3 codes, then 64 bf16 (RoPE-rotated)
//   [page * stride0 + B * 576 + row * 8, +8) 7 UE8M0 exponents, then byte 7 = 0
// and nothing else. Bytes moved per active token: 32 KiB of state read (8 rows x 1024 floats),
// 584 B written, 256 B of cos/sin and 1 KiB (bf16) or 2 KiB (f32) of weights read (both
// L2-resident); every token, active or not, costs 28 B of metadata reads.
#include "dsv4/c4_store/c4_store_params.h"
#include "dsv4/compressor/compressor_common.cuh"

#ifndef __CUDACC__
#define __grid_constant__
#endif

namespace zj::dsv4 {

template <typename NormWeightT>
__global__ void __launch_bounds__(kC4StoreThreads, kC4StoreMinBlocksPerSm)
    c4_store_kernel(const __grid_constant__ C4StoreParams params) {
  using namespace compressor;
  const int tid = threadIdx.x;
  const int group = tid / 8;
  const int elem_base = tid * 8;
  const bool is_rope = group == kCompressorNopeDim / kCompressorQuantBlock;

  // Programmatic dependent launch: token metadata and block-table entries before the wait,
  // the state rows after it (c4_pool_and_norm); a CTA with no active token waits on its way out.
  GridDependency dependency;
  __shared__ ActiveToken active_tokens[kTokensPerRound];
  const TokenRange range = chunk_tokens(params.num_tokens, blockIdx.x, gridDim.x);
  for (long long first = range.begin; first < range.end; first += kTokensPerRound) {
    const int active_count = collect_active_tokens(
        first, range.end,
        [&](long long token, ActiveToken& record) {
          return c4_examine_token(params, token, record);
        },
        active_tokens);
    if (active_count == 0) continue;

    for (int index = 0; index < active_count; ++index) {
      const ActiveToken token = active_tokens[index];
      // Issued before the pooling so that their latency hides behind the state loads.
      float cos_v[4];
      float sin_v[4];
      if (is_rope) {
        const long long rope_position = (token.position / kC4Ratio) * kC4Ratio;
        const float* cs = params.cos_sin_cache + rope_position * params.cos_sin_stride;
        const int pair_base = (elem_base - kCompressorNopeDim) / 2;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          cos_v[i] = cs[pair_base + i];
          sin_v[i] = cs[kCompressorRopeDim / 2 + pair_base + i];
        }
      }

      float y[8];
      c4_pool_and_norm<NormWeightT>(params, token, elem_base, dependency, y);

      // amax over the group's 64 BF16-rounded values: 8 per lane, then 3 butterfly steps within
      // the group's 8 lanes. Group 7 shuffles too (full-warp masks) and ignores the result.
      float q[8];
      float amax = 0.0f;
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        q[e] = round_to_bf16(y[e]);
        amax = fmaxf(amax, fabsf(q[e]));
      }
      amax = group_max<8>(amax);

      const DsMlaRow row = ds_mla_row(params.k_cache, token.kv_slot, params.kv_cache_block_size,
                                      params.kv_block_stride_bytes);
      if (!is_rope) {
        const u32 exponent = ds_mla_scale_exponent(amax);
        const float multiplier = ue8m0_inverse_scale(exponent);
        u32 codes[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          codes[i] = quantize_e4m3x2(q[2 * i], q[2 * i + 1], multiplier);
        }
        store_u32x2(row.data + elem_base, codes[0] | (codes[1] << 16), codes[2] | (codes[3] << 16));
        if ((tid & 7) == 0) store_u8(row.scales + group, exponent);
        if (tid == 0) store_u8(row.scales + kDsMlaScaleBytes - 1, 0u);
      } else {
        u32 packed[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const RotatedPair r = rope_rotate(y[2 * i], y[2 * i + 1], cos_v[i], sin_v[i]);
          packed[i] = pack_bf16x2_rn(r.even, r.odd);
        }
        // bf16 pair j of the tail sits at byte 448 + 4 j; this lane's pairs start at 4 (tid % 8).
        store_u32x4(row.data + kCompressorNopeDim + 16 * (tid & 7), packed[0], packed[1], packed[2],
                    packed[3]);
      }
    }
  }
}

}  // namespace zj::dsv4
