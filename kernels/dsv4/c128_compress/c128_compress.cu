// C128 (HCA, ratio 128) compress, block8 (spec section 5): softmax-pool the 128 state rows
// p-127..p of each boundary token into compressed_kv[t, 0:HeadSize] (f32).
//
// Template parameters:
//   HeadSize  head size = state width (512 for DSv4; a multiple of 64). A state row is
//             [kv HeadSize | score HeadSize].
//   CtaScan   the key's cta_scan, set for prefill calls (more than kC128CompressDecodeTokens
//             tokens): chunks longer than 32 tokens are scanned by the whole CTA, and the next
//             active token's rows are prefetched into L2 while the current one is pooled.
// Launch: grid = c128_compress_grid(num_tokens, SMs) CTAs, a multiple of HeadSize / 64 (any
//   positive multiple is correct: see "token chunks" in compressor_params.h); CTA b pools column
//   tile b % tiles of the active tokens of chunk b / tiles, in token order. block =
//   kC128CompressThreads (256); dynamic shared memory kC128CompressWideListBytes for CtaScan,
//   else 0 (any value is correct: below that, chunks are scanned 32 tokens at a time); static
//   ~8 KiB.
// Mapping (the spec's 8 warps x 16 rows x 64 columns, with 16-byte loads): warp w pools rows
//   start + 16 w .. +15, i.e. state blocks block_table[req, start / 8 + 2 w + h] for half-warp
//   h = lane / 16; each lane reads 4 consecutive columns (one 16 B kv and one 16 B score load
//   per row, 8 rows), so a half-warp reads 256 contiguous bytes of a row per instruction. Each
//   lane reduces its 8 rows (two-pass: max, then S = sum exp2((sc - m) log2e), P = sum kv * w),
//   the two half-warps and then the 8 warps are merged with the usual max/rescale step, and
//   P / S (IEEE division) is written.
// Writes compressed_kv[t, 64 tile .. 64 tile + 63] for each active token (see
//   C128CompressParams) and nothing else; inactive rows stay unwritten.
// Bytes moved per active token: 512 KiB of state read (128 rows x 2 x 512 floats), 2 KiB written.
#include "dsv4/c128_compress/c128_compress_params.h"
#include "dsv4/compressor/compressor_common.cuh"

#ifndef __CUDACC__
#define __grid_constant__
#endif

namespace zj::dsv4 {

template <int HeadSize, bool CtaScan>
__global__ void __launch_bounds__(kC128CompressThreads)
    c128_compress_kernel(const __grid_constant__ C128CompressParams params) {
  using namespace compressor;
  static_assert(HeadSize % kC128CompressColumns == 0, "HeadSize must be a multiple of 64");
  constexpr int kTiles = HeadSize / kC128CompressColumns;
  constexpr int kRowsPerLane = kC128StateBlockSize;         // one state block per half-warp
  constexpr int kPartialStride = kC128CompressColumns + 8;  // conflict-free merge reads

  const int tile = static_cast<int>(blockIdx.x % kTiles);
  const int tid = threadIdx.x;
  const int warp = tid >> 5;
  const int lane = tid & 31;
  const int half = lane >> 4;
  const int column = tile * kC128CompressColumns + 4 * (lane & 15);
  const int out_column = tid >> 2;  // merge step: 4 threads per output column
  const int part = tid & 3;
  // Programmatic dependent launch: token metadata before the wait, block-table entries and the
  // state rows after it; a CTA with no active token waits on its way out.
  GridDependency dependency;
  __shared__ float partial_m[kRowsPerLane][kPartialStride];
  __shared__ float partial_s[kRowsPerLane][kPartialStride];
  __shared__ float partial_p[kRowsPerLane][kPartialStride];

  const auto examine = [&](long long token, ActiveToken& record) {
    if (token >= params.num_token_to_req || token >= params.num_positions ||
        params.state_block_size != kC128StateBlockSize) {
      return false;
    }
    const long long slot = params.slot_mapping[token];
    const long long position = params.positions[token];
    const int request = params.token_to_req[token];
    if (slot < 0 || position < 0 || ((position + 1) % kC128Ratio) != 0) return false;
    if (request < 0 || request >= params.block_table_rows) return false;
    // Rows p-127..p use block-table columns (p-127)/8 .. p/8.
    if (position / kC128StateBlockSize >= params.block_table_width) return false;
    record.token = token;
    record.position = position;
    record.request = request;
    return true;
  };
  // This thread's state block of a token: rows p-127+16w+8h .. +7 (one block per half-warp).
  const auto block_of = [&](const ActiveToken& token) {
    const long long first_block_column = (token.position - (kC128Ratio - 1)) / kC128StateBlockSize;
    const int block = params.block_table[token.request * params.block_table_stride +
                                         first_block_column + 2 * warp + half];
    return block < 0 ? 0 : block;  // spec 0.5: clamped >= 0
  };

  // Only 1 token in 128 is active, so in a prefill (CtaScan) a chunk longer than one warp's round
  // is scanned by the whole CTA, kC128CompressThreads tokens at a time (one metadata latency for
  // all of them), into the list the launch passes as dynamic shared memory. Decode launches
  // (CtaScan false) keep warp 0's 32-token rounds and none of the prefill code: measured on the
  // H200, one kernel holding both paths made a 64-token call 0.3 us slower (4.4 -> 4.8 us),
  // whether the two loops shared their body or were written out apart.
  static_assert(sizeof(ActiveToken) * kC128CompressThreads == kC128CompressWideListBytes,
                "the wide list's size is part of the launch contract");
  extern __shared__ ActiveToken wide_list[];
  __shared__ ActiveToken narrow_list[kTokensPerRound];
  const TokenRange range = chunk_tokens(params.num_tokens, blockIdx.x / kTiles, gridDim.x / kTiles);

  const bool wide_rounds = CtaScan && range.end - range.begin > kTokensPerRound &&
                           dynamic_shared_bytes() >= kC128CompressWideListBytes;
  ActiveToken* const active_tokens = wide_rounds ? wide_list : narrow_list;
  const int round_tokens = wide_rounds ? kC128CompressThreads : kTokensPerRound;
  for (long long first = range.begin; first < range.end; first += round_tokens) {
    const int active_count = wide_rounds
                                 ? collect_active_tokens_cta<kC128CompressThreads>(
                                       first, range.end, examine, active_tokens)
                                 : collect_active_tokens(first, range.end, examine, active_tokens);

    // Waited for once, before the pooling loop rather than inside it: a wait in the loop body
    // made the 64-token decode call 0.7 us slower (4.4 -> 5.1 us on the H200), the loop no
    // longer scheduled as before.
    if (active_count > 0) dependency.wait();
    for (int index = 0; index < active_count; ++index) {
      const ActiveToken token = active_tokens[index];
      const float* rows = params.state_cache + block_of(token) * params.state_block_stride + column;
      if (CtaScan && index + 1 < active_count) {
        // The next token's 64 KiB tile streams into L2 while this one is pooled: lane l of each
        // half-warp prefetches row l % 8 of its block, the kv half (l < 8) or the score half.
        const int lane16 = lane & 15;
        const float* next_rows = params.state_cache +
                                 block_of(active_tokens[index + 1]) * params.state_block_stride +
                                 tile * kC128CompressColumns;
        prefetch_l2(next_rows + (lane16 % kRowsPerLane) * params.state_row_stride +
                        (lane16 / kRowsPerLane) * HeadSize,
                    kC128CompressColumns * sizeof(float));
      }

      float kv[kRowsPerLane][4];
      float score[kRowsPerLane][4];
#pragma unroll
      for (int i = 0; i < kRowsPerLane; ++i) {
        const Float4 k = load_streaming_float4(rows + i * params.state_row_stride);
        const Float4 s = load_streaming_float4(rows + i * params.state_row_stride + HeadSize);
        kv[i][0] = k.x, kv[i][1] = k.y, kv[i][2] = k.z, kv[i][3] = k.w;
        score[i][0] = s.x, score[i][1] = s.y, score[i][2] = s.z, score[i][3] = s.w;
      }

      float m[4], s[4], p[4];
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        float mc = -__int_as_float(0x7F800000);
#pragma unroll
        for (int i = 0; i < kRowsPerLane; ++i) mc = fmaxf(mc, score[i][c]);
        float sc_sum = 0.0f;
        float kv_sum = 0.0f;
#pragma unroll
        for (int i = 0; i < kRowsPerLane; ++i) {
          const float w = exp2_approx(__fmul_rn(__fsub_rn(score[i][c], mc), kLog2e));
          sc_sum = __fadd_rn(sc_sum, w);
          kv_sum = __fmaf_rn(kv[i][c], w, kv_sum);
        }
        // Merge with the other half-warp (rows +8).
        const float m_other = __shfl_xor_sync(kFullMask, mc, 16);
        const float s_other = __shfl_xor_sync(kFullMask, sc_sum, 16);
        const float p_other = __shfl_xor_sync(kFullMask, kv_sum, 16);
        const float merged = fmaxf(mc, m_other);
        const float a = exp2_approx(__fmul_rn(__fsub_rn(mc, merged), kLog2e));
        const float b = exp2_approx(__fmul_rn(__fsub_rn(m_other, merged), kLog2e));
        m[c] = merged;
        s[c] = __fadd_rn(__fmul_rn(sc_sum, a), __fmul_rn(s_other, b));
        p[c] = __fadd_rn(__fmul_rn(kv_sum, a), __fmul_rn(p_other, b));
      }

      if (half == 0) {
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          partial_m[warp][4 * lane + c] = m[c];
          partial_s[warp][4 * lane + c] = s[c];
          partial_p[warp][4 * lane + c] = p[c];
        }
      }
      __syncthreads();

      // Part k merges warps k and k + 4, then a width-4 butterfly merges the parts.
      const float m0 = partial_m[part][out_column];
      const float m1 = partial_m[part + 4][out_column];
      float mo = fmaxf(m0, m1);
      const float a0 = exp2_approx(__fmul_rn(__fsub_rn(m0, mo), kLog2e));
      const float a1 = exp2_approx(__fmul_rn(__fsub_rn(m1, mo), kLog2e));
      float so = __fadd_rn(__fmul_rn(partial_s[part][out_column], a0),
                           __fmul_rn(partial_s[part + 4][out_column], a1));
      float po = __fadd_rn(__fmul_rn(partial_p[part][out_column], a0),
                           __fmul_rn(partial_p[part + 4][out_column], a1));
#pragma unroll
      for (int offset = 1; offset < 4; offset <<= 1) {
        const float m_other = __shfl_xor_sync(kFullMask, mo, offset);
        const float s_other = __shfl_xor_sync(kFullMask, so, offset);
        const float p_other = __shfl_xor_sync(kFullMask, po, offset);
        const float merged = fmaxf(mo, m_other);
        const float a = exp2_approx(__fmul_rn(__fsub_rn(mo, merged), kLog2e));
        const float b = exp2_approx(__fmul_rn(__fsub_rn(m_other, merged), kLog2e));
        so = __fadd_rn(__fmul_rn(so, a), __fmul_rn(s_other, b));
        po = __fadd_rn(__fmul_rn(po, a), __fmul_rn(p_other, b));
        mo = merged;
      }
      if (part == 0) {
        params.compressed_kv[token.token * HeadSize + tile * kC128CompressColumns + out_column] =
            __fdiv_rn(po, so);
      }
      // The next token rewrites the partials.
      if (index + 1 < active_count) __syncthreads();
    }
  }
}

}  // namespace zj::dsv4
