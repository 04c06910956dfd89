// C128 (HCA, ratio 128) compress, block8 (spec section 5): softmax-pool the 128 state rows
// p-127..p of each boundary token into compressed_kv[t, 0:HeadSize] (f32).
//
// Template parameters:
//   HeadSize  head size = state width (512 for DSv4; a multiple of 64). A state row is
//             [kv HeadSize | score HeadSize].
// Launch: grid = c128_compress_grid(num_tokens) CTAs, a multiple of HeadSize / 64 (any positive
//   multiple is correct: see "token chunks" in compressor_params.h); CTA b pools column tile
//   b % tiles of the active tokens of chunk b / tiles, in token order. block =
//   kC128CompressThreads (256), no dynamic shared memory (static ~8 KiB).
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

template <int HeadSize>
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
  __shared__ float partial_m[kRowsPerLane][kPartialStride];
  __shared__ float partial_s[kRowsPerLane][kPartialStride];
  __shared__ float partial_p[kRowsPerLane][kPartialStride];

  __shared__ ActiveToken active_tokens[kTokensPerRound];
  const TokenRange range = chunk_tokens(params.num_tokens, blockIdx.x / kTiles, gridDim.x / kTiles);
  for (long long first = range.begin; first < range.end; first += kTokensPerRound) {
    const int active_count = collect_active_tokens(
        first, range.end,
        [&](long long token, ActiveToken& record) {
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
        },
        active_tokens);

    for (int index = 0; index < active_count; ++index) {
      const ActiveToken token = active_tokens[index];
      const long long first_block_column =
          (token.position - (kC128Ratio - 1)) / kC128StateBlockSize;
      int block = params.block_table[token.request * params.block_table_stride +
                                     first_block_column + 2 * warp + half];
      block = block < 0 ? 0 : block;  // spec 0.5: clamped >= 0
      const float* rows = params.state_cache + block * params.state_block_stride + column;

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
