// CPU reference tests of the stages the DSv4 compressor kernels share (spec sections 3-7): the
// RMS norm, the fp8_ds_mla and full-row stores of one row, and the comparison helpers the GPU
// tests judge the kernels with. Every expected byte is derived by hand.
// The patterns and row checks are dsv4/support/compressor_patterns.hpp.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "dsv4/compressor/reference.hpp"
#include "dsv4/support/compressor_patterns.hpp"

namespace {

using namespace zerojit::dsv4::testing;
namespace ref = zerojit::dsv4::reference;

TEST(CompressorReference, RmsNormOfConstantRowIsExact) {
  // x = 2 everywhere: mean(x^2) = 4. With eps = 0, rrms = 1/2 and y = w; with eps = 12,
  // rrms = 1 / sqrt(16) = 1/4 and y = w / 2. Both are exact.
  std::vector<float> x(512, 2.0f);
  std::vector<std::uint16_t> weight_bf16(512);
  std::vector<float> weight_f32(512);
  for (int e = 0; e < 512; ++e) {
    const double w = 1.0 + (e % 16) / 16.0;
    weight_bf16[static_cast<std::size_t>(e)] = exact_bf16(w);
    weight_f32[static_cast<std::size_t>(e)] = static_cast<float>(w);
  }
  std::vector<float> y(512);
  ref::rms_norm_row(x.data(), weight_bf16.data(), ref::NormWeightType::kBFloat16, 0.0f, y.data());
  for (int e = 0; e < 512; ++e) {
    EXPECT_EQ(y[static_cast<std::size_t>(e)], static_cast<float>(1.0 + (e % 16) / 16.0));
  }
  ref::rms_norm_row(x.data(), weight_f32.data(), ref::NormWeightType::kFloat32, 12.0f, y.data());
  for (int e = 0; e < 512; ++e) {
    EXPECT_EQ(y[static_cast<std::size_t>(e)], static_cast<float>((1.0 + (e % 16) / 16.0) / 2.0));
  }
}

TEST(CompressorReference, StoreDsMlaRowQuantizesHandComputedBlocks) {
  std::vector<float> y(512, 0.0f);
  // Block 0: amax 448 -> 448 / 448 = 1 -> E = 127, multiplier 1: 448 -> 0x7E, 1.0 -> 0x38.
  for (int i = 0; i < 64; ++i) y[static_cast<std::size_t>(i)] = 1.0f;
  y[0] = 448.0f;
  // Block 1: all 0.5 -> 0.5 / 448 = 2^-9.8 -> E = 118, multiplier 512: 256 -> 0x78.
  for (int i = 64; i < 128; ++i) y[static_cast<std::size_t>(i)] = 0.5f;
  // Block 2: all zero -> max(1e-4, 0) = 1e-4 -> E = ceil(-13.3) + 127 = 114, codes 0.
  // Block 3: -3 everywhere, one 5: 5 / 448 = 2^-6.5 -> E = 121, multiplier 64:
  // -192 = -1.5 * 2^7 -> 0xF4, 320 = 1.25 * 2^8 -> 0x7A.
  for (int i = 192; i < 256; ++i) y[static_cast<std::size_t>(i)] = -3.0f;
  y[200] = 5.0f;
  // Block 4: E = 127 (448 present). 1 + 2^-4 + 2^-10 rounds to bf16 1.0625 first, an exact e4m3
  // tie that goes to even 1.0 (0x38); without the bf16 step it would round up to 1.125 (0x39).
  // 1.0703125 is bf16-exact and above the tie: 0x39.
  y[256] = 448.0f;
  y[257] = 1.0634765625f;
  y[258] = 1.0703125f;
  // Block 5: amax 0.4375 = 448 * 2^-10 -> E = 117 exactly, multiplier 2^10. Subnormal codes:
  // 2^-19 -> 2^-9 -> 0x01; 3 * 2^-19 -> 0x03; -2^-20 -> -2^-10, a tie to even 0 -> 0x80;
  // 5 * 2^-20 -> 2.5 steps, a tie to even 2 -> 0x02.
  y[320] = 0.4375f;
  y[321] = std::ldexp(1.0f, -19);
  y[322] = 3.0f * std::ldexp(1.0f, -19);
  y[323] = -std::ldexp(1.0f, -20);
  y[324] = 5.0f * std::ldexp(1.0f, -20);
  // Block 6: amax 224 -> 224 / 448 = 0.5 -> E = 126, multiplier 2: 448 -> 0x7E, -2 -> 0xC0.
  y[384] = 224.0f;
  y[385] = -1.0f;
  // Tail: even = j + 0.5, odd = -(j + 1) / 4.
  for (int j = 0; j < 32; ++j) {
    y[static_cast<std::size_t>(448 + 2 * j)] = static_cast<float>(j) + 0.5f;
    y[static_cast<std::size_t>(449 + 2 * j)] = -static_cast<float>(j + 1) / 4.0f;
  }

  // B = 2, page stride 1728 = round_up(2 * 584, 576); slot 3 = page 1, row 1.
  constexpr long long kStride = 1728;
  std::vector<std::uint8_t> cache(3 * kStride, kSentinel);
  std::vector<float> identity(64, 0.0f);
  for (int j = 0; j < 32; ++j) identity[static_cast<std::size_t>(j)] = 1.0f;
  ref::store_ds_mla_row(y.data(), identity.data(), cache.data(), kStride, 2, 3);

  const std::size_t data = 1728 + 576;
  const std::size_t scales = 1728 + 1152 + 8;
  const std::uint8_t expected_scales[8] = {127, 118, 114, 121, 127, 117, 126, 0};
  for (std::size_t k = 0; k < 8; ++k) EXPECT_EQ(cache[scales + k], expected_scales[k]) << k;
  EXPECT_EQ(cache[data + 0], 0x7E);
  for (std::size_t i = 1; i < 64; ++i) EXPECT_EQ(cache[data + i], 0x38) << i;
  for (std::size_t i = 64; i < 128; ++i) EXPECT_EQ(cache[data + i], 0x78) << i;
  for (std::size_t i = 128; i < 192; ++i) EXPECT_EQ(cache[data + i], 0x00) << i;
  for (std::size_t i = 192; i < 256; ++i) EXPECT_EQ(cache[data + i], i == 200 ? 0x7A : 0xF4) << i;
  EXPECT_EQ(cache[data + 256], 0x7E);
  EXPECT_EQ(cache[data + 257], 0x38);
  EXPECT_EQ(cache[data + 258], 0x39);
  for (std::size_t i = 259; i < 320; ++i) EXPECT_EQ(cache[data + i], 0x00) << i;
  const std::uint8_t block5[5] = {0x7E, 0x01, 0x03, 0x80, 0x02};
  for (std::size_t i = 0; i < 5; ++i) EXPECT_EQ(cache[data + 320 + i], block5[i]) << i;
  for (std::size_t i = 325; i < 384; ++i) EXPECT_EQ(cache[data + i], 0x00) << i;
  EXPECT_EQ(cache[data + 384], 0x7E);
  EXPECT_EQ(cache[data + 385], 0xC0);
  for (std::size_t i = 386; i < 448; ++i) EXPECT_EQ(cache[data + i], 0x00) << i;
  // cos = 1, sin = 0: the tail is stored as is, real part at the lower address.
  for (std::size_t j = 0; j < 32; ++j) {
    EXPECT_EQ(read_u16(cache, data + 448 + 4 * j), exact_bf16(static_cast<double>(j) + 0.5));
    EXPECT_EQ(read_u16(cache, data + 450 + 4 * j), exact_bf16(-(static_cast<double>(j) + 1) / 4));
  }
  // Nothing else changed: row 0 of page 1, the other pages, and bytes [1168, 1728) of a page.
  expect_sentinel_outside(cache,
                          {{static_cast<long long>(data), static_cast<long long>(data) + 576},
                           {static_cast<long long>(scales), static_cast<long long>(scales) + 8}});

  // cos = 0, sin = 1: (e, o) -> (-o, e).
  std::vector<float> quarter_turn(64, 0.0f);
  for (int j = 0; j < 32; ++j) quarter_turn[static_cast<std::size_t>(32 + j)] = 1.0f;
  ref::store_ds_mla_row(y.data(), quarter_turn.data(), cache.data(), kStride, 2, 3);
  for (std::size_t j = 0; j < 32; ++j) {
    EXPECT_EQ(read_u16(cache, data + 448 + 4 * j), exact_bf16((static_cast<double>(j) + 1) / 4));
    EXPECT_EQ(read_u16(cache, data + 450 + 4 * j), exact_bf16(static_cast<double>(j) + 0.5));
  }
}

TEST(CompressorReference, StoreFullRowWithPerTensorFp8Scale) {
  std::vector<float> y(512, 0.0f);
  y[0] = 3.0f;          // * (1 / 2) = 1.5 -> 0x3C
  y[1] = -0.75f;        // -0.375 = -1.5 * 2^-2 -> 0xAC
  y[2] = 896.0f;        // 448 -> 0x7E
  y[3] = 2000.0f;       // 1000 -> clamped to 448 -> 0x7E
  y[4] = 2.126953125f;  // bf16 2.125 first -> 1.0625, an e4m3 tie to even 1.0 -> 0x38
  y[5] = -1.0e-6f;      // -5e-7, below half the smallest subnormal -> -0 -> 0x80
  for (int e = 448; e < 512; ++e) y[static_cast<std::size_t>(e)] = 0.5f;  // rope, identity
  std::vector<float> identity(64, 0.0f);
  for (int j = 0; j < 32; ++j) identity[static_cast<std::size_t>(j)] = 1.0f;

  // Rows of 512 bytes with padding: stride1 = 544, stride0 = 2 * 544 + 96; slot 3 = page 1, row 1.
  constexpr long long kRowStride = 544;
  constexpr long long kPageStride = 2 * kRowStride + 96;
  std::vector<std::uint8_t> cache(3 * kPageStride, kSentinel);
  ref::store_full_row(y.data(), identity.data(), cache.data(), kPageStride, kRowStride, 2, 3, true,
                      2.0f);
  const auto base = static_cast<std::size_t>(kPageStride + kRowStride);
  const std::uint8_t expected[6] = {0x3C, 0xAC, 0x7E, 0x7E, 0x38, 0x80};
  for (std::size_t i = 0; i < 6; ++i) EXPECT_EQ(cache[base + i], expected[i]) << i;
  for (std::size_t i = 6; i < 448; ++i) EXPECT_EQ(cache[base + i], 0x00) << i;
  for (std::size_t i = 448; i < 512; ++i) EXPECT_EQ(cache[base + i], 0x28) << i;  // 0.25
  expect_sentinel_outside(cache,
                          {{static_cast<long long>(base), static_cast<long long>(base) + 512}});

  // bf16 rows: 1024 bytes, little-endian bf16 of the (rotated) values.
  constexpr long long kBf16RowStride = 1024 + 64;
  std::vector<std::uint8_t> bf16_cache(2 * 2 * kBf16RowStride, kSentinel);
  ref::store_full_row(y.data(), identity.data(), bf16_cache.data(), 2 * kBf16RowStride,
                      kBf16RowStride, 2, 2, false, 1.0f);
  const auto bf16_base = static_cast<std::size_t>(2 * kBf16RowStride);
  EXPECT_EQ(read_u16(bf16_cache, bf16_base + 0), 0x4040);        // 3.0
  EXPECT_EQ(read_u16(bf16_cache, bf16_base + 2), 0xBF40);        // -0.75
  EXPECT_EQ(read_u16(bf16_cache, bf16_base + 8), 0x4008);        // 2.126953125 -> 2.125
  EXPECT_EQ(read_u16(bf16_cache, bf16_base + 2 * 448), 0x3F00);  // 0.5
  expect_sentinel_outside(
      bf16_cache, {{static_cast<long long>(bf16_base), static_cast<long long>(bf16_base) + 1024}});
}

// Moves an e4m3 code `steps` codes away in magnitude (down when up would pass 448).
std::uint8_t bump_e4m3(std::uint8_t code, int steps) {
  const int magnitude = code & 0x7F;
  const int moved = magnitude + steps <= 0x7E ? magnitude + steps : magnitude - steps;
  return static_cast<std::uint8_t>((code & 0x80) | moved);
}

void bump_bf16(std::vector<std::uint8_t>& buffer, std::size_t offset, int ulps) {
  const auto bits = static_cast<std::uint16_t>(read_u16(buffer, offset) + ulps);
  buffer[offset] = static_cast<std::uint8_t>(bits & 0xFF);
  buffer[offset + 1] = static_cast<std::uint8_t>(bits >> 8);
}

std::vector<float> varied_row(int seed) {
  std::vector<float> y(512);
  for (int e = 0; e < 512; ++e) {
    y[static_cast<std::size_t>(e)] =
        static_cast<float>(sign_pattern(seed, e) * (0.3 + (e * 37 % 101) / 50.0));
  }
  return y;
}

TEST(CompressorComparison, DsMlaRowsToleratesRoundingButNotErrors) {
  constexpr long long kStride = 1728;
  std::vector<std::uint8_t> expected(2 * kStride, kSentinel);
  const auto y = varied_row(1);
  std::vector<float> cs = make_cos_sin(1);
  ref::store_ds_mla_row(y.data(), cs.data(), expected.data(), kStride, 2, 1);
  const std::vector<long long> slots = {1};
  EXPECT_EQ(ref::compare_ds_mla_rows(expected, expected, kStride, 2, slots), "");

  const std::size_t data = 576;
  const std::size_t scales = 1152 + 8;
  auto actual = expected;
  actual[data + 10] = bump_e4m3(actual[data + 10], 1);  // one step: a rounding flip
  EXPECT_EQ(ref::compare_ds_mla_rows(expected, actual, kStride, 2, slots), "");
  actual[data + 11] = bump_e4m3(actual[data + 11], 1);
  actual[data + 12] = bump_e4m3(actual[data + 12], 1);  // 3 flips > 2 + 448 / 1000
  EXPECT_NE(ref::compare_ds_mla_rows(expected, actual, kStride, 2, slots).find("rounding step"),
            std::string::npos);

  actual = expected;
  actual[data + 20] = bump_e4m3(actual[data + 20], 3);
  EXPECT_NE(ref::compare_ds_mla_rows(expected, actual, kStride, 2, slots).find("nope dim 20"),
            std::string::npos);

  actual = expected;
  actual[scales + 7] = 1;
  EXPECT_NE(ref::compare_ds_mla_rows(expected, actual, kStride, 2, slots).find("pad byte"),
            std::string::npos);

  actual = expected;
  actual[scales + 2] = static_cast<std::uint8_t>(actual[scales + 2] + 1);  // no boundary here
  EXPECT_NE(ref::compare_ds_mla_rows(expected, actual, kStride, 2, slots).find("scale byte 2"),
            std::string::npos);

  actual = expected;
  actual[data + 448 + 6] = static_cast<std::uint8_t>(actual[data + 448 + 6] ^ 0x40);
  EXPECT_NE(ref::compare_ds_mla_rows(expected, actual, kStride, 2, slots).find("rope dim"),
            std::string::npos);

  actual = expected;
  actual[1168 + 3] = 0;  // beyond B * 584 in page 0
  EXPECT_NE(ref::compare_ds_mla_rows(expected, actual, kStride, 2, slots).find("outside"),
            std::string::npos);
}

TEST(CompressorComparison, DsMlaScaleMayMoveAtAPowerOfTwoBoundary) {
  // Block 0's amax is bf16 448 on one side (E = 127, top code 448) and 450 on the other (the
  // neighbouring bf16: E = 128, top code 224), as when y sits at the bf16 tie 449.
  constexpr long long kStride = 1728;
  std::vector<float> y = varied_row(2);
  std::vector<float> cs = make_cos_sin(1);
  y[5] = 448.0f;
  std::vector<std::uint8_t> expected(kStride, kSentinel);
  ref::store_ds_mla_row(y.data(), cs.data(), expected.data(), kStride, 2, 0);
  y[5] = 450.0f;
  std::vector<std::uint8_t> actual(kStride, kSentinel);
  ref::store_ds_mla_row(y.data(), cs.data(), actual.data(), kStride, 2, 0);
  ASSERT_EQ(expected[1152], 127);
  ASSERT_EQ(actual[1152], 128);
  const std::vector<long long> slots = {0};
  EXPECT_EQ(ref::compare_ds_mla_rows(expected, actual, kStride, 2, slots), "");
}

TEST(CompressorComparison, FullRowsAndCompressedKv) {
  constexpr long long kStride = 1024;
  std::vector<std::uint8_t> expected(2 * kStride, kSentinel);
  const auto y = varied_row(3);
  std::vector<float> cs = make_cos_sin(1);
  ref::store_full_row(y.data(), cs.data(), expected.data(), 2 * kStride, kStride, 2, 1, false, 1.f);
  const std::vector<long long> slots = {1};
  auto actual = expected;
  bump_bf16(actual, kStride + 2, 1);  // dim 1: one bf16 ulp, 0.8 % at most
  EXPECT_EQ(ref::compare_full_rows(expected, actual, 2 * kStride, kStride, 2, slots, false), "");
  bump_bf16(actual, kStride + 4, 128);  // dim 2: the exponent moves, a factor of 2
  EXPECT_NE(
      ref::compare_full_rows(expected, actual, 2 * kStride, kStride, 2, slots, false).find("dim 2"),
      std::string::npos);

  std::vector<float> kv_expected(3 * 512, -9.0f);
  for (int e = 0; e < 512; ++e)
    kv_expected[static_cast<std::size_t>(512 + e)] = y[static_cast<std::size_t>(e)];
  auto kv_actual = kv_expected;
  kv_actual[512 + 7] *= 1.000001f;
  const std::vector<long long> rows = {1};
  EXPECT_EQ(ref::compare_compressed_kv(kv_expected, kv_actual, 512, rows), "");
  kv_actual[512 + 8] *= 1.001f;
  EXPECT_NE(ref::compare_compressed_kv(kv_expected, kv_actual, 512, rows).find("element 8"),
            std::string::npos);
  kv_actual = kv_expected;
  kv_actual[2 * 512] = 0.0f;  // an unwritten row changed
  EXPECT_NE(ref::compare_compressed_kv(kv_expected, kv_actual, 512, rows).find("not written"),
            std::string::npos);
}

}  // namespace
