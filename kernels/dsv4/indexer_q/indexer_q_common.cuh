// The part both indexer-Q kernels share (spec section 1): thread placement, the guarded loads of
// Q, cos/sin and positions, the GPT-J RoPE of the last R dims rounded back to bf16, and the
// |x| maximum over packed bf16 pairs. The FP8 and MXFP4 kernels differ only in how they
// quantize the rotated row and fold the weights.
#pragma once

#include "dsv4/indexer_q/indexer_q_params.h"
#include "zerojit/device/numerics.cuh"

namespace zj::dsv4::indexer_q_detail {

template <typename A, typename B>
struct IsSame {
  static constexpr bool value = false;
};
template <typename A>
struct IsSame<A, A> {
  static constexpr bool value = true;
};

// How a lane's 16 elements of a row sit in the row, and how Q is loaded. Chosen per variant by
// measurement (H200, CUDA-graph replay, cold L2; docs/BENCHMARKS.md section 8). The FP8 kernel
// takes split halves loaded through L1: 1.3-8 % faster at every size (T = 16384 109.6 ->
// 102.0 µs), where L1 loads alone lose 1 % at T <= 512 and split halves alone 1.5 % above
// T = 4096. The MXFP4 kernel, ALU-heavier, keeps the spec's contiguous run streamed past L1:
// split halves cost it 4-14 %, L1 loads alone 4 % at T = 512 (for 3-6 % above T = 16384).
enum class RowLayout {
  contiguous,   // lane l: [16 l, 16 l + 16), loads L1::no_allocate (the spec's geometry)
  split_halves  // lane l: [8 l, +8) and [D/2 + 8 l, +8), loads cached in L1 (see below)
};

// Compile-time geometry of one key, with the spec's constraints on it.
template <int HeadDim, int RopeDim, int NumHeads, typename CosSinT, int Coarsen, RowLayout Layout>
struct Geometry {
  using CosSin = CosSinT;
  static constexpr int kHeadDim = HeadDim;
  static constexpr int kRopeDim = RopeDim;
  static constexpr int kNumHeads = NumHeads;
  static constexpr int kCoarsen = Coarsen;
  static constexpr int kLanesPerRow = HeadDim / kIndexerQElementsPerThread;
  static constexpr int kNopeDim = HeadDim - RopeDim;
  static constexpr int kHeadTiles = NumHeads / Coarsen;
  static constexpr RowLayout kLayout = Layout;

  static_assert(Coarsen >= 1 && NumHeads % Coarsen == 0, "indexer-Q: H % coarsen must be 0");
  static_assert(HeadDim % 16 == 0, "indexer-Q: head_dim must be a multiple of 16");
  static_assert(kLanesPerRow >= 1 && kLanesPerRow <= 32 && (kLanesPerRow & (kLanesPerRow - 1)) == 0,
                "indexer-Q: head_dim / 16 must be a power of two <= 32");
  static_assert(RopeDim >= 0 && RopeDim <= HeadDim && RopeDim % 16 == 0 && kNopeDim % 16 == 0,
                "indexer-Q: rope_dim and head_dim - rope_dim must be multiples of 16");
  static_assert(IsSame<CosSinT, float>::value || IsSame<CosSinT, bf16_t>::value,
                "indexer-Q: cos/sin must be float or zj::bf16_t");
};

// Where a thread works: token, first head of its tile, lane within the row's subwarp.
struct Placement {
  long long token;
  long long first_row;  // token * H + first head: the (token, head) row index of head 0.
  int lane;
  bool active;  // token < T. Inactive threads still run the shuffles, with zeros.
  // positions[token] for the lanes that rotate rope dims (0 elsewhere): loaded by load_position
  // before the grid-dependency wait, since no kernel of the step writes positions.
  long long position;
};

template <class G>
__device__ __forceinline__ Placement place_thread(long long num_tokens) {
  const long long global_thread =
      static_cast<long long>(blockIdx.x) * kIndexerQThreadsPerBlock + threadIdx.x;
  const long long subwarp = global_thread / G::kLanesPerRow;
  Placement p;
  p.token = subwarp / G::kHeadTiles;
  const int head_tile = static_cast<int>(subwarp % G::kHeadTiles);
  p.first_row = p.token * G::kNumHeads + static_cast<long long>(head_tile) * G::kCoarsen;
  p.lane = static_cast<int>(threadIdx.x) % G::kLanesPerRow;
  p.active = p.token < num_tokens;
  p.position = 0;
  return p;
}

// --- Memory access --------------------------------------------------------------------------

// The loads are volatile asm so that the compiler keeps them in program order after the grid
// dependency wait (zerojit/device/grid_dependency.cuh): a non-volatile asm with no memory
// operand may be hoisted above it, and Q is what the kernel before may still be writing. Q's
// loads are coherent, not .nc: ptxas moved a non-coherent Q load above the wait once the
// dependents were released first thing (the PDL tests read poison), since .nc declares the
// data read-only for the whole kernel.

// Q is read exactly once: bypass L1.
__device__ __forceinline__ void load_streaming_16b(const void* address, u32 (&words)[4]) {
  asm volatile("ld.global.L1::no_allocate.v4.b32 {%0, %1, %2, %3}, [%4];"
               : "=r"(words[0]), "=r"(words[1]), "=r"(words[2]), "=r"(words[3])
               : "l"(address));
}

// Q with RowLayout::split_halves (see RowLayout): cacheable, coherent.
__device__ __forceinline__ void load_cached_16b(const void* address, u32 (&words)[4]) {
  asm volatile("ld.global.v4.b32 {%0, %1, %2, %3}, [%4];"
               : "=r"(words[0]), "=r"(words[1]), "=r"(words[2]), "=r"(words[3])
               : "l"(address));
}

// cos/sin rows (constants) are shared by every head of a token and many threads: the read-only
// path, cacheable.
__device__ __forceinline__ void load_readonly_16b(const void* address, u32 (&words)[4]) {
  asm volatile("ld.global.nc.v4.b32 {%0, %1, %2, %3}, [%4];"
               : "=r"(words[0]), "=r"(words[1]), "=r"(words[2]), "=r"(words[3])
               : "l"(address));
}

__device__ __forceinline__ void load_readonly_8b(const void* address, u32 (&words)[2]) {
  asm volatile("ld.global.nc.v2.b32 {%0, %1}, [%2];"
               : "=r"(words[0]), "=r"(words[1])
               : "l"(address));
}

__device__ __forceinline__ void store_8b(void* address, u32 low, u32 high) {
  asm volatile("st.global.v2.b32 [%0], {%1, %2};" ::"l"(address), "r"(low), "r"(high) : "memory");
}

// --- Math -----------------------------------------------------------------------------------

// Rotates element pairs [First, First + Count) of a lane's row (pair k in word k, even element
// in the low half) in f32 with the pinned FMA form and rounds each result to bf16, as the
// reference does before it takes the amax.
template <int First, int Count>
__device__ __forceinline__ void rotate_pairs(u32 (&words)[8], const float (&cos_v)[Count],
                                             const float (&sin_v)[Count]) {
#pragma unroll
  for (int k = 0; k < Count; ++k) {
    u32& word = words[First + k];
    const RotatedPair r = rope_rotate(bf16x2_low(word), bf16x2_high(word), cos_v[k], sin_v[k]);
    word = pack_bf16x2_rn(r.even, r.odd);
  }
}

// Per lane max(|a|, |b|), with the sign bit the XOR of the inputs' (cleared by the caller).
__device__ __forceinline__ u32 max_abs_bf16x2(u32 a, u32 b) {
  u32 result;
  asm("max.xorsign.abs.bf16x2 %0, %1, %2;" : "=r"(result) : "r"(a), "r"(b));
  return result;
}

// max |x| over `Count` consecutive packed words starting at word `First` (exact: the inputs are
// bf16 already).
template <int First, int Count>
__device__ __forceinline__ float abs_max(const u32 (&words)[8]) {
  u32 packed = words[First];
#pragma unroll
  for (int k = First + 1; k < First + Count; ++k) packed = max_abs_bf16x2(packed, words[k]);
  packed &= 0x7FFF7FFFu;
  return fmaxf(bf16x2_low(packed), bf16x2_high(packed));
}

// Butterfly max over aligned groups of `Width` lanes. Every lane of the warp must call it.
template <int Width>
__device__ __forceinline__ float group_max(float value) {
#pragma unroll
  for (int offset = Width / 2; offset >= 1; offset /= 2) {
    value = fmaxf(value, __shfl_xor_sync(0xFFFFFFFFu, value, offset));
  }
  return value;
}

// --- RowLayout::contiguous: a lane's 16 elements in one run ----------------------------------

// The thread's 16 bf16 elements (8 packed pairs, element 2k in the low half of word k) of row
// `row`, or zeros when inactive.
template <int HeadDim>
__device__ __forceinline__ void load_q_run(const unsigned short* q, long long row, int lane,
                                           bool active, u32 (&words)[8]) {
  u32 first[4] = {0u, 0u, 0u, 0u};
  u32 second[4] = {0u, 0u, 0u, 0u};
  if (active) {
    const unsigned short* run = q + row * HeadDim + lane * kIndexerQElementsPerThread;
    load_streaming_16b(run, first);
    load_streaming_16b(run + 8, second);
  }
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    words[k] = first[k];
    words[4 + k] = second[k];
  }
}

// The 8 cos and 8 sin values a rope lane needs: pairs [8 rope_lane, +8) of the token's row.
template <typename CosSinT, int RopeDim>
__device__ __forceinline__ void load_cos_sin8(const IndexerQParams& params, long long position,
                                              int rope_lane, float (&cos_v)[8], float (&sin_v)[8]) {
  const long long row = position * params.cos_sin_row_stride;
  const long long cos_column = static_cast<long long>(rope_lane) * 8;
  const long long sin_column = RopeDim / 2 + cos_column;
  if constexpr (IsSame<CosSinT, float>::value) {
    const float* table = static_cast<const float*>(params.cos_sin_cache) + row;
    u32 c0[4], c1[4], s0[4], s1[4];
    load_readonly_16b(table + cos_column, c0);
    load_readonly_16b(table + cos_column + 4, c1);
    load_readonly_16b(table + sin_column, s0);
    load_readonly_16b(table + sin_column + 4, s1);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      cos_v[k] = __uint_as_float(c0[k]);
      cos_v[4 + k] = __uint_as_float(c1[k]);
      sin_v[k] = __uint_as_float(s0[k]);
      sin_v[4 + k] = __uint_as_float(s1[k]);
    }
  } else {
    const unsigned short* table = static_cast<const unsigned short*>(params.cos_sin_cache) + row;
    u32 c[4], s[4];
    load_readonly_16b(table + cos_column, c);
    load_readonly_16b(table + sin_column, s);
    unpack_bf16x2(c, cos_v);
    unpack_bf16x2(s, sin_v);
  }
}

// load_rotated_tile for RowLayout::contiguous: lanes at or past nope / 16 hold rope dims only.
template <class G>
__device__ __forceinline__ void load_rotated_contiguous_tile(const IndexerQParams& params,
                                                             const Placement& at,
                                                             u32 (&words)[G::kCoarsen][8]) {
#pragma unroll
  for (int c = 0; c < G::kCoarsen; ++c) {
    load_q_run<G::kHeadDim>(params.q, at.first_row + c, at.lane, at.active, words[c]);
  }
  if constexpr (G::kRopeDim > 0) {
    constexpr int kFirstRopeLane = G::kNopeDim / kIndexerQElementsPerThread;
    if (at.active && at.lane >= kFirstRopeLane) {
      float cos_v[8], sin_v[8];
      load_cos_sin8<typename G::CosSin, G::kRopeDim>(params, at.position, at.lane - kFirstRopeLane,
                                                     cos_v, sin_v);
#pragma unroll
      for (int c = 0; c < G::kCoarsen; ++c) rotate_pairs<0, 8>(words[c], cos_v, sin_v);
    }
  }
}

// --- RowLayout::split_halves: two pieces of 8 a lane ----------------------------------------
//
// Lane l holds piece 0 = elements [8 l, 8 l + 8) and piece 1 = [D/2 + 8 l, D/2 + 8 l + 8) of
// each row of its tile, so that each of a subwarp's two 16-byte loads reads one contiguous
// D-byte run. A piece is all rope or all nope (its start is a multiple of 8, the nope width a
// multiple of 16), and piece 1 holds rope dims whenever piece 0 does. In `words`, piece p is
// words [4 p, 4 p + 4), element pair k of the piece in word 4 p + k (even element in the low
// half).

// First element of piece `piece` of `lane`.
template <class G>
__device__ __forceinline__ int piece_start(int piece, int lane) {
  return piece * (G::kHeadDim / 2) + lane * (kIndexerQElementsPerThread / 2);
}

// The thread's two pieces of row `row` (8 packed pairs), or zeros when
// inactive.
template <class G>
__device__ __forceinline__ void load_q_pieces(const unsigned short* q, long long row, int lane,
                                              bool active, u32 (&words)[8]) {
  u32 first[4] = {0u, 0u, 0u, 0u};
  u32 second[4] = {0u, 0u, 0u, 0u};
  if (active) {
    const unsigned short* row_base = q + row * G::kHeadDim;
    load_cached_16b(row_base + piece_start<G>(0, lane), first);
    load_cached_16b(row_base + piece_start<G>(1, lane), second);
  }
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    words[k] = first[k];
    words[4 + k] = second[k];
  }
}

// The 4 cos and 4 sin values of rope pairs [first_pair, first_pair + 4) of one table row.
// first_pair is a multiple of 4 (a rope piece starts 8-aligned past a 16-aligned nope), so the
// loads are 16-byte (f32) or 8-byte (bf16) aligned.
template <typename CosSinT, int RopeDim>
__device__ __forceinline__ void load_cos_sin4(const IndexerQParams& params, long long table_row,
                                              int first_pair, float (&cos_v)[4],
                                              float (&sin_v)[4]) {
  const long long row = table_row * params.cos_sin_row_stride;
  if constexpr (IsSame<CosSinT, float>::value) {
    const float* table = static_cast<const float*>(params.cos_sin_cache) + row;
    u32 c[4], s[4];
    load_readonly_16b(table + first_pair, c);
    load_readonly_16b(table + RopeDim / 2 + first_pair, s);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      cos_v[k] = __uint_as_float(c[k]);
      sin_v[k] = __uint_as_float(s[k]);
    }
  } else {
    const unsigned short* table = static_cast<const unsigned short*>(params.cos_sin_cache) + row;
    u32 c[2], s[2];
    load_readonly_8b(table + first_pair, c);
    load_readonly_8b(table + RopeDim / 2 + first_pair, s);
    unpack_bf16x2(c, cos_v);
    unpack_bf16x2(s, sin_v);
  }
}

// load_rotated_tile for RowLayout::split_halves. Both pieces' cos/sin loads are issued before
// any rotation.
template <class G>
__device__ __forceinline__ void load_rotated_split_tile(const IndexerQParams& params,
                                                        const Placement& at,
                                                        u32 (&words)[G::kCoarsen][8]) {
#pragma unroll
  for (int c = 0; c < G::kCoarsen; ++c) {
    load_q_pieces<G>(params.q, at.first_row + c, at.lane, at.active, words[c]);
  }
  if constexpr (G::kRopeDim > 0) {
    const int start0 = piece_start<G>(0, at.lane);
    const int start1 = piece_start<G>(1, at.lane);
    if (at.active && start1 >= G::kNopeDim) {
      // Piece 0 sits in the first half, which holds rope dims only when nope < D/2.
      const bool rotate0 = G::kNopeDim < G::kHeadDim / 2 && start0 >= G::kNopeDim;
      const long long position = at.position;
      float cos_v[2][4], sin_v[2][4];
      load_cos_sin4<typename G::CosSin, G::kRopeDim>(params, position, (start1 - G::kNopeDim) / 2,
                                                     cos_v[1], sin_v[1]);
      if (rotate0) {
        load_cos_sin4<typename G::CosSin, G::kRopeDim>(params, position, (start0 - G::kNopeDim) / 2,
                                                       cos_v[0], sin_v[0]);
      }
#pragma unroll
      for (int c = 0; c < G::kCoarsen; ++c) {
        if (rotate0) rotate_pairs<0, 4>(words[c], cos_v[0], sin_v[0]);
        rotate_pairs<4, 4>(words[c], cos_v[1], sin_v[1]);
      }
    }
  }
}

// --- Either layout -----------------------------------------------------------------------------

// Whether this lane rotates rope dims (and so needs its token's position).
template <class G>
__device__ __forceinline__ bool rotates(const Placement& at) {
  if constexpr (G::kRopeDim == 0) {
    return false;
  } else if constexpr (G::kLayout == RowLayout::contiguous) {
    return at.active && at.lane >= G::kNopeDim / kIndexerQElementsPerThread;
  } else {
    return at.active && piece_start<G>(1, at.lane) >= G::kNopeDim;
  }
}

// The prologue a kernel runs before its grid-dependency wait: the token's position, the head of
// the positions -> cos/sin chain, so that with PDL its latency overlaps the kernel before. Q and
// the weights (what that kernel may be writing) are read only after the wait.
template <class G>
__device__ __forceinline__ void load_position(const IndexerQParams& params, Placement& at) {
  if (rotates<G>(at)) at.position = params.positions[at.token];
}

// Loads the thread's 16 elements of every head of its tile and rotates the rope dims. All Q
// loads are issued before the cos/sin dependency chain (positions -> table) is waited on.
template <class G>
__device__ __forceinline__ void load_rotated_tile(const IndexerQParams& params, const Placement& at,
                                                  u32 (&words)[G::kCoarsen][8]) {
  if constexpr (G::kLayout == RowLayout::contiguous) {
    load_rotated_contiguous_tile<G>(params, at, words);
  } else {
    load_rotated_split_tile<G>(params, at, words);
  }
}

}  // namespace zj::dsv4::indexer_q_detail
