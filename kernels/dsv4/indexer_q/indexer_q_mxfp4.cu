// DSv4 indexer-Q RoPE + MXFP4 quantization (spec section 1, MXFP4 variant).
//
// Template parameters, in order (the compile key):
//   HeadDim   D, elements per (token, head) row (128 for DSv4); a multiple of 32
//   RopeDim   R, the last R dims get GPT-J interleaved RoPE (64); a multiple of 32
//   NumHeads  H (64)
//   CosSinT   element type of cos_sin_cache: float or zj::bf16_t
//   Coarsen   heads per thread, sharing one cos/sin load (1 when T < 512, else 4)
//
// Launch: grid.x = indexer_q_grid_size(T, D, H, Coarsen), block = 128 threads
// (kIndexerQThreadsPerBlock), no dynamic shared memory, one argument (IndexerQParams).
// Threads come in subwarps of D/16 lanes; a subwarp owns Coarsen consecutive heads of one
// token and each lane 16 contiguous elements of every one of them. Lanes 2k and 2k+1 of a
// subwarp form MXFP4 block k of the row.
//
// Programmatic dependent launch: positions are read before the grid-dependency wait, Q and the
// weights after it (zerojit/device/grid_dependency.cuh).
// Writes, for every t < T and h < H: q_packed[t, h, 0:D/2] (8 B per lane; element 2k in the
// low nibble of byte k), q_scale[t, h, 0:D/32] (one byte per block, by the block's even lane)
// and weights_out[t, h] (thread g of the grid writes flat entries g, g + grid threads, ...).
// Nothing else; q_fp8 is not read.
//
// Per 32-element block m: RoPE in f32 (pinned FMA form), rounded to bf16; amax_m over the
// bf16 values; E_m = ceil_pow2_bits(max(amax_m, 6 * 2^-126) * f32(1/6)); codes
// e2m1_rn_sat(x * 2^(127-E_m)) (the hardware conversion on the sm_100 family, bit-identical
// packed bf16x2 arithmetic elsewhere: see zerojit/device/numerics.cuh); weights_out = f32(w) *
// scale, without any q-scale fold.
#include "dsv4/indexer_q/indexer_q_common.cuh"
#include "zerojit/device/grid_dependency.cuh"

namespace zj::dsv4 {

template <int HeadDim, int RopeDim, int NumHeads, typename CosSinT, int Coarsen>
__global__ void __launch_bounds__(kIndexerQThreadsPerBlock)
    indexer_q_mxfp4_kernel(const __grid_constant__ IndexerQParams params) {
  using G = indexer_q_detail::Geometry<HeadDim, RopeDim, NumHeads, CosSinT, Coarsen,
                                       indexer_q_detail::RowLayout::contiguous>;
  static_assert(
      RopeDim % kIndexerQMxFp4BlockSize == 0 && G::kNopeDim % kIndexerQMxFp4BlockSize == 0,
      "indexer-Q MXFP4: rope_dim and head_dim - rope_dim must be multiples of 32");
  constexpr int kLanesPerBlock = kIndexerQMxFp4BlockSize / kIndexerQElementsPerThread;

  // Programmatic dependent launch: the dependents released first thing, the position read
  // before the wait, Q and the weights (the kernel before writes them) after it.
  GridDependency dependency;
  indexer_q_detail::Placement at = indexer_q_detail::place_thread<G>(params.num_tokens);
  indexer_q_detail::load_position<G>(params, at);
  dependency.wait();

  // The weights do not depend on Q: thread g of the grid owns flat entries g, g + grid threads,
  // ... of [T, H] (coalesced). The first load is issued before Q's so its latency overlaps; the
  // loop only runs when the grid has fewer threads than weights (coarsen > head_dim / 16).
  const long long num_weights = params.num_tokens * NumHeads;
  const long long first_weight =
      static_cast<long long>(blockIdx.x) * kIndexerQThreadsPerBlock + threadIdx.x;
  float first_weight_value = 0.0f;
  if (first_weight < num_weights) {
    first_weight_value = bf16_bits_to_float(params.weights[first_weight]);
  }

  u32 words[Coarsen][8];
  indexer_q_detail::load_rotated_tile<G>(params, at, words);

  // Output addresses of head 0 of the tile; head c is c rows further. Computed once, so the
  // per-head stores below are a constant offset each.
  unsigned char* const packed_out =
      params.q_packed + at.first_row * (HeadDim / 2) + at.lane * (kIndexerQElementsPerThread / 2);
  unsigned char* const scale_out = params.q_scale +
                                   at.first_row * (HeadDim / kIndexerQMxFp4BlockSize) +
                                   at.lane / kLanesPerBlock;
  const bool writes_scale = at.lane % kLanesPerBlock == 0;

#pragma unroll
  for (int c = 0; c < Coarsen; ++c) {
    const float amax =
        indexer_q_detail::group_max<kLanesPerBlock>(indexer_q_detail::abs_max<0, 8>(words[c]));
    const u32 exponent =
        ue8m0_ceil_pow2_bits(fmaxf(amax, kIndexerQMxFp4MinAmax) * (1.0f / kIndexerQMxFp4Max));
    const E2m1BlockScale scale = e2m1_block_scale(exponent);
    const u32 packed[2] = {
        pack_e2m1x8_scaled({words[c][0], words[c][1], words[c][2], words[c][3]}, scale),
        pack_e2m1x8_scaled({words[c][4], words[c][5], words[c][6], words[c][7]}, scale)};
    if (at.active) {
      indexer_q_detail::store_8b(packed_out + c * (HeadDim / 2), packed[0], packed[1]);
      if (writes_scale) {
        scale_out[c * (HeadDim / kIndexerQMxFp4BlockSize)] = static_cast<unsigned char>(exponent);
      }
    }
  }

  if (first_weight < num_weights) {
    params.weights_out[first_weight] = first_weight_value * params.scale;
  }
  const long long grid_threads = static_cast<long long>(gridDim.x) * kIndexerQThreadsPerBlock;
  for (long long index = first_weight + grid_threads; index < num_weights; index += grid_threads) {
    params.weights_out[index] = bf16_bits_to_float(params.weights[index]) * params.scale;
  }
}

}  // namespace zj::dsv4
