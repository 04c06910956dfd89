// Host mirrors of include/zerojit/device/numerics.cuh: the rounding primitives every CPU reference
// uses. Each function reproduces its PTX counterpart bit for bit, so references can compare
// codes and scale bytes exactly.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace zerojit::reference {

// --- BF16 ----------------------------------------------------------------------------------

inline float bf16_to_float(std::uint16_t bits) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

// IEEE round-to-nearest-even to bf16 (cvt.rn.bf16.f32). NaN maps to the canonical 0x7FFF.
inline std::uint16_t float_to_bf16_rn(float x) {
  const auto bits = std::bit_cast<std::uint32_t>(x);
  if (std::isnan(x)) return static_cast<std::uint16_t>(0x7FFF);
  const std::uint32_t rounding = 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>((bits + rounding) >> 16);
}

inline float round_to_bf16(float x) { return bf16_to_float(float_to_bf16_rn(x)); }

// --- FP8 E4M3 (OCP E4M3FN) -----------------------------------------------------------------

inline float e4m3_to_float(std::uint8_t code) {
  const int sign = code >> 7;
  const int exponent = (code >> 3) & 0xF;
  const int mantissa = code & 0x7;
  if (exponent == 0xF && mantissa == 0x7) return std::nanf("");
  const float magnitude =
      exponent == 0 ? std::ldexp(static_cast<float>(mantissa), -9)
                    : std::ldexp(1.0f + static_cast<float>(mantissa) / 8.0f, exponent - 7);
  return sign ? -magnitude : magnitude;
}

// cvt.rn.satfinite.e4m3x2.f32 for one element: RNE, subnormals in steps of 2^-9, finite
// values (and infinities) beyond the range saturate to +-448, NaN -> 0x7F.
inline std::uint8_t float_to_e4m3_rn_sat(float x) {
  if (std::isnan(x)) return 0x7F;
  const std::uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  const double magnitude = std::fabs(static_cast<double>(x));
  if (magnitude >= 448.0) return sign | 0x7E;
  std::uint32_t code;
  if (magnitude < 0x1p-6) {
    // Subnormal range: the code is the count of 2^-9 steps (8 steps = the smallest normal).
    code = static_cast<std::uint32_t>(std::nearbyint(magnitude * 512.0));
  } else {
    int exponent = 0;
    const double fraction = std::frexp(magnitude, &exponent);  // magnitude = fraction * 2^exponent
    const int unbiased = exponent - 1;                         // magnitude in [2^u, 2^(u+1))
    auto mantissa = static_cast<std::uint32_t>(std::nearbyint((fraction * 2.0 - 1.0) * 8.0));
    std::uint32_t biased = static_cast<std::uint32_t>(unbiased + 7);
    if (mantissa == 8) {
      mantissa = 0;
      ++biased;
    }
    code = (biased << 3) | mantissa;
  }
  if (code > 0x7E) code = 0x7E;  // 464..480 would round to the NaN code: saturate instead
  return static_cast<std::uint8_t>(sign | code);
}

// --- UE8M0 power-of-two scales ---------------------------------------------------------------

// ceil(log2 s) + 127 for a positive normal float, from the bits.
inline std::uint32_t ue8m0_ceil_pow2_bits(float s) {
  return ((std::bit_cast<std::uint32_t>(s) + 0x7FFFFFu) >> 23) & 0xFFu;
}

// 2^(127 - E), exact for E in [1, 253].
inline float ue8m0_inverse_scale(std::uint32_t exponent) {
  return std::bit_cast<float>((254u - exponent) << 23);
}

// 2^(E - 127), exact for E in [1, 254].
inline float ue8m0_scale(std::uint32_t exponent) { return std::bit_cast<float>(exponent << 23); }

// --- FP4 E2M1 ------------------------------------------------------------------------------

inline float e2m1_to_float(std::uint8_t code) {
  static constexpr float kMagnitudes[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  const float magnitude = kMagnitudes[code & 0x7];
  return (code & 0x8) ? -magnitude : magnitude;
}

// cvt.rn.satfinite.e2m1x2.f32 for one element: ties go to the even code (see numerics.cuh for
// the bucket table); the sign bit is the float's, so -0.0 gives 0x8.
inline std::uint8_t float_to_e2m1_rn_sat(float x) {
  const float a = std::fabs(x);
  const unsigned code = static_cast<unsigned>(a > 0.25f) + static_cast<unsigned>(a >= 0.75f) +
                        static_cast<unsigned>(a > 1.25f) + static_cast<unsigned>(a >= 1.75f) +
                        static_cast<unsigned>(a > 2.5f) + static_cast<unsigned>(a >= 3.5f) +
                        static_cast<unsigned>(a > 5.0f);
  return static_cast<std::uint8_t>(code | (std::signbit(x) ? 0x8u : 0x0u));
}

// --- RoPE -----------------------------------------------------------------------------------

struct RotatedPair {
  float even;
  float odd;
};

// The pinned FMA form of numerics.cuh's rope_rotate.
inline RotatedPair rope_rotate(float even, float odd, float cos_v, float sin_v) {
  return {std::fma(even, cos_v, -(odd * sin_v)), std::fma(even, sin_v, odd * cos_v)};
}

}  // namespace zerojit::reference
