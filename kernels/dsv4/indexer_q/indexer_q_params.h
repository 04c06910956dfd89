// Argument block and launch constants of the DSv4 indexer-Q kernels (RoPE + FP8 quant and
// RoPE + MXFP4 quant, spec section 1). Shared by the device code (NVRTC), the host launch code
// and the CPU reference, so it holds builtin types only and includes nothing.
#pragma once

namespace zj::dsv4 {

// One argument block serves both variants: each variant writes its own outputs and leaves the
// other's pointers unread (the host sets them to null).
struct IndexerQParams {
  const long long* positions;     // [T] int64: the RoPE position of each token.
  const unsigned short* q;        // [T, H, D] bf16 bits, contiguous, 16-byte aligned.
  const void* cos_sin_cache;      // [max_pos, R] f32 or bf16 (the CosSinT template parameter):
                                  // columns [0, R/2) hold cos, [R/2, R) sin. 16-byte aligned.
  long long cos_sin_row_stride;   // Elements between rows of cos_sin_cache; the row must stay
                                  // 16-byte aligned (a multiple of 4 for f32, 8 for bf16).
  const unsigned short* weights;  // [T, H] bf16 bits, contiguous.
  float* weights_out;             // [T, H] f32, contiguous.
  unsigned char* q_fp8;           // FP8 variant: [T, H, D] e4m3 codes, 16-byte aligned.
  unsigned char* q_packed;        // MXFP4 variant: [T, H, D/2] e2m1 pairs, 8-byte aligned.
  unsigned char* q_scale;         // MXFP4 variant: [T, H, D/32] UE8M0 exponents.
  long long num_tokens;           // T.
  float scale;                    // softmax_scale * head_scale, folded into weights_out.
};

// One thread owns 16 elements of a (token, head) row (contiguous, or two runs of 8 in the FP8
// kernel: RowLayout in indexer_q_common.cuh), so a row takes D/16 lanes (a "subwarp"); a CTA
// is 128 threads regardless of the key.
inline constexpr int kIndexerQThreadsPerBlock = 128;
inline constexpr int kIndexerQElementsPerThread = 16;
inline constexpr int kIndexerQDynamicSharedBytes = 0;
// FP8: a row's amax clamps here before the pow2 scale is taken (spec section 1).
inline constexpr float kIndexerQFp8MinAmax = 1e-4f;
inline constexpr float kIndexerQFp8Max = 448.0f;
// MXFP4: one UE8M0 exponent per 32 elements; E2M1's largest magnitude is 6.
inline constexpr int kIndexerQMxFp4BlockSize = 32;
inline constexpr float kIndexerQMxFp4Max = 6.0f;
// 6 * 2^-126: the smallest amax kept apart from zero, so that E >= 1 (2^-126 is the smallest
// scale a normal float can invert exactly).
inline constexpr float kIndexerQMxFp4MinAmax = 0x1.8p-124f;

// Threads one token needs: (H / coarsen) head tiles of D/16 lanes each.
constexpr long long indexer_q_threads_per_token(int head_dim, int num_heads, int coarsen) {
  return static_cast<long long>(num_heads / coarsen) * (head_dim / kIndexerQElementsPerThread);
}

// grid.x of either variant (block = kIndexerQThreadsPerBlock, no dynamic shared memory).
// Zero tokens give zero blocks: the caller skips the launch.
constexpr long long indexer_q_grid_size(long long num_tokens, int head_dim, int num_heads,
                                        int coarsen) {
  return (num_tokens * indexer_q_threads_per_token(head_dim, num_heads, coarsen) +
          kIndexerQThreadsPerBlock - 1) /
         kIndexerQThreadsPerBlock;
}

}  // namespace zj::dsv4
