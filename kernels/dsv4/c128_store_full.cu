// C128 (HCA) stage 2, full-cache variant (spec section 7): RMSNorm -> RoPE -> store of one
// plain row [512] of bf16 or per-tensor-scaled e4m3 (the FlashInfer layout).
//
// Template parameters:
//   StoreFullFp8  false: bf16 rows; true: e4m3 rows scaled by 1 / fp8_scale[0].
//   NormWeightT   element type of rms_norm_weight: `float` or `zj::bf16_t`.
// Launch: grid = c128_store_grid(num_tokens) CTAs (any positive grid is correct), block =
//   kC128StoreThreads (256), no dynamic shared memory. Token chunks as in c128_store.cu; thread
//   i owns dims 2i, 2i+1; warp 7 rotates the RoPE tail (pair j = lane).
// Writes, for each active token only, the row at
//   vbase = (kv_slot / B) * kv_block_stride_bytes + (kv_slot % B) * kv_row_stride_bytes:
//   bf16: [vbase, vbase + 1024) = bf16_rn(y) / bf16_rn(rotated y), LE pairs;
//   e4m3: [vbase, vbase + 512)  = e4m3_rn_sat(clamp(bf16_rn(v) * (1 / fp8_scale), +-448)).
// Bytes moved per active token: 2 KiB of compressed_kv read, 1024 (bf16) or 512 (e4m3) written;
// every token costs 24 B of metadata reads.
#include "dsv4/compressor_common.cuh"

#ifndef __CUDACC__
#define __grid_constant__
#endif

namespace zj::dsv4 {

template <bool StoreFullFp8, typename NormWeightT>
__global__ void __launch_bounds__(kC128StoreThreads)
    c128_store_full_kernel(const __grid_constant__ C128StoreFullParams params) {
  using namespace compressor;
  if (params.kv_cache_block_size <= 0) return;  // uniform over the grid: nothing to address
  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const bool is_rope = (tid >> 5) == kCompressorNopeDim / kCompressorQuantBlock;

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
    float multiplier = 1.0f;
    if (StoreFullFp8) multiplier = __fdiv_rn(1.0f, params.fp8_scale[0]);

    for (int index = 0; index < active_count; ++index) {
      const ActiveToken token = active_tokens[index];
      const Float2 x =
          load_float2(params.compressed_kv + token.token * kCompressorHeadSize + 2 * tid);
      float cos_v = 0.0f;
      float sin_v = 0.0f;
      if (is_rope) {
        const long long rope_position = (token.position / kC128Ratio) * kC128Ratio;
        const float* cs = params.cos_sin_cache + rope_position * params.cos_sin_stride;
        cos_v = cs[lane];
        sin_v = cs[kCompressorRopeDim / 2 + lane];
      }

      Float2 y = c128_rms_norm(x, weight, params.eps);
      if (is_rope) {
        const RotatedPair r = rope_rotate(y.x, y.y, cos_v, sin_v);
        y.x = r.even;
        y.y = r.odd;
      }

      unsigned char* row = full_row(params.k_cache, token.kv_slot, params.kv_cache_block_size,
                                    params.kv_block_stride_bytes, params.kv_row_stride_bytes);
      if (StoreFullFp8) {
        const u32 codes = quantize_e4m3x2(round_to_bf16(y.x), round_to_bf16(y.y), multiplier);
        store_u16(row + 2 * tid, static_cast<u16>(codes));
      } else {
        store_u32(row + 4 * tid, pack_bf16x2_rn(y.x, y.y));
      }
      if (index + 1 < active_count) __syncthreads();  // the next token reuses the partials
    }
  }
}

}  // namespace zj::dsv4
