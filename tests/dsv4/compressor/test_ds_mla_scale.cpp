// The fp8_ds_mla block exponent without a division (ds_mla_scale_exponent in
// kernels/dsv4/compressor/compressor_common.cuh) against the spec's formula with the IEEE
// division, for every non-negative bf16 amax, infinity and NaN included. The host function below
// is the device code's arithmetic; the GPU tests hold the kernels' scale bytes to the reference.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "reference/numerics.hpp"

namespace {

namespace num = zerojit::reference;

constexpr float kFp8Max = 448.0f;

std::uint32_t by_division(float amax) {
  return num::ue8m0_ceil_pow2_bits(std::fmax(1e-4f, amax / kFp8Max));
}

std::uint32_t without_division(float amax) {
  const std::uint32_t exponent = num::ue8m0_ceil_pow2_bits(amax * (1.0f / kFp8Max));
  return exponent > 114u ? exponent : 114u;
}

TEST(DsMlaScaleExponent, EqualsTheDivisionForEveryBf16Amax) {
  int mismatches = 0;
  for (std::uint32_t bits = 0; bits <= 0x7FFF; ++bits) {  // +0 .. +inf and the NaNs
    const float amax = std::bit_cast<float>(bits << 16);
    if (without_division(amax) != by_division(amax) && ++mismatches <= 10) {
      ADD_FAILURE() << "amax " << amax << " (bf16 0x" << std::hex << bits << std::dec
                    << "): division " << by_division(amax) << ", without "
                    << without_division(amax);
    }
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(DsMlaScaleExponent, BoundariesAreExact) {
  // amax = 448 * 2^k gives 127 + k (the product rounds to 2^k exactly); the next bf16 above
  // gives 128 + k.
  for (int k = -10; k <= 10; ++k) {
    const float at = std::ldexp(448.0f, k);
    EXPECT_EQ(by_division(at), static_cast<std::uint32_t>(127 + k)) << at;
    EXPECT_EQ(without_division(at), static_cast<std::uint32_t>(127 + k)) << at;
    const float above = std::bit_cast<float>(std::bit_cast<std::uint32_t>(at) + 0x10000u);
    EXPECT_EQ(without_division(above), static_cast<std::uint32_t>(128 + k)) << above;
  }
  EXPECT_EQ(without_division(0.0f), 114u);  // the 1e-4 floor
  EXPECT_EQ(without_division(std::numeric_limits<float>::infinity()), 255u);
  EXPECT_EQ(without_division(std::numeric_limits<float>::quiet_NaN()), 114u);
}

}  // namespace
