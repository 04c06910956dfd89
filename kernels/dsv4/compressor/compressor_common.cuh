// Device pieces shared by the five DSv4 compressor kernels (c4_store*.cu, c128_*.cu): explicit
// global loads and stores, warp reductions, the RMSNorm weight loads, and the fp8_ds_mla /
// full-row quantization steps. Every rounding step is pinned (explicit _rn intrinsics or PTX),
// so the CPU references in kernels/dsv4/compressor/reference.cpp can mirror them.
#pragma once

#include "dsv4/compressor/compressor_params.h"
#include "zerojit/device/async_copy.cuh"
#include "zerojit/device/grid_dependency.cuh"
#include "zerojit/device/numerics.cuh"

namespace zj::dsv4::compressor {

inline constexpr float kLog2e = 1.4426950408889634f;
inline constexpr unsigned kFullMask = 0xFFFFFFFFu;

struct Float4 {
  float x, y, z, w;
};
struct U32x4 {
  u32 x, y, z, w;
};

// --- Global memory -----------------------------------------------------------------------------

// The state rows are read exactly once per launch: keep them out of L1 and ask L2 for the
// whole 256-byte sector group, since each half-warp / quarter-CTA streams a contiguous 256 B+.
// A coherent load, not .nc: the kernel before writes the rows, and ptxas may move a
// non-coherent load above the grid-dependency wait (zerojit/device/grid_dependency.cuh).
__device__ __forceinline__ Float4 load_streaming_float4(const float* address) {
  Float4 v;
  asm volatile("ld.global.L1::no_allocate.L2::256B.v4.f32 {%0, %1, %2, %3}, [%4];"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "l"(address));
  return v;
}

// Constants (the norm weights): the read-only path.
__device__ __forceinline__ U32x4 load_u32x4(const void* address) {
  U32x4 v;
  asm volatile("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(address));
  return v;
}

__device__ __forceinline__ void load_u32x2(const void* address, u32& lo, u32& hi) {
  asm volatile("ld.global.nc.v2.u32 {%0, %1}, [%2];" : "=r"(lo), "=r"(hi) : "l"(address));
}

__device__ __forceinline__ void store_u32x4(unsigned char* address, u32 a, u32 b, u32 c, u32 d) {
  asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(address), "r"(a), "r"(b), "r"(c),
               "r"(d)
               : "memory");
}

__device__ __forceinline__ void store_u32x2(unsigned char* address, u32 a, u32 b) {
  asm volatile("st.global.v2.u32 [%0], {%1, %2};" ::"l"(address), "r"(a), "r"(b) : "memory");
}

__device__ __forceinline__ void store_u32(unsigned char* address, u32 v) {
  asm volatile("st.global.u32 [%0], %1;" ::"l"(address), "r"(v) : "memory");
}

__device__ __forceinline__ void store_u8(unsigned char* address, u32 v) {
  asm volatile("st.global.u8 [%0], %1;" ::"l"(address), "r"(v) : "memory");
}

// Shared-memory vectors for the C4 pooling's exchange (16-byte aligned addresses).
__device__ __forceinline__ void store_shared_float4(float* address, float a, float b, float c,
                                                    float d) {
  asm volatile("st.shared.v4.f32 [%0], {%1, %2, %3, %4};" ::"r"(shared_address(address)), "f"(a),
               "f"(b), "f"(c), "f"(d)
               : "memory");
}

__device__ __forceinline__ void load_shared_float8(const float* address, float (&out)[8]) {
  const u32 base = shared_address(address);
  asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];"
               : "=f"(out[0]), "=f"(out[1]), "=f"(out[2]), "=f"(out[3])
               : "r"(base)
               : "memory");
  asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];"
               : "=f"(out[4]), "=f"(out[5]), "=f"(out[6]), "=f"(out[7])
               : "r"(base + 16)
               : "memory");
}

// --- RMSNorm weights ---------------------------------------------------------------------------

// Weights [first, first + 8) as floats (first is a multiple of 8, so the loads are 16 B).
template <typename NormWeightT>
__device__ __forceinline__ void load_norm_weights8(const void* weights, int first, float (&out)[8]);

template <>
__device__ __forceinline__ void load_norm_weights8<float>(const void* weights, int first,
                                                          float (&out)[8]) {
  const float* base = static_cast<const float*>(weights) + first;
  const U32x4 lo = load_u32x4(base);
  const U32x4 hi = load_u32x4(base + 4);
  out[0] = __uint_as_float(lo.x);
  out[1] = __uint_as_float(lo.y);
  out[2] = __uint_as_float(lo.z);
  out[3] = __uint_as_float(lo.w);
  out[4] = __uint_as_float(hi.x);
  out[5] = __uint_as_float(hi.y);
  out[6] = __uint_as_float(hi.z);
  out[7] = __uint_as_float(hi.w);
}

template <>
__device__ __forceinline__ void load_norm_weights8<bf16_t>(const void* weights, int first,
                                                           float (&out)[8]) {
  const U32x4 packed = load_u32x4(static_cast<const bf16_t*>(weights) + first);
  unpack_bf16x2({packed.x, packed.y, packed.z, packed.w}, out);
}

// --- Reductions --------------------------------------------------------------------------------

// Butterfly sum over the whole warp. Every lane ends with the same bits: each step adds the
// same two operands (a + b == b + a in IEEE arithmetic).
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(kFullMask, v, offset);
  return v;
}

// Butterfly max over aligned groups of `Width` lanes (a power of two <= 32).
template <int Width>
__device__ __forceinline__ float group_max(float v) {
#pragma unroll
  for (int offset = Width / 2; offset > 0; offset >>= 1) {
    v = fmaxf(v, __shfl_xor_sync(kFullMask, v, offset));
  }
  return v;
}

// --- Quantization ------------------------------------------------------------------------------

// UE8M0 exponent of a 64-element fp8_ds_mla block from its BF16-exact amax:
// ceil_pow2(max(1e-4, amax / 448)) with the spec's IEEE division, computed without dividing.
// For a bf16 amax (8 significant bits), RN(amax / 448) is a power of two only when the exact
// quotient is one, so ceil_pow2 of the rounded quotient is ceil_pow2 of the exact one. The
// product amax * f32(1/448) is within 2^-23 of the quotient while a bf16 amax just above
// 448 * 2^m is 2^-8 above it, and at amax = 448 * 2^m the product rounds to 2^m exactly
// (f32(1/448) exceeds 1/448 by 0.375 ulp): its ceil_pow2 is the same. The floor is the ceil of
// 1e-4, 2^-13 (E = 114); infinity and NaN give what the division gives (255 and 114).
// tests/dsv4/compressor/test_ds_mla_scale.cpp checks every bf16 value against the division.
__device__ __forceinline__ u32 ds_mla_scale_exponent(float amax) {
  constexpr u32 kFloor = 114u;
  const u32 exponent = ue8m0_ceil_pow2_bits(amax * (1.0f / kCompressorFp8Max));
  return exponent > kFloor ? exponent : kFloor;
}

// clamp(v, -448, 448) then e4m3 RNE-saturate, two at a time (`lo` in the low byte). The clamp
// only matters for NaN (fmaxf drops it: NaN -> -448), which the reference mirrors. Its upper
// half is the saturation the conversion does anyway (satfinite: anything above 448, +inf
// included, gives 448), so one fmaxf per value gives the clamped result.
__device__ __forceinline__ float clamp_fp8(float v) { return fmaxf(v, -kCompressorFp8Max); }

__device__ __forceinline__ u32 quantize_e4m3x2(float lo, float hi, float multiplier) {
  return pack_e4m3x2_rn_sat(clamp_fp8(__fmul_rn(lo, multiplier)),
                            clamp_fp8(__fmul_rn(hi, multiplier)));
}

// --- fp8_ds_mla addressing ---------------------------------------------------------------------

struct DsMlaRow {
  unsigned char* data;    // 576 bytes: 448 e4m3 codes, then 64 bf16
  unsigned char* scales;  // 8 bytes: 7 UE8M0 exponents, then the zero pad byte
};

__device__ __forceinline__ DsMlaRow ds_mla_row(unsigned char* k_cache, long long kv_slot,
                                               long long block_size, long long page_stride_bytes) {
  const long long page = kv_slot / block_size;
  const long long row = kv_slot - page * block_size;
  unsigned char* page_base = k_cache + page * page_stride_bytes;
  DsMlaRow result;
  result.data = page_base + row * kDsMlaTokenStrideBytes;
  result.scales = page_base + block_size * kDsMlaTokenStrideBytes + row * kDsMlaScaleBytes;
  return result;
}

__device__ __forceinline__ unsigned char* full_row(unsigned char* k_cache, long long kv_slot,
                                                   long long block_size,
                                                   long long page_stride_bytes,
                                                   long long row_stride_bytes) {
  const long long page = kv_slot / block_size;
  const long long row = kv_slot - page * block_size;
  return k_cache + page * page_stride_bytes + row * row_stride_bytes;
}

// --- Token chunks -------------------------------------------------------------------------------

// What a CTA needs of an active token (fields a kernel does not use are left unset).
struct ActiveToken {
  long long token;
  long long position;
  long long kv_slot;
  int request;
};

// The tokens of this CTA's chunk: chunk c of `chunks` holds [c K, min(c K + K, num_tokens))
// with K = ceil(num_tokens / chunks), so every grid covers every token exactly once.
struct TokenRange {
  long long begin;
  long long end;
};

__device__ __forceinline__ TokenRange chunk_tokens(long long num_tokens, long long chunk,
                                                   long long chunks) {
  TokenRange range;
  if (chunks <= 0) {  // C128 compress launched with fewer CTAs than column tiles
    range.begin = range.end = 0;
    return range;
  }
  const long long per_chunk = (num_tokens + chunks - 1) / chunks;
  range.begin = chunk * per_chunk;
  range.end = range.begin + per_chunk < num_tokens ? range.begin + per_chunk : num_tokens;
  return range;
}

inline constexpr int kTokensPerRound = 32;  // examined at once, one per lane of warp 0

// Lane i of warp 0 examines token first + i (if < end) with `examine(token, record)`, which
// returns whether it is active; the active ones are compacted into `list` (shared memory,
// kTokensPerRound entries) in token order. Returns their count, uniform over the CTA. Called
// by all threads; it starts with a barrier so that the previous round's readers of `list` (and
// of any other shared memory the caller reuses per token) are done.
template <typename Examine>
__device__ __forceinline__ int collect_active_tokens(long long first, long long end,
                                                     Examine examine, ActiveToken* list) {
  __shared__ int active_count;
  __syncthreads();
  if (threadIdx.x < 32) {
    const int lane = threadIdx.x;
    const long long token = first + lane;
    ActiveToken record;
    const bool active = token < end && examine(token, record);
    const unsigned mask = __ballot_sync(kFullMask, active);
    if (active) list[__popc(mask & ((1u << lane) - 1u))] = record;
    if (lane == 0) active_count = __popc(mask);
  }
  __syncthreads();
  return active_count;
}

// The same with every thread of the CTA examining one token: `Threads` (= blockDim.x, a multiple
// of 32) tokens a round, one metadata latency for all of them, for chunks longer than one warp's
// round. `list` holds `Threads` entries.
template <int Threads, typename Examine>
__device__ __forceinline__ int collect_active_tokens_cta(long long first, long long end,
                                                         Examine examine, ActiveToken* list) {
  static_assert(Threads % 32 == 0, "whole warps only");
  constexpr int kWarps = Threads / 32;
  __shared__ int warp_counts[kWarps];
  __syncthreads();
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int warp = static_cast<int>(threadIdx.x) >> 5;
  const long long token = first + threadIdx.x;
  ActiveToken record;
  const bool active = token < end && examine(token, record);
  const unsigned mask = __ballot_sync(kFullMask, active);
  if (lane == 0) warp_counts[warp] = __popc(mask);
  __syncthreads();
  int before = 0;
  int total = 0;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) {
    const int count = warp_counts[w];
    before += w < warp ? count : 0;
    total += count;
  }
  if (active) list[before + __popc(mask & ((1u << lane) - 1u))] = record;
  __syncthreads();
  return total;
}

// --- C4 pooling (shared by c4_store.cu and c4_store_full.cu) ---------------------------------

// Spec 3's active condition plus the guards of compressor_params.h. The lengths are checked
// before anything is read, and the four per-token reads are issued together (one latency).
template <typename Params>
__device__ __forceinline__ bool c4_examine_token(const Params& params, long long token,
                                                 ActiveToken& out) {
  if (token >= params.num_tokens || token >= params.num_token_to_req ||
      token >= params.num_positions || token >= params.num_kv_slots) {
    return false;
  }
  if (params.state_block_size <= 0 || params.kv_cache_block_size <= 0) return false;
  const long long slot = params.slot_mapping[token];
  const long long position = params.positions[token];
  const long long kv_slot = params.kv_slot_mapping[token];
  const int request = params.token_to_req[token];
  if (slot < 0 || position < 0 || ((position + 1) % kC4Ratio) != 0 || kv_slot < 0) return false;
  if (request < 0 || request >= params.block_table_rows) return false;
  // The rows p-7..p use block-table columns up to p / Bs.
  if (position / params.state_block_size >= params.block_table_width) return false;
  out.token = token;
  out.position = position;
  out.kv_slot = kv_slot;
  out.request = request;
  return true;
}

// Pools the 8 overlapping rows for this thread's 8 elements [elem_base, elem_base + 8), then
// RMS-normalizes them: y = (x * rrms) * rms_norm_weight. Called by all 64 threads of an active CTA.
//
// The pooling runs on another split of the 512 columns than the one the thread owns: thread t
// pools columns [4 t, 4 t + 4) and [256 + 4 t, 256 + 4 t + 4), so that each of its state
// loads reads, across a warp, one contiguous 512-byte run, every 32-byte sector whole. (8
// contiguous floats a thread, loaded as two float4 16 bytes apart, leave every sector half
// used by each load, and L2 then served 33 % more read sectors than DRAM: measured on H200 at
// 16384 tokens, 45.9 µs, 42.9 with L1 catching the other half, 42.4 with this split.) The
// pooled values then go through shared memory to their owners, so that the sum of squares, the
// quant groups and the stores keep the owner split (and the reference's order, bit for bit).
//
// Two-pass softmax per column over the (register-resident) rows: max first, then
// S = sum exp2((sc - m) * log2e) and P = sum kv * exp2(...). It is the spec's online recurrence
// re-associated (same ex2.approx, IEEE division P / S), with half the exp2 count and no serial
// rescale chain; the two differ only by rounding (~1e-7 relative), as spec 3 notes for Triton.
// A skipped row (pos < 0) enters with score -inf and kv 0: ex2.approx(-inf) = +0, so it adds
// exactly nothing.
// Calling it again for the next token needs no extra barrier: every read of row_offset, pooled
// and warp_partial precedes a barrier that every thread must pass before either is rewritten.
// Programmatic dependent launch: the block-table lookups (step metadata) come before
// `dependency`'s wait, the state rows (the kernel before writes them) after it.
template <typename NormWeightT, typename Params>
__device__ __forceinline__ void c4_pool_and_norm(const Params& params, const ActiveToken& token,
                                                 int elem_base, GridDependency& dependency,
                                                 float (&y)[8]) {
  constexpr int kHalf = kCompressorHeadSize / 2;  // the second pooled run of a thread
  __shared__ long long row_offset[kC4PooledRows];
  __shared__ __align__(16) float pooled[kCompressorHeadSize];
  __shared__ float warp_partial[kC4StoreThreads / 32];
  const int tid = threadIdx.x;
  const long long start = token.position - (kC4PooledRows - 1);
  if (tid < kC4PooledRows) {
    const long long pos = start + tid;
    long long offset = -1;
    if (pos >= 0) {
      const long long column = pos / params.state_block_size;
      const long long row_in_block = pos - column * params.state_block_size;
      int block = params.block_table[token.request * params.block_table_stride + column];
      block = block < 0 ? 0 : block;  // spec 0.5: block-table entries are clamped >= 0
      // Rows 0..3 pool columns [0, 512) of the kv half, rows 4..7 columns [512, 1024).
      offset = block * params.state_block_stride + row_in_block * params.state_row_stride +
               (tid / 4) * kCompressorHeadSize;
    }
    row_offset[tid] = offset;
  }
  __syncthreads();
  dependency.wait();

  const int pool_base = tid * 4;
  float kv[kC4PooledRows][8];
  float score[kC4PooledRows][8];
#pragma unroll
  for (int r = 0; r < kC4PooledRows; ++r) {
    const long long offset = row_offset[r];
    if (offset >= 0) {
      const float* row = params.state_cache + offset + pool_base;
      const Float4 kv0 = load_streaming_float4(row);
      const Float4 kv1 = load_streaming_float4(row + kHalf);
      const Float4 sc0 = load_streaming_float4(row + kC4StateWidth);
      const Float4 sc1 = load_streaming_float4(row + kC4StateWidth + kHalf);
      kv[r][0] = kv0.x, kv[r][1] = kv0.y, kv[r][2] = kv0.z, kv[r][3] = kv0.w;
      kv[r][4] = kv1.x, kv[r][5] = kv1.y, kv[r][6] = kv1.z, kv[r][7] = kv1.w;
      score[r][0] = sc0.x, score[r][1] = sc0.y, score[r][2] = sc0.z, score[r][3] = sc0.w;
      score[r][4] = sc1.x, score[r][5] = sc1.y, score[r][6] = sc1.z, score[r][7] = sc1.w;
    } else {
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        kv[r][e] = 0.0f;
        score[r][e] = -__int_as_float(0x7F800000);
      }
    }
  }

  float x[8];
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    float m = score[0][e];
#pragma unroll
    for (int r = 1; r < kC4PooledRows; ++r) m = fmaxf(m, score[r][e]);
    float s = 0.0f;
    float p = 0.0f;
#pragma unroll
    for (int r = 0; r < kC4PooledRows; ++r) {
      const float w = exp2_approx(__fmul_rn(__fsub_rn(score[r][e], m), kLog2e));
      s = __fadd_rn(s, w);
      p = __fmaf_rn(kv[r][e], w, p);
    }
    x[e] = __fdiv_rn(p, s);
  }
  store_shared_float4(pooled + pool_base, x[0], x[1], x[2], x[3]);
  store_shared_float4(pooled + kHalf + pool_base, x[4], x[5], x[6], x[7]);
  __syncthreads();
  load_shared_float8(pooled + elem_base, x);

  float sum_squares = 0.0f;
#pragma unroll
  for (int e = 0; e < 8; ++e) sum_squares = __fmaf_rn(x[e], x[e], sum_squares);

  // Loaded only now (L1-resident after the first token) so that the weights do not hold
  // registers while the state loads are in flight; the reduction below hides the latency.
  float weight[8];
  load_norm_weights8<NormWeightT>(params.rms_norm_weight, elem_base, weight);
  sum_squares = warp_sum(sum_squares);
  if ((tid & 31) == 0) warp_partial[tid >> 5] = sum_squares;
  __syncthreads();
  const float total = __fadd_rn(warp_partial[0], warp_partial[1]);
  const float rrms =
      rsqrt_approx(__fadd_rn(__fmul_rn(total, 1.0f / kCompressorHeadSize), params.eps));
#pragma unroll
  for (int e = 0; e < 8; ++e) y[e] = __fmul_rn(__fmul_rn(x[e], rrms), weight[e]);
}

// --- C128 stores: one compressed row per warp (shared by c128_store*.cu) -------------------

template <typename Params>
__device__ __forceinline__ bool c128_store_examine_token(const Params& params, long long token,
                                                         ActiveToken& out) {
  if (token >= params.num_tokens || token >= params.num_positions || token >= params.num_kv_slots) {
    return false;
  }
  const long long slot = params.slot_mapping[token];
  const long long position = params.positions[token];
  const long long kv_slot = params.kv_slot_mapping[token];
  if (slot < 0 || position < 0 || ((position + 1) % kC128Ratio) != 0 || kv_slot < 0) return false;
  out.token = token;
  out.position = position;
  out.kv_slot = kv_slot;
  out.request = 0;
  return true;
}

// One compressed row per warp. Lane l owns four chunks of 4 dims, chunk q being dims
// [128 q + 4 l, +4): every load, and every store, of a warp then covers one contiguous stretch
// (512 bytes of the f32 row; 128 or 256 bytes of the output). Chunk q of lanes 0..15 lies in
// quant block 2q, of lanes 16..31 in block 2q + 1; chunk 3 of lanes 16..31 is the RoPE tail
// (dims 448..511, pairs 2 (l - 16) and 2 (l - 16) + 1).
inline constexpr int kC128Chunks = 4;
inline constexpr int kC128ChunkDims = 4;
inline constexpr int kC128ChunkStride = 32 * kC128ChunkDims;  // 128 dims between a lane's chunks
inline constexpr int kC128TailChunk = kCompressorNopeDim / kC128ChunkStride;  // 3
inline constexpr int kC128FirstTailLane = 16;
inline constexpr int kC128LanesPerQuantBlock = kCompressorQuantBlock / kC128ChunkDims;  // 16
// Rows a warp streams through shared memory at once: while it normalizes, rotates and stores
// one active row, the copies of the next kC128Stages - 1 are in flight. 8 warps x 3 stages x
// 2 KiB = 48 KiB a CTA, the static shared-memory limit.
inline constexpr int kC128Stages = 3;
inline constexpr int kC128StoreWarps = kC128StoreThreads / 32;
inline constexpr int kC128StageBytes = kCompressorHeadSize * 4;  // one f32 row

struct C128Lane {
  float v[kC128Chunks][kC128ChunkDims];
};

// First dim of chunk q of a lane.
__device__ __forceinline__ int c128_chunk_dim(int lane, int q) {
  return q * kC128ChunkStride + lane * kC128ChunkDims;
}

__device__ __forceinline__ bool c128_is_tail(int lane, int q) {
  return q == kC128TailChunk && lane >= kC128FirstTailLane;
}

// Starts copying the lane's chunks of compressed_kv row `token` (read once per launch: L2
// only) into the stage at `lane_stage` (the lane's own 16 bytes of chunk 0 of that stage).
__device__ __forceinline__ void copy_c128_lane_async(const float* compressed_kv, long long token,
                                                     int lane, u32 lane_stage) {
  const float* row = compressed_kv + token * kCompressorHeadSize;
#pragma unroll
  for (int q = 0; q < kC128Chunks; ++q) {
    copy_async_16b_stream(lane_stage + q * kC128ChunkStride * 4, row + c128_chunk_dim(lane, q));
  }
}

// Reads back what copy_c128_lane_async copied for this lane (after the wait for its group).
__device__ __forceinline__ void read_c128_lane(u32 lane_stage, C128Lane& x) {
#pragma unroll
  for (int q = 0; q < kC128Chunks; ++q) {
    u32 words[4];
    load_shared_16b(lane_stage + q * kC128ChunkStride * 4, words);
#pragma unroll
    for (int e = 0; e < kC128ChunkDims; ++e) x.v[q][e] = __uint_as_float(words[e]);
  }
}

// A lane's 16 RMSNorm weights, dims c128_chunk_dim(lane, q) + e, as loaded: bf16 pairs stay
// packed (8 registers) until used. Loaded for every row, at the top of its iteration, so that
// the L1 latency overlaps the wait for the row's copy; holding them across rows would cost
// their registers for the whole loop.
template <typename NormWeightT>
struct C128LaneWeights;

template <>
struct C128LaneWeights<float> {
  float w[kC128Chunks][kC128ChunkDims];
  __device__ __forceinline__ void load(const void* weights, int lane) {
#pragma unroll
    for (int q = 0; q < kC128Chunks; ++q) {
      const U32x4 v = load_u32x4(static_cast<const float*>(weights) + c128_chunk_dim(lane, q));
      w[q][0] = __uint_as_float(v.x), w[q][1] = __uint_as_float(v.y);
      w[q][2] = __uint_as_float(v.z), w[q][3] = __uint_as_float(v.w);
    }
  }
  __device__ __forceinline__ float at(int q, int e) const { return w[q][e]; }
};

template <>
struct C128LaneWeights<bf16_t> {
  u32 pairs[kC128Chunks][kC128ChunkDims / 2];
  __device__ __forceinline__ void load(const void* weights, int lane) {
#pragma unroll
    for (int q = 0; q < kC128Chunks; ++q) {
      load_u32x2(static_cast<const bf16_t*>(weights) + c128_chunk_dim(lane, q), pairs[q][0],
                 pairs[q][1]);
    }
  }
  __device__ __forceinline__ float at(int q, int e) const {
    return e % 2 == 0 ? bf16x2_low(pairs[q][e / 2]) : bf16x2_high(pairs[q][e / 2]);
  }
};

// y = (x * rrms) * weight with rrms = rsqrt(mean(x^2) + eps); the sum of squares is the lane's
// 16 in order, then a warp butterfly (identical bits in every lane).
template <typename NormWeightT>
__device__ __forceinline__ void c128_rms_norm(C128Lane& x, const C128LaneWeights<NormWeightT>& w,
                                              float eps) {
  float sum_squares = 0.0f;
#pragma unroll
  for (int q = 0; q < kC128Chunks; ++q) {
#pragma unroll
    for (int e = 0; e < kC128ChunkDims; ++e)
      sum_squares = __fmaf_rn(x.v[q][e], x.v[q][e], sum_squares);
  }
  sum_squares = warp_sum(sum_squares);
  const float rrms =
      rsqrt_approx(__fadd_rn(__fmul_rn(sum_squares, 1.0f / kCompressorHeadSize), eps));
#pragma unroll
  for (int q = 0; q < kC128Chunks; ++q) {
#pragma unroll
    for (int e = 0; e < kC128ChunkDims; ++e) {
      x.v[q][e] = __fmul_rn(__fmul_rn(x.v[q][e], rrms), w.at(q, e));
    }
  }
}

// A tail lane's cos and sin values for its 2 pairs (loaded early, like the weights).
struct C128TailRope {
  float cos_v[kC128ChunkDims / 2];
  float sin_v[kC128ChunkDims / 2];
};

__device__ __forceinline__ C128TailRope load_c128_tail_rope(const float* cos_sin_row, int lane) {
  const int first_pair = (lane - kC128FirstTailLane) * (kC128ChunkDims / 2);
  C128TailRope rope;
#pragma unroll
  for (int k = 0; k < kC128ChunkDims / 2; ++k) {
    rope.cos_v[k] = cos_sin_row[first_pair + k];
    rope.sin_v[k] = cos_sin_row[kCompressorRopeDim / 2 + first_pair + k];
  }
  return rope;
}

// GPT-J RoPE of a tail lane's 2 pairs (its chunk 3) with the row at cpos.
__device__ __forceinline__ void c128_rotate_tail(C128Lane& y, const C128TailRope& rope) {
#pragma unroll
  for (int k = 0; k < kC128ChunkDims / 2; ++k) {
    float* pair = &y.v[kC128TailChunk][2 * k];
    const RotatedPair r = rope_rotate(pair[0], pair[1], rope.cos_v[k], rope.sin_v[k]);
    pair[0] = r.even;
    pair[1] = r.odd;
  }
}

// The cos/sin row of a boundary token: cpos = p - 127 (= (p / 128) * 128).
template <typename Params>
__device__ __forceinline__ const float* c128_cos_sin_row(const Params& params, long long position) {
  return params.cos_sin_cache + (position - (kC128Ratio - 1)) * params.cos_sin_stride;
}

// Starts fetching a tail lane's cos and sin values into L1 while the row loads are in flight, so
// that the rotation after the norm does not wait a second memory latency. No registers held.
__device__ __forceinline__ void prefetch_c128_cos_sin(const float* cos_sin_row, int lane) {
  const float* cos_v = cos_sin_row + (lane - kC128FirstTailLane) * (kC128ChunkDims / 2);
  asm volatile("prefetch.global.L1 [%0];" ::"l"(cos_v));
  asm volatile("prefetch.global.L1 [%0];" ::"l"(cos_v + kCompressorRopeDim / 2));
}

// The position and kv slot of lane `source`'s ActiveToken (warp-uniform source): what the
// rotation and the store need once the row's copy has started (token is left -1).
__device__ __forceinline__ ActiveToken shuffle_active_token(const ActiveToken& record, int source) {
  ActiveToken t;
  t.token = -1;
  t.position = __shfl_sync(kFullMask, record.position, source);
  t.kv_slot = __shfl_sync(kFullMask, record.kv_slot, source);
  t.request = 0;
  return t;
}

// The driver of both C128 stores. Every warp of the grid owns a contiguous range of tokens
// (chunk_tokens over gridDim.x * warps chunks, so any positive grid covers every token once);
// it examines them 32 at a time, one per lane (one coalesced read of their metadata), and
// streams the active ones through its kC128Stages shared-memory stages: active row i sits in
// stage i % kC128Stages, and its copy starts while row i - kC128Stages + 1 is being processed
// (RMSNorm, tail rotation, then `store(token, y)` with y the lane's 4 chunks). Each lane reads
// back only the bytes it copied itself, so no barrier is needed: warps never wait for each
// other, a sparse batch costs one metadata latency per warp and a dense one keeps two rows of
// every warp in flight while it computes. The block is kC128StoreThreads threads (the plan's
// geometry; __launch_bounds__ refuses more), which sizes the staging and the token chunks.
// Programmatic dependent launch: a warp examines its first 32 tokens (step metadata) before
// `dependency`'s wait and copies compressed_kv rows (C128 compress, the kernel before, writes
// them) only after it.
template <typename NormWeightT, typename Params, typename Store>
__device__ __forceinline__ void for_each_c128_row(const Params& params, GridDependency& dependency,
                                                  Store store) {
  __shared__ alignas(16) unsigned char staging[kC128StoreWarps][kC128Stages][kC128StageBytes];
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const long long warp_index = static_cast<long long>(blockIdx.x) * kC128StoreWarps + warp;
  const TokenRange range = chunk_tokens(params.num_tokens, warp_index,
                                        static_cast<long long>(gridDim.x) * kC128StoreWarps);
  const u32 lane_staging = shared_address(&staging[warp][0][0]) + lane * kC128ChunkDims * 4;

  // The first round is examined before the wait, the others in the loop: a wait inside the
  // loop body made the 64-token calls ~0.1 us slower without PDL (the loop scheduled worse).
  ActiveToken record = {};
  bool active = range.begin + lane < range.end &&
                c128_store_examine_token(params, range.begin + lane, record);
  dependency.wait();
  for (long long first = range.begin; first < range.end; first += 32) {
    if (first != range.begin) {
      record = {};
      const long long token = first + lane;
      active = token < range.end && c128_store_examine_token(params, token, record);
    }
    unsigned pending = __ballot_sync(kFullMask, active);
    if (pending == 0u) continue;

    // Starts the next active row's copy into `stage` (if any row is left) and always commits
    // one group, so that wait_copies counts rows. Warp-uniform: the shuffles see every lane.
    unsigned to_copy = pending;
    auto copy_next = [&](int stage) {
      if (to_copy != 0u) {
        const int source = __ffs(to_copy) - 1;
        to_copy &= to_copy - 1u;
        const long long row_token = __shfl_sync(kFullMask, record.token, source);
        const long long position = __shfl_sync(kFullMask, record.position, source);
        copy_c128_lane_async(params.compressed_kv, row_token, lane,
                             lane_staging + stage * kC128StageBytes);
        if (lane >= kC128FirstTailLane) {
          prefetch_c128_cos_sin(c128_cos_sin_row(params, position), lane);
        }
      }
      commit_copies();
    };
#pragma unroll
    for (int stage = 0; stage < kC128Stages - 1; ++stage) copy_next(stage);

    int stage = 0;
    while (pending != 0u) {
      const int source = __ffs(pending) - 1;
      pending &= pending - 1u;
      const ActiveToken row = shuffle_active_token(record, source);
      // L1 hits (the weights after the first row, cos/sin after its prefetch) issued before
      // the wait, so that their latency hides behind it.
      C128LaneWeights<NormWeightT> weights;
      weights.load(params.rms_norm_weight, lane);
      C128TailRope rope = {};
      if (lane >= kC128FirstTailLane) {
        rope = load_c128_tail_rope(c128_cos_sin_row(params, row.position), lane);
      }
      wait_copies<kC128Stages - 2>();  // this row's group is done; the later ones may not be
      C128Lane y;
      read_c128_lane(lane_staging + stage * kC128StageBytes, y);
      // The previous row's stage: read in the previous iteration, free again.
      copy_next(stage == 0 ? kC128Stages - 1 : stage - 1);
      c128_rms_norm(y, weights, params.eps);
      if (lane >= kC128FirstTailLane) c128_rotate_tail(y, rope);
      store(row, y);
      stage = stage + 1 == kC128Stages ? 0 : stage + 1;
    }
  }
}

}  // namespace zj::dsv4::compressor
