// DSv4 indexer-Q RoPE + FP8 quantization (spec section 1, FP8 variant).
//
// Template parameters, in order (the compile key):
//   HeadDim   D, elements per (token, head) row (128 for DSv4)
//   RopeDim   R, the last R dims get GPT-J interleaved RoPE (64)
//   NumHeads  H (64)
//   CosSinT   element type of cos_sin_cache: float or zj::bf16_t
//   Coarsen   heads per thread, sharing one cos/sin load (1 when T < 512, else 4); <= 8
//
// Launch: grid.x = indexer_q_grid_size(T, D, H, Coarsen), block = 128 threads
// (kIndexerQThreadsPerBlock), no dynamic shared memory, one argument (IndexerQParams).
// Threads come in subwarps of D/16 lanes; a subwarp owns Coarsen consecutive heads of one
// token and each lane two pieces of 8 elements of every one of them (RowLayout::split_halves in
// indexer_q_common.cuh).
//
// Programmatic dependent launch: positions are read before the grid-dependency wait, Q and the
// weights after it (zerojit/device/grid_dependency.cuh).
// Writes, for every t < T and h < H: q_fp8[t, h, 0:D] (8 B per lane and piece, e4m3 codes) and
// weights_out[t, h] (lane i of the subwarp writes the weight of the tile's head i). Nothing
// else; q_packed and q_scale are not read.
//
// Per row: RoPE in f32 (pinned FMA form), rounded to bf16; amax over the bf16 values;
// E = ceil_pow2_bits(max(amax, 1e-4) * f32(1/448)); codes e4m3_rn_sat(x * 2^(127-E));
// weights_out = (f32(w) * scale) * 2^(E-127).
#include "dsv4/indexer_q/indexer_q_common.cuh"
#include "zerojit/device/grid_dependency.cuh"

namespace zj::dsv4 {

template <int HeadDim, int RopeDim, int NumHeads, typename CosSinT, int Coarsen>
__global__ void __launch_bounds__(kIndexerQThreadsPerBlock)
    indexer_q_fp8_kernel(const __grid_constant__ IndexerQParams params) {
  using G = indexer_q_detail::Geometry<HeadDim, RopeDim, NumHeads, CosSinT, Coarsen,
                                       indexer_q_detail::RowLayout::split_halves>;
  // Lane i writes the weight of head i, so a tile cannot hold more heads than lanes.
  static_assert(Coarsen <= 8 && Coarsen <= G::kLanesPerRow,
                "indexer-Q FP8: coarsen must be <= 8 and <= head_dim / 16");

  // Programmatic dependent launch: the dependents released first thing, the position read
  // before the wait, Q and the weights (the kernel before writes them) after it.
  GridDependency dependency;
  indexer_q_detail::Placement at = indexer_q_detail::place_thread<G>(params.num_tokens);
  indexer_q_detail::load_position<G>(params, at);
  dependency.wait();

  // The weight load is independent of Q: issue it first so its latency overlaps.
  const bool writes_weight = at.active && at.lane < Coarsen;
  float weight = 0.0f;
  if (writes_weight) weight = bf16_bits_to_float(params.weights[at.first_row + at.lane]);

  u32 words[Coarsen][8];
  indexer_q_detail::load_rotated_tile<G>(params, at, words);

  u32 exponents[Coarsen];
#pragma unroll
  for (int c = 0; c < Coarsen; ++c) {
    const float amax =
        indexer_q_detail::group_max<G::kLanesPerRow>(indexer_q_detail::abs_max<0, 8>(words[c]));
    exponents[c] =
        ue8m0_ceil_pow2_bits(fmaxf(amax, kIndexerQFp8MinAmax) * (1.0f / kIndexerQFp8Max));
  }

#pragma unroll
  for (int c = 0; c < Coarsen; ++c) {
    const float inverse_scale = ue8m0_inverse_scale(exponents[c]);
    u32 codes[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const u32 low_pair = pack_e4m3x2_rn_sat(bf16x2_low(words[c][2 * k]) * inverse_scale,
                                              bf16x2_high(words[c][2 * k]) * inverse_scale);
      const u32 high_pair = pack_e4m3x2_rn_sat(bf16x2_low(words[c][2 * k + 1]) * inverse_scale,
                                               bf16x2_high(words[c][2 * k + 1]) * inverse_scale);
      codes[k] = low_pair | (high_pair << 16);
    }
    if (at.active) {
      unsigned char* const row_out = params.q_fp8 + (at.first_row + c) * HeadDim;
      // codes[0..1] encode piece 0 (words 0..3), codes[2..3] piece 1.
      indexer_q_detail::store_8b(row_out + indexer_q_detail::piece_start<G>(0, at.lane), codes[0],
                                 codes[1]);
      indexer_q_detail::store_8b(row_out + indexer_q_detail::piece_start<G>(1, at.lane), codes[2],
                                 codes[3]);
    }
  }

  if (writes_weight) {
    u32 exponent = exponents[0];
#pragma unroll
    for (int c = 1; c < Coarsen; ++c) {
      if (at.lane == c) exponent = exponents[c];
    }
    params.weights_out[at.first_row + at.lane] = (weight * params.scale) * ue8m0_scale(exponent);
  }
}

}  // namespace zj::dsv4
