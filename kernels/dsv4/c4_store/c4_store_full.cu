// C4 (CSA, ratio 4) compress -> RMSNorm -> RoPE -> full-row store (spec section 4): the
// FlashInfer "plain row" cache [num_blocks, B, 512] of bf16 or per-tensor-scaled e4m3.
//
// Template parameters:
//   StoreFullFp8  false: bf16 rows; true: e4m3 rows scaled by 1 / fp8_scale[0].
//   NormWeightT   element type of rms_norm_weight: `float` or `zj::bf16_t`.
// Launch: grid = c4_store_grid(num_tokens) CTAs (any positive grid is correct), block =
//   kC4StoreThreads (64), no dynamic shared memory (static ~3.1 KiB). Token chunks, pooling and
//   norm are c4_store.cu's; thread tid owns elements [8 tid, 8 tid + 8), threads 56..63 the RoPE
//   tail.
// Writes, for each active token only, the row at
//   vbase = (kv_slot / B) * kv_block_stride_bytes + (kv_slot % B) * kv_row_stride_bytes:
//   bf16: [vbase, vbase + 1024) = bf16_rn(y) (nope) / bf16_rn(rotated y) (rope), LE pairs;
//   e4m3: [vbase, vbase + 512)  = e4m3_rn_sat(clamp(bf16_rn(v) * (1 / fp8_scale), +-448)).
// Bytes moved per active token: 32 KiB of state read, 1024 (bf16) or 512 (e4m3) bytes written,
// plus the L2-resident weights and cos/sin and 28 B of metadata per token.
#include "dsv4/c4_store/c4_store_params.h"
#include "dsv4/compressor/compressor_common.cuh"

#ifndef __CUDACC__
#define __grid_constant__
#endif

namespace zj::dsv4 {

template <bool StoreFullFp8, typename NormWeightT>
__global__ void __launch_bounds__(kC4StoreThreads, kC4StoreMinBlocksPerSm)
    c4_store_full_kernel(const __grid_constant__ C4StoreFullParams params) {
  using namespace compressor;
  const int tid = threadIdx.x;
  const int elem_base = tid * 8;
  const bool is_rope = elem_base >= kCompressorNopeDim;

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
    float multiplier = 1.0f;
    if (StoreFullFp8) multiplier = __fdiv_rn(1.0f, params.fp8_scale[0]);

    for (int index = 0; index < active_count; ++index) {
      const ActiveToken token = active_tokens[index];
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
      if (is_rope) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const RotatedPair r = rope_rotate(y[2 * i], y[2 * i + 1], cos_v[i], sin_v[i]);
          y[2 * i] = r.even;
          y[2 * i + 1] = r.odd;
        }
      }

      unsigned char* row = full_row(params.k_cache, token.kv_slot, params.kv_cache_block_size,
                                    params.kv_block_stride_bytes, params.kv_row_stride_bytes);
      if (StoreFullFp8) {
        u32 codes[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          codes[i] =
              quantize_e4m3x2(round_to_bf16(y[2 * i]), round_to_bf16(y[2 * i + 1]), multiplier);
        }
        store_u32x2(row + elem_base, codes[0] | (codes[1] << 16), codes[2] | (codes[3] << 16));
      } else {
        u32 packed[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) packed[i] = pack_bf16x2_rn(y[2 * i], y[2 * i + 1]);
        store_u32x4(row + 2 * elem_base, packed[0], packed[1], packed[2], packed[3]);
      }
    }
  }
}

}  // namespace zj::dsv4
