// CPU reference tests of the DSv4 compressor kernels (spec sections 3-7). Every expected byte is
// derived by hand: the inputs are built so that the softmax weights, the RMS norm factor, the
// UE8M0 scales and the RoPE products are exact, so the expected codes follow from the e4m3 /
// bf16 tables alone.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "dsv4/c128_compress/c128_compress_params.h"
#include "dsv4/c128_store/c128_store_params.h"
#include "dsv4/c4_store/c4_store_params.h"
#include "dsv4/compressor/reference.hpp"

namespace {

namespace ref = zerojit::dsv4::reference;
using zj::dsv4::C128CompressParams;
using zj::dsv4::C128StoreFullParams;
using zj::dsv4::C128StoreParams;
using zj::dsv4::C4StoreFullParams;
using zj::dsv4::C4StoreParams;

constexpr std::uint8_t kSentinel = 0xA5;

// Bits of a float that is exactly representable in bf16 (the tests only use such values).
std::uint16_t exact_bf16(double value) {
  const auto f = static_cast<float>(value);
  EXPECT_EQ(static_cast<double>(f), value) << "test value not exact in f32";
  std::uint32_t bits = 0;
  std::memcpy(&bits, &f, sizeof bits);
  EXPECT_EQ(bits & 0xFFFFu, 0u) << "test value " << value << " is not exact in bf16";
  return static_cast<std::uint16_t>(bits >> 16);
}

std::uint16_t read_u16(const std::vector<std::uint8_t>& buffer, std::size_t offset) {
  return static_cast<std::uint16_t>(buffer[offset] | (buffer[offset + 1] << 8));
}

// Sign pattern s(e) = +-1, irregular in e and different per token seed.
double sign_pattern(int seed, int e) { return ((e * 7 + seed * 13) % 11) < 5 ? -1.0 : 1.0; }

// Magnitude pattern m(e) in {1, 3}: 3 for e % 8 in {0, 3, 5} (192 of 512 dims), so
// mean(m^2) = (320 * 1 + 192 * 9) / 512 = 4 and x = s * m has rrms = 1 / sqrt(4 + 0) = 0.5.
double magnitude_pattern(int e) {
  const int r = e % 8;
  return (r == 0 || r == 3 || r == 5) ? 3.0 : 1.0;
}

// A second irregular pattern in {-1, -0.5, 0.5, 1} for the per-row offsets that cancel.
double offset_pattern(int e) {
  static constexpr double kValues[4] = {-1.0, -0.5, 0.5, 1.0};
  return kValues[(e * 5 + 3) % 4];
}

// e4m3 codes of +-0.5 and +-1.5 under the exponent 119 (multiplier 256): 128 = 2^7 -> 0x70,
// 384 = 1.5 * 2^8 -> 0x7C.
std::uint8_t code_of_half_magnitude(double value) {
  const std::uint8_t magnitude = std::fabs(value) == 0.5 ? 0x70 : 0x7C;
  return value < 0 ? static_cast<std::uint8_t>(magnitude | 0x80) : magnitude;
}

// cos/sin row r: cos_j = (r % 15 + 1) / 32, sin_j = 0.5 for every pair j. The rows the tests
// read (0, 4, 8, 128) differ, so a wrong rope position changes the tail, and every rotation of
// +-0.5 / +-1.5 values stays exact in bf16 (at most 7 significant bits).
double cos_of_row(int row) { return (row % 15 + 1) / 32.0; }

std::vector<float> make_cos_sin(int rows) {
  std::vector<float> cs(static_cast<std::size_t>(rows) * 64);
  for (int r = 0; r < rows; ++r) {
    for (int j = 0; j < 32; ++j) {
      cs[static_cast<std::size_t>(r * 64 + j)] = static_cast<float>(cos_of_row(r));
      cs[static_cast<std::size_t>(r * 64 + 32 + j)] = 0.5f;
    }
  }
  return cs;
}

// Checks one fp8_ds_mla row holding y = s * m / 2 (the outcome of every pooling test below):
// codes 0x70 / 0x7C with sign, exponents 119, pad 0, and the tail rotated by cos_sin row `cpos`.
void expect_half_pattern_ds_mla_row(const std::vector<std::uint8_t>& cache, long long page_stride,
                                    long long block_size, long long kv_slot, int seed, int cpos) {
  const auto data =
      static_cast<std::size_t>((kv_slot / block_size) * page_stride + (kv_slot % block_size) * 576);
  const auto scales = static_cast<std::size_t>((kv_slot / block_size) * page_stride +
                                               block_size * 576 + (kv_slot % block_size) * 8);
  for (int e = 0; e < 448; ++e) {
    const double y = sign_pattern(seed, e) * magnitude_pattern(e) / 2.0;
    ASSERT_EQ(cache[data + static_cast<std::size_t>(e)], code_of_half_magnitude(y))
        << "kv slot " << kv_slot << " dim " << e;
  }
  for (int block = 0; block < 7; ++block) {
    EXPECT_EQ(cache[scales + static_cast<std::size_t>(block)], 119) << "block " << block;
  }
  EXPECT_EQ(cache[scales + 7], 0) << "pad byte";
  const double c = cos_of_row(cpos);
  for (int j = 0; j < 32; ++j) {
    const double even = sign_pattern(seed, 448 + 2 * j) * magnitude_pattern(448 + 2 * j) / 2.0;
    const double odd = sign_pattern(seed, 449 + 2 * j) * magnitude_pattern(449 + 2 * j) / 2.0;
    EXPECT_EQ(read_u16(cache, data + 448 + 4 * static_cast<std::size_t>(j)),
              exact_bf16(even * c - odd * 0.5))
        << "rope pair " << j;
    EXPECT_EQ(read_u16(cache, data + 450 + 4 * static_cast<std::size_t>(j)),
              exact_bf16(even * 0.5 + odd * c))
        << "rope pair " << j;
  }
}

// Every byte outside the listed [begin, end) ranges still holds the sentinel.
void expect_sentinel_outside(const std::vector<std::uint8_t>& buffer,
                             const std::vector<std::pair<long long, long long>>& ranges) {
  std::vector<bool> written(buffer.size(), false);
  for (const auto& [begin, end] : ranges) {
    for (long long i = begin; i < end; ++i) written[static_cast<std::size_t>(i)] = true;
  }
  for (std::size_t i = 0; i < buffer.size(); ++i) {
    if (!written[i]) {
      ASSERT_EQ(buffer[i], kSentinel) << "byte " << i << " was written";
    }
  }
}

std::vector<std::pair<long long, long long>> ds_mla_ranges(long long page_stride,
                                                           long long block_size,
                                                           const std::vector<long long>& slots) {
  std::vector<std::pair<long long, long long>> ranges;
  for (const long long slot : slots) {
    const long long page = slot / block_size;
    const long long row = slot % block_size;
    ranges.emplace_back(page * page_stride + row * 576, page * page_stride + row * 576 + 576);
    ranges.emplace_back(page * page_stride + block_size * 576 + row * 8,
                        page * page_stride + block_size * 576 + row * 8 + 8);
  }
  return ranges;
}

// --- Stages
// ---------------------------------------------------------------------------------------

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

// --- C4
// --------------------------------------------------------------------------------------------

// One request at positions 0..15 (Bs = 4: state blocks for columns 0..3), plus tokens that must
// stay inactive. Every boundary token p = 4g + 3 pools 8 half-rows that it alone uses: rows
// 0..3 = positions 4g-4..4g-1, columns [0, 512); rows 4..7 = positions 4g..4g+3, columns
// [512, 1024). Row r holds s_p(e) m(e) + (r - 3.5) o(e) (p = 3: rows 4..7 with r - 5.5), so
// with equal scores x = s_p m exactly (the offsets cancel), rrms = 1/2 and y = s_p m / 2.
// A wrong row, half or column shifts the offsets into x and changes the codes.
struct C4Fixture {
  static constexpr int kBs = 4;
  static constexpr long long kRowStride = 2048 + 16;              // padded, multiple of 16
  static constexpr long long kBlockStride = 4 * kRowStride + 32;  // padded, multiple of 16
  static constexpr int kBlocks = 6;

  std::vector<float> state = std::vector<float>(kBlocks * kBlockStride, 1000.0f);
  // Table row 0: columns 0..3 -> blocks 2, -3 (clamped to 0), 3, 1; column 4 unused.
  // Table row 1: only column 0 used (block 5).
  std::vector<int> block_table = {2, -3, 3, 1, 4, 5, 5, 5, 5, 5};
  std::vector<int> token_to_req;
  std::vector<long long> positions;
  std::vector<long long> slot_mapping;
  std::vector<long long> kv_slots;
  std::vector<std::uint16_t> weight = std::vector<std::uint16_t>(512, 0x3F80);  // 1.0
  std::vector<float> cos_sin = make_cos_sin(16);

  static int block_of_column(int column) {
    static constexpr int kBlocksOfColumns[4] = {2, 0, 3, 1};
    return kBlocksOfColumns[column];
  }

  float* half_row(int position, int half) {
    return &state[static_cast<std::size_t>(block_of_column(position / kBs) * kBlockStride +
                                           (position % kBs) * kRowStride + half * 512)];
  }

  // Writes the 8 half-rows of boundary token p (kv and scores), with seed p for s_p.
  void fill_token(int p, double score_of_row5) {
    for (int r = 0; r < 8; ++r) {
      const int position = p - 7 + r;
      if (position < 0) continue;
      const int half = r / 4;
      const double offset = p == 3 ? r - 5.5 : r - 3.5;
      float* row = half_row(position, half);
      for (int e = 0; e < 512; ++e) {
        row[e] = static_cast<float>(sign_pattern(p, e) * magnitude_pattern(e) +
                                    offset * offset_pattern(e));
        row[1024 + e] = r == 5 ? static_cast<float>(score_of_row5) : 0.0f;
      }
    }
  }

  C4StoreParams params(std::vector<std::uint8_t>& cache, long long page_stride, long long b) {
    C4StoreParams p{};
    p.state_cache = state.data();
    p.state_block_stride = kBlockStride;
    p.state_row_stride = kRowStride;
    p.state_block_size = kBs;
    p.token_to_req = token_to_req.data();
    p.num_token_to_req = static_cast<long long>(token_to_req.size());
    p.positions = positions.data();
    p.num_positions = static_cast<long long>(positions.size());
    p.slot_mapping = slot_mapping.data();
    p.num_tokens = static_cast<long long>(slot_mapping.size());
    p.block_table = block_table.data();
    p.block_table_stride = 5;
    p.block_table_rows = 2;
    p.block_table_width = 5;
    p.rms_norm_weight = weight.data();
    p.eps = 0.0f;
    p.cos_sin_cache = cos_sin.data();
    p.cos_sin_stride = 64;
    p.k_cache = cache.data();
    p.kv_block_stride_bytes = page_stride;
    p.kv_slot_mapping = kv_slots.data();
    p.num_kv_slots = static_cast<long long>(kv_slots.size());
    p.kv_cache_block_size = b;
    return p;
  }
};

TEST(CompressorReference, C4EqualScoresPoolTheMeanAndOnlyBoundaryTokensWrite) {
  C4Fixture f;
  for (const int p : {3, 7, 11, 15}) f.fill_token(p, 0.0);
  // Tokens: positions 0..15 of request 0 with distinct kv slots (a non-boundary token would
  // write if the boundary rule were wrong), then inactive boundary tokens: state slot -1
  // (p = 11 of request 0 again, kv slot 9), kv slot -1 (p = 7), and request 1 at p = 3 whose
  // slot mapping is -1.
  for (int p = 0; p < 16; ++p) {
    f.token_to_req.push_back(0);
    f.positions.push_back(p);
    f.slot_mapping.push_back(p);
    f.kv_slots.push_back(p);
  }
  f.token_to_req.insert(f.token_to_req.end(), {0, 0, 1});
  f.positions.insert(f.positions.end(), {11, 7, 3});
  f.slot_mapping.insert(f.slot_mapping.end(), {-1, 40, -1});
  f.kv_slots.insert(f.kv_slots.end(), {9, -1, 10});
  // Token 15 (p = 15) loses its kv slot: inactive.
  f.kv_slots[15] = -1;

  // B = 2 rows a page, page stride 1728: bytes [1168, 1728) of each page must stay untouched.
  constexpr long long kStride = 1728;
  std::vector<std::uint8_t> cache(8 * kStride, kSentinel);
  const auto written = ref::c4_store(f.params(cache, kStride, 2), {ref::NormWeightType::kBFloat16});
  ASSERT_EQ(written, (std::vector<long long>{3, 7, 11}));
  expect_half_pattern_ds_mla_row(cache, kStride, 2, 3, 3, 0);    // p = 3: cpos 0
  expect_half_pattern_ds_mla_row(cache, kStride, 2, 7, 7, 4);    // p = 7: cpos 4
  expect_half_pattern_ds_mla_row(cache, kStride, 2, 11, 11, 8);  // p = 11: cpos 8
  expect_sentinel_outside(cache, ds_mla_ranges(kStride, 2, written));
}

TEST(CompressorReference, C4DominantScoreSelectsOneRow) {
  C4Fixture f;
  // Row 5 (position p - 2, columns [512, 1024)) gets score 0, every other row -60: its weight
  // is 1 and the others e^-60 ~ 1e-26, far below one float ulp. Row 5 holds 2 s m, the others
  // garbage (1000 + offsets), so x = 2 s m, rrms = 1/4 and again y = s m / 2.
  const int p = 11;
  for (int r = 0; r < 8; ++r) {
    float* row = f.half_row(p - 7 + r, r / 4);
    for (int e = 0; e < 512; ++e) {
      row[e] = r == 5 ? static_cast<float>(2.0 * sign_pattern(p, e) * magnitude_pattern(e))
                      : static_cast<float>(1000.0 + r * offset_pattern(e));
      row[1024 + e] = r == 5 ? 0.0f : -60.0f;
    }
  }
  f.token_to_req = {0};
  f.positions = {p};
  f.slot_mapping = {0};
  f.kv_slots = {5};
  constexpr long long kStride = 37440;  // B = 64: round_up(64 * 584, 576)
  std::vector<std::uint8_t> cache(kStride, kSentinel);
  const auto written =
      ref::c4_store(f.params(cache, kStride, 64), {ref::NormWeightType::kBFloat16});
  ASSERT_EQ(written, (std::vector<long long>{5}));
  expect_half_pattern_ds_mla_row(cache, kStride, 64, 5, p, 8);
  expect_sentinel_outside(cache, ds_mla_ranges(kStride, 64, written));
}

TEST(CompressorReference, C4BlockTableColumnOutOfRangeMakesTheTokenInactive) {
  C4Fixture f;
  f.fill_token(7, 0.0);
  f.token_to_req = {0, 0};
  f.positions = {7, 23};  // p = 23 needs column 5, beyond the table's width of 5
  f.slot_mapping = {0, 0};
  f.kv_slots = {0, 1};
  std::vector<std::uint8_t> cache(1728, kSentinel);
  const auto written = ref::c4_store(f.params(cache, 1728, 2), {ref::NormWeightType::kBFloat16});
  EXPECT_EQ(written, (std::vector<long long>{0}));
  expect_sentinel_outside(cache, ds_mla_ranges(1728, 2, written));
}

TEST(CompressorReference, C4FullRowsBf16AndFp8) {
  C4Fixture f;
  f.fill_token(7, 0.0);
  f.token_to_req = {0, 0};
  f.positions = {6, 7};
  f.slot_mapping = {0, 1};
  f.kv_slots = {0, 3};
  std::vector<std::uint8_t> unused;
  const C4StoreParams base = f.params(unused, 0, 2);
  std::vector<float> fp8_scale = {0.5f};  // multiplier 2: +-0.5 -> +-1 (0x38), +-1.5 -> +-3 (0x44)

  constexpr long long kRowStride = 1024 + 32;
  constexpr long long kPageStride = 2 * kRowStride + 64;
  for (const bool fp8 : {false, true}) {
    std::vector<std::uint8_t> cache(3 * kPageStride, kSentinel);
    C4StoreFullParams p{};
    p.state_cache = base.state_cache;
    p.state_block_stride = base.state_block_stride;
    p.state_row_stride = base.state_row_stride;
    p.state_block_size = base.state_block_size;
    p.token_to_req = base.token_to_req;
    p.num_token_to_req = base.num_token_to_req;
    p.positions = base.positions;
    p.num_positions = base.num_positions;
    p.slot_mapping = base.slot_mapping;
    p.num_tokens = base.num_tokens;
    p.block_table = base.block_table;
    p.block_table_stride = base.block_table_stride;
    p.block_table_rows = base.block_table_rows;
    p.block_table_width = base.block_table_width;
    p.rms_norm_weight = base.rms_norm_weight;
    p.eps = 0.0f;
    p.cos_sin_cache = base.cos_sin_cache;
    p.cos_sin_stride = 64;
    p.k_cache = cache.data();
    p.kv_block_stride_bytes = kPageStride;
    p.kv_row_stride_bytes = kRowStride;
    p.kv_slot_mapping = base.kv_slot_mapping;
    p.num_kv_slots = base.num_kv_slots;
    p.kv_cache_block_size = 2;
    p.fp8_scale = fp8_scale.data();
    const auto written = ref::c4_store_full(p, {fp8, ref::NormWeightType::kBFloat16});
    ASSERT_EQ(written, (std::vector<long long>{3}));
    const auto row = static_cast<std::size_t>(kPageStride + kRowStride);  // slot 3: page 1, row 1
    const double c = cos_of_row(4);
    for (int e = 0; e < 512; ++e) {
      double v = sign_pattern(7, e) * magnitude_pattern(e) / 2.0;
      if (e >= 448) {
        const int pair = (e - 448) / 2;
        const double even = sign_pattern(7, 448 + 2 * pair) * magnitude_pattern(448 + 2 * pair) / 2;
        const double odd = sign_pattern(7, 449 + 2 * pair) * magnitude_pattern(449 + 2 * pair) / 2;
        v = e % 2 == 0 ? even * c - odd * 0.5 : even * 0.5 + odd * c;
      }
      if (fp8) {
        if (e < 448) {
          const std::uint8_t magnitude = std::fabs(v) == 0.5 ? 0x38 : 0x44;
          ASSERT_EQ(cache[row + static_cast<std::size_t>(e)],
                    v < 0 ? static_cast<std::uint8_t>(magnitude | 0x80) : magnitude)
              << "dim " << e;
        }
      } else {
        ASSERT_EQ(read_u16(cache, row + 2 * static_cast<std::size_t>(e)), exact_bf16(v))
            << "dim " << e;
      }
    }
    expect_sentinel_outside(
        cache, {{static_cast<long long>(row), static_cast<long long>(row) + (fp8 ? 512 : 1024)}});
  }
}

// --- C128
// ------------------------------------------------------------------------------------------

// One request whose positions 0..255 live in 32 state blocks of 8 rows (block of column c is
// perm(c); column 3 holds -1, clamped to block 0). Row q holds kv(q, e) = base(e) +
// (q % 128 - 63.5) o(e), so the mean over a 128-row window is base(e) exactly.
struct C128Fixture {
  static constexpr long long kRowStride = 1024 + 16;
  static constexpr long long kBlockStride = 8 * kRowStride;
  static constexpr int kColumns = 32;

  std::vector<float> state = std::vector<float>((kColumns + 1) * kBlockStride, 7.0f);
  std::vector<int> block_table = std::vector<int>(kColumns);

  // Columns 0..31 -> distinct blocks 1..32 (7 is coprime with 32), except column 3 -> 0.
  static int block_of_column(int column) { return column == 3 ? 0 : (column * 7) % 32 + 1; }

  C128Fixture() {
    for (int c = 0; c < kColumns; ++c)
      block_table[static_cast<std::size_t>(c)] = block_of_column(c);
    block_table[3] = -1;
  }

  float* row(int position) {
    return &state[static_cast<std::size_t>(block_of_column(position / 8) * kBlockStride +
                                           (position % 8) * kRowStride)];
  }

  static double base(int window, int e) { return sign_pattern(window, e) * (e % 5) * 0.25; }
};

TEST(CompressorReference, C128CompressEqualAndDominantScores) {
  C128Fixture f;
  for (int q = 0; q < 256; ++q) {
    float* r = f.row(q);
    const int window = q / 128;
    for (int e = 0; e < 512; ++e) {
      r[e] =
          static_cast<float>(C128Fixture::base(window, e) + (q % 128 - 63.5) * offset_pattern(e));
      // Window 0: equal scores. Window 1: row 128 + 77 dominates (score 0 vs -60).
      r[512 + e] = window == 0 ? 1.5f : (q == 128 + 77 ? 0.0f : -60.0f);
    }
  }
  std::vector<int> token_to_req = {0, 0, 0, 0, 0};
  std::vector<long long> positions = {126, 127, 128, 255, 255};
  std::vector<long long> slot_mapping = {0, 1, 2, 3, -1};
  C128CompressParams p{};
  p.state_cache = f.state.data();
  p.state_block_stride = C128Fixture::kBlockStride;
  p.state_row_stride = C128Fixture::kRowStride;
  p.state_block_size = 8;
  p.token_to_req = token_to_req.data();
  p.num_token_to_req = 5;
  p.positions = positions.data();
  p.num_positions = 5;
  p.slot_mapping = slot_mapping.data();
  p.num_tokens = 5;
  p.block_table = f.block_table.data();
  p.block_table_stride = C128Fixture::kColumns;
  p.block_table_rows = 1;
  p.block_table_width = C128Fixture::kColumns;
  std::vector<float> out(5 * 512, -9.0f);
  p.compressed_kv = out.data();
  const auto rows = ref::c128_compress(p, {512});
  ASSERT_EQ(rows, (std::vector<long long>{1, 3}));
  for (int e = 0; e < 512; ++e) {
    ASSERT_EQ(out[static_cast<std::size_t>(512 + e)], static_cast<float>(C128Fixture::base(0, e)))
        << "equal scores, dim " << e;
    ASSERT_EQ(out[static_cast<std::size_t>(3 * 512 + e)],
              static_cast<float>(C128Fixture::base(1, e) + (77 - 63.5) * offset_pattern(e)))
        << "dominant row, dim " << e;
  }
  for (const int t : {0, 2, 4}) {
    for (int e = 0; e < 512; ++e) ASSERT_EQ(out[static_cast<std::size_t>(t * 512 + e)], -9.0f);
  }

  p.state_block_size = 4;
  EXPECT_THROW(ref::c128_compress(p, {512}), std::invalid_argument);
}

C128StoreParams c128_store_params(const std::vector<float>& compressed_kv,
                                  const std::vector<long long>& positions,
                                  const std::vector<long long>& slot_mapping,
                                  const std::vector<long long>& kv_slots,
                                  const std::vector<std::uint16_t>& weight,
                                  const std::vector<float>& cos_sin,
                                  std::vector<std::uint8_t>& cache) {
  C128StoreParams p{};
  p.compressed_kv = compressed_kv.data();
  p.positions = positions.data();
  p.num_positions = static_cast<long long>(positions.size());
  p.slot_mapping = slot_mapping.data();
  p.num_tokens = static_cast<long long>(slot_mapping.size());
  p.rms_norm_weight = weight.data();
  p.eps = 0.0f;
  p.cos_sin_cache = cos_sin.data();
  p.cos_sin_stride = 64;
  p.k_cache = cache.data();
  p.kv_slot_mapping = kv_slots.data();
  p.num_kv_slots = static_cast<long long>(kv_slots.size());
  return p;
}

TEST(CompressorReference, C128StoreAddressesPagesByCompileTimeStride) {
  // Token 0: p = 127 (cpos 0), kv slot 3 -> page 1, row 1. Token 1: p = 255 (cpos 128), kv
  // slot 0. Token 2: not a boundary. Token 3: kv slot -1. x = s m: y = s m / 2.
  std::vector<long long> positions = {127, 255, 200, 383};
  std::vector<long long> slot_mapping = {0, 1, 2, 3};
  std::vector<long long> kv_slots = {3, 0, 4, -1};
  std::vector<float> compressed_kv(4 * 512);
  for (int t = 0; t < 4; ++t) {
    for (int e = 0; e < 512; ++e) {
      compressed_kv[static_cast<std::size_t>(t * 512 + e)] =
          static_cast<float>(sign_pattern(100 + t, e) * magnitude_pattern(e));
    }
  }
  std::vector<std::uint16_t> weight(512, 0x3F80);
  // Only rows 0 and 128 are read; rows r of make_cos_sin(r) differ, so index cpos by hand.
  std::vector<float> cos_sin = make_cos_sin(129);
  for (const long long stride : {1728LL, 39168LL}) {
    std::vector<std::uint8_t> cache(3 * static_cast<std::size_t>(stride), kSentinel);
    const auto written = ref::c128_store(
        c128_store_params(compressed_kv, positions, slot_mapping, kv_slots, weight, cos_sin, cache),
        {2, stride, ref::NormWeightType::kBFloat16});
    ASSERT_EQ(written, (std::vector<long long>{3, 0}));
    // Slot 3: data at stride + 576, scales at stride + 1152 + 8.
    EXPECT_EQ(cache[static_cast<std::size_t>(stride + 1152 + 8 + 7)], 0);
    expect_half_pattern_ds_mla_row(cache, stride, 2, 3, 100, 0);
    expect_half_pattern_ds_mla_row(cache, stride, 2, 0, 101, 128);
    expect_sentinel_outside(cache, ds_mla_ranges(stride, 2, written));
  }
  // B = 1, stride 1152: slot 3 is page 3.
  std::vector<std::uint8_t> cache(4 * 1152, kSentinel);
  const auto written = ref::c128_store(
      c128_store_params(compressed_kv, positions, slot_mapping, kv_slots, weight, cos_sin, cache),
      {1, 1152, ref::NormWeightType::kBFloat16});
  expect_half_pattern_ds_mla_row(cache, 1152, 1, 3, 100, 0);
  expect_sentinel_outside(cache, ds_mla_ranges(1152, 1, written));
}

TEST(CompressorReference, C128StoreFullBf16) {
  std::vector<long long> positions = {255};
  std::vector<long long> slot_mapping = {0};
  std::vector<long long> kv_slots = {1};
  std::vector<float> compressed_kv(512);
  for (int e = 0; e < 512; ++e) {
    compressed_kv[static_cast<std::size_t>(e)] =
        static_cast<float>(sign_pattern(9, e) * magnitude_pattern(e));
  }
  std::vector<float> weight(512, 1.0f);
  std::vector<float> cos_sin = make_cos_sin(129);
  std::vector<float> fp8_scale = {1.0f};
  std::vector<std::uint8_t> cache(2 * 1024, kSentinel);
  C128StoreFullParams p{};
  p.compressed_kv = compressed_kv.data();
  p.positions = positions.data();
  p.num_positions = 1;
  p.slot_mapping = slot_mapping.data();
  p.num_tokens = 1;
  p.rms_norm_weight = weight.data();
  p.eps = 0.0f;
  p.cos_sin_cache = cos_sin.data();
  p.cos_sin_stride = 64;
  p.k_cache = cache.data();
  p.kv_block_stride_bytes = 2048;
  p.kv_row_stride_bytes = 1024;
  p.kv_slot_mapping = kv_slots.data();
  p.num_kv_slots = 1;
  p.kv_cache_block_size = 2;
  p.fp8_scale = fp8_scale.data();
  const auto written = ref::c128_store_full(p, {false, ref::NormWeightType::kFloat32});
  ASSERT_EQ(written, (std::vector<long long>{1}));
  const double c = cos_of_row(128);
  for (int e = 0; e < 512; ++e) {
    double v = sign_pattern(9, e) * magnitude_pattern(e) / 2.0;
    if (e >= 448) {
      const int even_dim = e - e % 2;
      const double even = sign_pattern(9, even_dim) * magnitude_pattern(even_dim) / 2.0;
      const double odd = sign_pattern(9, even_dim + 1) * magnitude_pattern(even_dim + 1) / 2.0;
      v = e % 2 == 0 ? even * c - odd * 0.5 : even * 0.5 + odd * c;
    }
    ASSERT_EQ(read_u16(cache, 1024 + 2 * static_cast<std::size_t>(e)), exact_bf16(v)) << e;
  }
  expect_sentinel_outside(cache, {{1024, 2048}});
}

// --- Comparison helpers --------------------------------------------------------------------------

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
