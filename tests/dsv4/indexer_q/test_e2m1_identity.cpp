// The identity behind the Hopper E2M1 path of include/zerojit/device/numerics.cuh, checked on the
// host for every finite bf16 input and every block scale the MXFP4 kernel can choose:
//
//   code(a) = min(bits(64 + a) - 0x4280, bits(252 + a) - 0x437A)   (a = |x| * 2^(127-E) <= 6)
//
// with each sum computed the way the kernel computes it: one bf16 FMA (exact product and sum,
// one round to nearest even in bf16). The expected codes come from the reference conversion
// (kernels/reference/numerics.hpp), which the GPU tests hold the kernels to. This checks the
// arithmetic argument; the GPU test of the MXFP4 kernel checks the device code built on it.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

#include "reference/numerics.hpp"

namespace {

namespace num = zerojit::reference;

// Round a non-negative double to bf16, nearest even, including bf16 subnormals.
std::uint16_t round_to_bf16_bits(double value) {
  if (value == 0.0) return 0;
  int exponent = 0;
  std::frexp(value, &exponent);  // value = m * 2^exponent, m in [0.5, 1)
  // bf16 keeps 8 significant bits; below 2^-126 the step stays 2^-133.
  const int step_exponent = std::max(exponent - 8, -133);
  const double steps = std::nearbyint(std::ldexp(value, -step_exponent));
  const auto rounded = static_cast<float>(std::ldexp(steps, step_exponent));  // exact
  return static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(rounded) >> 16);
}

double bf16_value(std::uint16_t bits) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

// fma.rn.bf16x2 on one lane: the product and sum are exact in double for every operand here
// (8-bit significands times powers of two, plus 64..66), so one rounding to bf16 remains.
std::uint16_t fma_bf16(std::uint16_t a, std::uint16_t b, std::uint16_t c) {
  return round_to_bf16_bits(bf16_value(a) * bf16_value(b) + bf16_value(c));
}

// The kernel's result for one element, bit for bit (the kernel takes the same code bits and
// sign bit, but moves them into place eight elements at a time).
std::uint8_t e2m1_code_on_hopper(std::uint16_t x, std::uint32_t exponent) {
  const auto magnitude = static_cast<std::uint16_t>(x & 0x7FFF);
  const auto inverse = static_cast<std::uint16_t>((254u - exponent) << 7);
  const std::uint16_t fine = fma_bf16(magnitude, inverse, 0x4280);    // 64
  const std::uint16_t coarse = fma_bf16(magnitude, inverse, 0x437C);  // 252
  // Both are positive bf16 values, so the smaller value has the smaller bit pattern.
  const auto nearest = std::min<std::uint16_t>(fine, static_cast<std::uint16_t>(coarse - 0xFA));
  return static_cast<std::uint8_t>((nearest & 0x7) | ((x >> 12) & 0x8));
}

TEST(E2m1HopperIdentity, TheGridsAreTheBitPatterns) {
  for (int j = 0; j < 128; ++j) {  // [64, 128): steps of 1/2
    EXPECT_EQ(round_to_bf16_bits(64.0 + j / 2.0), 0x4280 + j) << "64 + " << j << "/2";
  }
  // 252 + rint(a) for a < 4, then steps of 2: the codes 2..7 of a = 0, 1, 2, 3, 4, 6.
  const double sums[] = {252, 253, 254, 255, 256, 258};
  for (int code = 2; code <= 7; ++code) {
    EXPECT_EQ(round_to_bf16_bits(sums[code - 2]), 0x437A + code) << sums[code - 2];
  }
}

TEST(E2m1HopperIdentity, InverseScaleBits) {
  for (std::uint32_t exponent = 1; exponent <= 253; ++exponent) {
    EXPECT_EQ(bf16_value(static_cast<std::uint16_t>((254u - exponent) << 7)),
              num::ue8m0_inverse_scale(exponent))
        << exponent;
  }
}

TEST(E2m1HopperIdentity, MatchesTheReferenceForEveryBf16InputAndScale) {
  long long checked = 0;
  long long mismatches = 0;
  for (std::uint32_t exponent = 1; exponent <= 253; ++exponent) {
    const float inverse = num::ue8m0_inverse_scale(exponent);
    for (std::uint32_t bits = 0; bits <= 0xFFFF; ++bits) {
      const auto x = static_cast<std::uint16_t>(bits);
      const float value = static_cast<float>(bf16_value(x));
      if (!std::isfinite(value)) continue;
      // E is chosen from the block's amax so that every |x| * 2^(127-E) <= 6.
      if (std::fabs(static_cast<double>(value)) *
              std::ldexp(1.0, 127 - static_cast<int>(exponent)) >
          6.0) {
        continue;
      }
      const std::uint8_t expected = num::float_to_e2m1_rn_sat(value * inverse);
      const std::uint8_t actual = e2m1_code_on_hopper(x, exponent);
      ++checked;
      if (actual != expected && ++mismatches <= 10) {
        ADD_FAILURE() << "x = " << value << " (bf16 0x" << std::hex << bits << std::dec
                      << "), E = " << exponent << ": expected code " << int{expected} << ", got "
                      << int{actual};
      }
    }
  }
  EXPECT_EQ(mismatches, 0);
  // Every exponent admits at least the values up to 6 * 2^(E-127): about half of the patterns.
  EXPECT_GT(checked, 253LL * 30000);
}

// The largest inputs of the kernel's range: |x| * 2^(127-E) = 6 and the ties below it.
TEST(E2m1HopperIdentity, TopOfTheRange) {
  const std::pair<float, int> cases[] = {{6.0f, 7}, {5.0f, 6}, {5.5f, 7}, {4.5f, 6}, {3.5f, 6}};
  for (const auto& [value, code] : cases) {
    const auto x = static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(value) >> 16);
    EXPECT_EQ(e2m1_code_on_hopper(x, 127), code) << value;
    EXPECT_EQ(e2m1_code_on_hopper(static_cast<std::uint16_t>(x | 0x8000), 127), code | 8) << -value;
  }
}

}  // namespace
