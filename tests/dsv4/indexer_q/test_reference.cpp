// CPU reference of the indexer-Q kernels (spec section 1) on hand-computed inputs: E2M1 ties
// and nibble order, UE8M0 exponents, the FP8 scale fold, RoPE placement and rounding, and the
// bytes the reference must leave alone.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "dsv4/indexer_q/indexer_q_params.h"
#include "dsv4/indexer_q/reference.hpp"

namespace {

using zerojit::DType;
using zerojit::dsv4::IndexerQKey;

constexpr int kHeadDim = 128;
constexpr int kRopeDim = 64;
constexpr unsigned char kSentinel = 0xA5;
constexpr std::uint32_t kSentinelWord = 0xA5A5A5A5u;

// bf16 bits of a float that bf16 holds exactly (every test input is chosen so).
std::uint16_t bf16(float value) {
  const auto bits = std::bit_cast<std::uint32_t>(value);
  EXPECT_EQ(bits & 0xFFFFu, 0u) << value << " is not a bf16 value";
  return static_cast<std::uint16_t>(bits >> 16);
}

std::uint32_t float_bits(float value) { return std::bit_cast<std::uint32_t>(value); }

// Host buffers of one indexer-Q call. Outputs get one spare row (or spare weight) of sentinel
// bytes past [T, H] so that writes beyond the tensor show up.
struct IndexerQBuffers {
  int num_tokens;
  int num_heads;
  long long cos_sin_row_stride;
  int cos_sin_rows;
  std::vector<long long> positions;
  std::vector<std::uint16_t> q;
  std::vector<float> cos_sin;
  std::vector<std::uint16_t> cos_sin_bf16;
  std::vector<std::uint16_t> weights;
  std::vector<float> weights_out;
  std::vector<unsigned char> q_fp8;
  std::vector<unsigned char> q_packed;
  std::vector<unsigned char> q_scale;

  IndexerQBuffers(int tokens, int heads, int rows = 4, long long row_stride = kRopeDim)
      : num_tokens(tokens),
        num_heads(heads),
        cos_sin_row_stride(row_stride),
        cos_sin_rows(rows),
        positions(static_cast<std::size_t>(tokens), 0),
        q(static_cast<std::size_t>(tokens * heads * kHeadDim), 0),
        cos_sin(static_cast<std::size_t>(rows * row_stride), 0.0f),
        cos_sin_bf16(static_cast<std::size_t>(rows * row_stride), 0),
        weights(static_cast<std::size_t>(tokens * heads), bf16(1.0f)),
        weights_out(static_cast<std::size_t>(tokens * heads + 1)),
        q_fp8(static_cast<std::size_t>((tokens * heads + 1) * kHeadDim), kSentinel),
        q_packed(static_cast<std::size_t>((tokens * heads + 1) * kHeadDim / 2), kSentinel),
        q_scale(static_cast<std::size_t>((tokens * heads + 1) * kHeadDim / 32), kSentinel) {
    std::memset(weights_out.data(), kSentinel, weights_out.size() * sizeof(float));
    // Every cos/sin row is the identity rotation (cos 1, sin 0) unless a test says otherwise.
    for (int r = 0; r < rows; ++r) set_angle(r, 1.0f, 0.0f);
  }

  void set_angle(int row, float cos_v, float sin_v) {
    for (int j = 0; j < kRopeDim / 2; ++j) {
      const auto base = static_cast<std::size_t>(row * cos_sin_row_stride);
      cos_sin[base + static_cast<std::size_t>(j)] = cos_v;
      cos_sin[base + static_cast<std::size_t>(kRopeDim / 2 + j)] = sin_v;
      cos_sin_bf16[base + static_cast<std::size_t>(j)] = bf16(cos_v);
      cos_sin_bf16[base + static_cast<std::size_t>(kRopeDim / 2 + j)] = bf16(sin_v);
    }
  }

  void set_q(int token, int head, int dim, float value) {
    q[static_cast<std::size_t>((token * num_heads + head) * kHeadDim + dim)] = bf16(value);
  }

  zj::dsv4::IndexerQParams params(bool fp8, bool cos_sin_is_bf16 = false) {
    zj::dsv4::IndexerQParams p{};
    p.positions = positions.data();
    p.q = q.data();
    p.cos_sin_cache = cos_sin_is_bf16 ? static_cast<const void*>(cos_sin_bf16.data())
                                      : static_cast<const void*>(cos_sin.data());
    p.cos_sin_row_stride = cos_sin_row_stride;
    p.weights = weights.data();
    p.weights_out = weights_out.data();
    p.q_fp8 = fp8 ? q_fp8.data() : nullptr;
    p.q_packed = fp8 ? nullptr : q_packed.data();
    p.q_scale = fp8 ? nullptr : q_scale.data();
    p.num_tokens = num_tokens;
    p.scale = 0.25f;
    return p;
  }

  IndexerQKey shape(bool cos_sin_is_bf16 = false) const {
    return IndexerQKey{kHeadDim, kRopeDim, num_heads, cos_sin_is_bf16 ? DType::bf16 : DType::f32};
  }

  unsigned char fp8(int token, int head, int dim) const {
    return q_fp8[static_cast<std::size_t>((token * num_heads + head) * kHeadDim + dim)];
  }
  unsigned char packed(int token, int head, int byte) const {
    return q_packed[static_cast<std::size_t>((token * num_heads + head) * kHeadDim / 2 + byte)];
  }
  unsigned char scale_byte(int token, int head, int block) const {
    return q_scale[static_cast<std::size_t>((token * num_heads + head) * kHeadDim / 32 + block)];
  }
  std::uint32_t weight_bits(int token, int head) const {
    return float_bits(weights_out[static_cast<std::size_t>(token * num_heads + head)]);
  }

  // The spare row / weight past [T, H] and the other variant's outputs stay sentinel.
  void expect_untouched_beyond(bool fp8) const {
    const std::size_t rows = static_cast<std::size_t>(num_tokens * num_heads);
    EXPECT_EQ(float_bits(weights_out[rows]), kSentinelWord);
    for (std::size_t k = rows * kHeadDim; k < q_fp8.size(); ++k) EXPECT_EQ(q_fp8[k], kSentinel);
    for (std::size_t k = rows * kHeadDim / 2; k < q_packed.size(); ++k) {
      EXPECT_EQ(q_packed[k], kSentinel);
    }
    for (std::size_t k = rows * kHeadDim / 32; k < q_scale.size(); ++k) {
      EXPECT_EQ(q_scale[k], kSentinel);
    }
    if (fp8) {
      for (unsigned char byte : q_packed) EXPECT_EQ(byte, kSentinel);
      for (unsigned char byte : q_scale) EXPECT_EQ(byte, kSentinel);
    } else {
      for (unsigned char byte : q_fp8) EXPECT_EQ(byte, kSentinel);
    }
  }
};

// --- MXFP4 ------------------------------------------------------------------------------------

// Block 0 has amax 6 (E = 127, scale 1), so every value reaches E2M1 unscaled: the exact ties
// go to the even code, the sign is bit 3, -0 gives 0x8, and element 2k is the low nibble.
TEST(IndexerQMxFp4Reference, TiesSignsAndNibbleOrder) {
  IndexerQBuffers b(1, 1);
  const float values[24] = {6.0f,   0.25f,  0.75f,  1.25f,  1.75f,        2.5f,  3.5f,  5.0f,
                            -0.25f, -0.75f, -1.25f, -1.75f, -2.5f,        -3.5f, -5.0f, -6.0f,
                            0.5f,   1.5f,   3.0f,   4.0f,   0.251953125f, 5.5f,  -0.0f, 0.0f};
  for (int d = 0; d < 24; ++d) b.set_q(0, 0, d, values[d]);
  zerojit::dsv4::reference::indexer_q_mxfp4(b.shape(), b.params(false));

  // codes: 6->7 0.25->0 0.75->2 1.25->2 1.75->4 2.5->4 3.5->6 5->6, negatives | 8,
  // 0.5->1 1.5->3 3->5 4->6 0.2519->1 5.5->7 -0->8 0->0.
  const unsigned char expected[16] = {0x07, 0x22, 0x44, 0x66, 0xA8, 0xCA, 0xEC, 0xFE,
                                      0x31, 0x65, 0x71, 0x08, 0x00, 0x00, 0x00, 0x00};
  for (int k = 0; k < 16; ++k) EXPECT_EQ(b.packed(0, 0, k), expected[k]) << "byte " << k;
  EXPECT_EQ(b.scale_byte(0, 0, 0), 127);
  b.expect_untouched_beyond(false);
}

// amax = 6 * 2^k gives E = 127 + k exactly, so the max lands on code 7 (not saturated from
// above), and x * 2^-k hits the ties 0.25 / 0.75 from larger magnitudes.
TEST(IndexerQMxFp4Reference, AmaxSixTimesPowerOfTwoMapsToCodeSeven) {
  IndexerQBuffers b(1, 1);
  // Block 1 (dims 32..63): amax 48 = 6 * 2^3 -> E = 130, scaled by 1/8.
  b.set_q(0, 0, 32, 48.0f);   // 6    -> 7
  b.set_q(0, 0, 33, -48.0f);  // -6   -> F
  b.set_q(0, 0, 34, 24.0f);   // 3    -> 5
  b.set_q(0, 0, 35, 12.0f);   // 1.5  -> 3
  b.set_q(0, 0, 36, 2.0f);    // 0.25 -> 0 (tie to even)
  b.set_q(0, 0, 37, 6.0f);    // 0.75 -> 2 (tie to even)
  // Block 3 (dims 96..127, rope, identity angle): amax 0.75 = 6 * 2^-3 -> E = 124, scaled by 8.
  b.set_q(0, 0, 96, 0.75f);     // 6    -> 7
  b.set_q(0, 0, 97, -0.1875f);  // -1.5 -> B
  b.set_q(0, 0, 98, 0.03125f);  // 0.25 -> 0
  b.set_q(0, 0, 99, 0.09375f);  // 0.75 -> 2
  zerojit::dsv4::reference::indexer_q_mxfp4(b.shape(), b.params(false));

  EXPECT_EQ(b.scale_byte(0, 0, 0), 1);  // all-zero block: amax floors at 6 * 2^-126
  EXPECT_EQ(b.scale_byte(0, 0, 1), 130);
  EXPECT_EQ(b.scale_byte(0, 0, 2), 1);
  EXPECT_EQ(b.scale_byte(0, 0, 3), 124);
  for (int k = 0; k < 16; ++k) EXPECT_EQ(b.packed(0, 0, k), 0x00) << "byte " << k;
  EXPECT_EQ(b.packed(0, 0, 16), 0xF7);
  EXPECT_EQ(b.packed(0, 0, 17), 0x35);
  EXPECT_EQ(b.packed(0, 0, 18), 0x20);
  for (int k = 19; k < 48; ++k) EXPECT_EQ(b.packed(0, 0, k), 0x00) << "byte " << k;
  EXPECT_EQ(b.packed(0, 0, 48), 0xB7);
  EXPECT_EQ(b.packed(0, 0, 49), 0x20);
  for (int k = 50; k < 64; ++k) EXPECT_EQ(b.packed(0, 0, k), 0x00) << "byte " << k;
}

// E = ceil(log2(amax / 6)) + 127, one byte per 32-element block in block order.
TEST(IndexerQMxFp4Reference, Ue8m0ExponentsInBlockOrder) {
  IndexerQBuffers b(1, 1);
  b.set_q(0, 0, 0, 1.0f);             // 1/6 -> 2^-2: E = 125
  b.set_q(0, 0, 40, 0.10009765625f);  // bf16(0.1) / 6 = 0.01668 -> 2^-5: E = 122
  b.set_q(0, 0, 64, 6.03125f);        // just above 6 -> 2^1: E = 128
  b.set_q(0, 0, 127, -448.0f);        // 74.67 -> 2^7: E = 134
  zerojit::dsv4::reference::indexer_q_mxfp4(b.shape(), b.params(false));
  EXPECT_EQ(b.scale_byte(0, 0, 0), 125);
  EXPECT_EQ(b.scale_byte(0, 0, 1), 122);
  EXPECT_EQ(b.scale_byte(0, 0, 2), 128);
  EXPECT_EQ(b.scale_byte(0, 0, 3), 134);
  EXPECT_EQ(b.packed(0, 0, 0), 0x06);   // 1 * 2^2 = 4: code 6
  EXPECT_EQ(b.packed(0, 0, 20), 0x05);  // 0.1001 * 2^5 = 3.203 -> 3: code 5
  EXPECT_EQ(b.packed(0, 0, 32), 0x05);  // 6.03125 * 2^-1 = 3.016 -> 3: code 5
  EXPECT_EQ(b.packed(0, 0, 63), 0xE0);  // -448 * 2^-7 = -3.5 -> tie to 4: 0xE, high nibble
}

// Weights are scaled by `scale` only, with no q-scale fold; every (t, h) lands in its slot.
TEST(IndexerQMxFp4Reference, WeightsAndRowPlacement) {
  IndexerQBuffers b(2, 3);
  for (int t = 0; t < 2; ++t) {
    for (int h = 0; h < 3; ++h) {
      // Row (t, h) has amax 6 * 2^(t*3 + h) in block (t + h) % 4 only.
      const int k = t * 3 + h;
      b.set_q(t, h, 32 * ((t + h) % 4), 6.0f * static_cast<float>(1 << k));
      b.weights[static_cast<std::size_t>(t * 3 + h)] = bf16(static_cast<float>(k + 1));
    }
  }
  zerojit::dsv4::reference::indexer_q_mxfp4(b.shape(), b.params(false));
  for (int t = 0; t < 2; ++t) {
    for (int h = 0; h < 3; ++h) {
      const int k = t * 3 + h;
      const int block = (t + h) % 4;
      for (int m = 0; m < 4; ++m) {
        EXPECT_EQ(b.scale_byte(t, h, m), m == block ? 127 + k : 1) << t << "," << h << "," << m;
      }
      EXPECT_EQ(b.packed(t, h, 16 * block), 0x07);
      EXPECT_EQ(b.weight_bits(t, h), float_bits(static_cast<float>(k + 1) * 0.25f));
    }
  }
  b.expect_untouched_beyond(false);
}

// The rotated pair is rounded to bf16 before the amax: e' = 6 + 2^-11 rounds to 6.0, so the
// block keeps E = 127 (unrounded, E would be 128 and 6 would become code 5).
TEST(IndexerQMxFp4Reference, RopeResultRoundsToBf16BeforeAmax) {
  IndexerQBuffers b(1, 1);
  b.positions[0] = 2;
  b.set_angle(2, 1.0f, 0x1p-9f);
  b.set_q(0, 0, 64, 6.0f);    // e' = fma(6, 1, -(-0.25 * 2^-9)) = 6 + 2^-11 -> bf16 6.0
  b.set_q(0, 0, 65, -0.25f);  // o' = fma(6, 2^-9, -0.25) = -0.23828125 -> code 0x8
  zerojit::dsv4::reference::indexer_q_mxfp4(b.shape(), b.params(false));
  EXPECT_EQ(b.scale_byte(0, 0, 2), 127);
  EXPECT_EQ(b.packed(0, 0, 32), 0x87);
}

// --- FP8 ---------------------------------------------------------------------------------------

// amax 448 gives E = 127 (scale 1); amax 1 gives E = 119 (codes scaled by 2^8, weight by
// 2^-8); an all-zero row clamps at 1e-4: E = 105.
TEST(IndexerQFp8Reference, CodesExponentsAndWeightFold) {
  IndexerQBuffers b(1, 3);
  b.set_q(0, 0, 0, 448.0f);    // 0x7E
  b.set_q(0, 0, 1, -1.0f);     // 0xB8
  b.set_q(0, 0, 2, 0x1p-9f);   // smallest subnormal: 0x01
  b.set_q(0, 0, 3, 0.0f);      // 0x00
  b.set_q(0, 0, 4, -0.0f);     // 0x80
  b.set_q(0, 0, 5, 1.0625f);   // tie between 1 and 1.125 -> 1: 0x38
  b.set_q(0, 0, 6, 1.1875f);   // tie between 1.125 and 1.25 -> 1.25: 0x3A
  b.set_q(0, 0, 7, 300.0f);    // -> 288: 0x79
  b.set_q(0, 1, 0, 1.0f);      // * 256 = 256: 0x78
  b.set_q(0, 1, 1, -0.5f);     // -128: 0xF0
  b.set_q(0, 1, 2, 0x1p-16f);  // 2^-8: subnormal 0x02
  b.set_q(0, 2, 9, -0.0f);     // all-zero row: 0x80 at 9, zeros elsewhere
  b.weights[0] = bf16(2.0f);
  b.weights[1] = bf16(1.0f);
  b.weights[2] = bf16(-3.0f);
  zerojit::dsv4::reference::indexer_q_fp8(b.shape(), b.params(true));

  const unsigned char head0[8] = {0x7E, 0xB8, 0x01, 0x00, 0x80, 0x38, 0x3A, 0x79};
  for (int d = 0; d < 8; ++d) EXPECT_EQ(b.fp8(0, 0, d), head0[d]) << "dim " << d;
  EXPECT_EQ(b.fp8(0, 1, 0), 0x78);
  EXPECT_EQ(b.fp8(0, 1, 1), 0xF0);
  EXPECT_EQ(b.fp8(0, 1, 2), 0x02);
  for (int d = 8; d < kHeadDim; ++d) EXPECT_EQ(b.fp8(0, 0, d), 0x00) << "dim " << d;
  for (int d = 0; d < kHeadDim; ++d) EXPECT_EQ(b.fp8(0, 2, d), d == 9 ? 0x80 : 0x00);

  EXPECT_EQ(b.weight_bits(0, 0), float_bits(0.5f));               // 2 * 0.25 * 2^0
  EXPECT_EQ(b.weight_bits(0, 1), float_bits(0x1p-10f));           // 1 * 0.25 * 2^-8
  EXPECT_EQ(b.weight_bits(0, 2), float_bits(-0.75f * 0x1p-22f));  // -3 * 0.25 * 2^-22
  b.expect_untouched_beyond(true);
}

// cos = 0, sin = 1 turns a pair (e, o) into (-o, e). The row is read at positions[t], with the
// runtime row stride, for f32 and bf16 tables alike.
TEST(IndexerQFp8Reference, RopeQuarterTurnSwapsThePair) {
  for (bool cos_sin_is_bf16 : {false, true}) {
    IndexerQBuffers b(2, 1, /*rows=*/5, /*row_stride=*/72);
    b.positions[0] = 3;
    b.positions[1] = 0;
    b.set_angle(3, 0.0f, 1.0f);
    for (int t = 0; t < 2; ++t) {
      b.set_q(t, 0, 0, 448.0f);  // E = 127: the codes are the rotated values themselves
      b.set_q(t, 0, 64, 1.0f);
      b.set_q(t, 0, 65, 2.0f);
      b.set_q(t, 0, 66, -0.5f);
      b.set_q(t, 0, 67, 0.25f);
      b.set_q(t, 0, 126, 3.0f);
      b.set_q(t, 0, 127, -4.0f);
    }
    zerojit::dsv4::reference::indexer_q_fp8(b.shape(cos_sin_is_bf16),
                                            b.params(true, cos_sin_is_bf16));
    // Token 0 (position 3): (1, 2) -> (-2, 1); (-0.5, 0.25) -> (-0.25, -0.5); (3, -4) -> (4, 3).
    EXPECT_EQ(b.fp8(0, 0, 64), 0xC0);
    EXPECT_EQ(b.fp8(0, 0, 65), 0x38);
    EXPECT_EQ(b.fp8(0, 0, 66), 0xA8);
    EXPECT_EQ(b.fp8(0, 0, 67), 0xB0);
    EXPECT_EQ(b.fp8(0, 0, 126), 0x48);
    EXPECT_EQ(b.fp8(0, 0, 127), 0x44);
    // Token 1 (position 0, identity): unchanged.
    EXPECT_EQ(b.fp8(1, 0, 64), 0x38);
    EXPECT_EQ(b.fp8(1, 0, 65), 0x40);
    EXPECT_EQ(b.fp8(1, 0, 66), 0xB0);
    EXPECT_EQ(b.fp8(1, 0, 67), 0x28);
    EXPECT_EQ(b.fp8(1, 0, 126), 0x44);
    EXPECT_EQ(b.fp8(1, 0, 127), 0xC8);
    b.expect_untouched_beyond(true);
  }
}

TEST(IndexerQReference, RejectsShapesOutsideTheSpec) {
  IndexerQBuffers b(1, 1);
  EXPECT_THROW(
      zerojit::dsv4::reference::indexer_q_fp8(IndexerQKey{96, 64, 1, DType::f32}, b.params(true)),
      std::invalid_argument);  // 96 / 16 = 6 is not a power of two
  EXPECT_THROW(zerojit::dsv4::reference::indexer_q_mxfp4(IndexerQKey{128, 48, 1, DType::f32},
                                                         b.params(false)),
               std::invalid_argument);  // rope 48 is not a multiple of 32
  EXPECT_THROW(zerojit::dsv4::reference::indexer_q_fp8(b.shape(), b.params(false)),
               std::invalid_argument);  // q_fp8 is null
}

TEST(IndexerQParams, GridSize) {
  // 64 heads of 8 lanes: 512 threads = 4 CTAs per token at coarsen 1, 1 CTA at coarsen 4.
  static_assert(zj::dsv4::indexer_q_grid_size(1, 128, 64, 1) == 4);
  static_assert(zj::dsv4::indexer_q_grid_size(1000, 128, 64, 4) == 1000);
  static_assert(zj::dsv4::indexer_q_grid_size(3, 128, 2, 2) == 1);  // 3 * 8 threads
  static_assert(zj::dsv4::indexer_q_grid_size(0, 128, 64, 1) == 0);
  SUCCEED();
}

}  // namespace
