// Hand-computed inputs of the compressor reference tests (tests/dsv4/compressor/ and each
// compressor kernel's test_reference.cpp): value patterns chosen so that the softmax weights,
// the RMS norm factor, the UE8M0 scales and the RoPE products are exact, so the expected codes
// follow from the e4m3 / bf16 tables alone; and the checks of the rows they give.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "dsv4/support/inputs.hpp"

namespace zerojit::dsv4::testing {

// Bits of a float that is exactly representable in bf16 (the tests only use such values).
inline std::uint16_t exact_bf16(double value) {
  const auto f = static_cast<float>(value);
  EXPECT_EQ(static_cast<double>(f), value) << "test value not exact in f32";
  std::uint32_t bits = 0;
  std::memcpy(&bits, &f, sizeof bits);
  EXPECT_EQ(bits & 0xFFFFu, 0u) << "test value " << value << " is not exact in bf16";
  return static_cast<std::uint16_t>(bits >> 16);
}

inline std::uint16_t read_u16(const std::vector<std::uint8_t>& buffer, std::size_t offset) {
  return static_cast<std::uint16_t>(buffer[offset] | (buffer[offset + 1] << 8));
}

// Sign pattern s(e) = +-1, irregular in e and different per token seed.
inline double sign_pattern(int seed, int e) { return ((e * 7 + seed * 13) % 11) < 5 ? -1.0 : 1.0; }

// Magnitude pattern m(e) in {1, 3}: 3 for e % 8 in {0, 3, 5} (192 of 512 dims), so
// mean(m^2) = (320 * 1 + 192 * 9) / 512 = 4 and x = s * m has rrms = 1 / sqrt(4 + 0) = 0.5.
inline double magnitude_pattern(int e) {
  const int r = e % 8;
  return (r == 0 || r == 3 || r == 5) ? 3.0 : 1.0;
}

// A second irregular pattern in {-1, -0.5, 0.5, 1} for the per-row offsets that cancel.
inline double offset_pattern(int e) {
  static constexpr double kValues[4] = {-1.0, -0.5, 0.5, 1.0};
  return kValues[(e * 5 + 3) % 4];
}

// e4m3 codes of +-0.5 and +-1.5 under the exponent 119 (multiplier 256): 128 = 2^7 -> 0x70,
// 384 = 1.5 * 2^8 -> 0x7C.
inline std::uint8_t code_of_half_magnitude(double value) {
  const std::uint8_t magnitude = std::fabs(value) == 0.5 ? 0x70 : 0x7C;
  return value < 0 ? static_cast<std::uint8_t>(magnitude | 0x80) : magnitude;
}

// cos/sin row r: cos_j = (r % 15 + 1) / 32, sin_j = 0.5 for every pair j. The rows the tests
// read (0, 4, 8, 128) differ, so a wrong rope position changes the tail, and every rotation of
// +-0.5 / +-1.5 values stays exact in bf16 (at most 7 significant bits).
inline double cos_of_row(int row) { return (row % 15 + 1) / 32.0; }

inline std::vector<float> make_cos_sin(int rows) {
  std::vector<float> cs(static_cast<std::size_t>(rows) * 64);
  for (int r = 0; r < rows; ++r) {
    for (int j = 0; j < 32; ++j) {
      cs[static_cast<std::size_t>(r * 64 + j)] = static_cast<float>(cos_of_row(r));
      cs[static_cast<std::size_t>(r * 64 + 32 + j)] = 0.5f;
    }
  }
  return cs;
}

// Checks one fp8_ds_mla row holding y = s * m / 2 (the outcome of every pooling test):
// codes 0x70 / 0x7C with sign, exponents 119, pad 0, and the tail rotated by cos_sin row `cpos`.
inline void expect_half_pattern_ds_mla_row(const std::vector<std::uint8_t>& cache,
                                           long long page_stride, long long block_size,
                                           long long kv_slot, int seed, int cpos) {
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
inline void expect_sentinel_outside(const std::vector<std::uint8_t>& buffer,
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

inline std::vector<std::pair<long long, long long>> ds_mla_ranges(
    long long page_stride, long long block_size, const std::vector<long long>& slots) {
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

}  // namespace zerojit::dsv4::testing
