// Device-side numeric primitives shared by zerojit's kernels.
//
// Compiled by NVRTC from memory, so this header includes nothing from the CUDA toolkit: every
// conversion is one PTX instruction (or, where a target lacks it, a software routine that is
// bit-identical to that instruction). The CPU references mirror each function in
// kernels/reference/numerics.hpp; keep the two in step.
#pragma once

namespace zj {

typedef signed char i8;
typedef unsigned char u8;
typedef unsigned short u16;
typedef int i32;
typedef unsigned int u32;
typedef long long i64;
typedef unsigned long long u64;

// Storage types for 16-bit floats. Compile keys render a bf16/f16 dtype as these names (see
// zerojit::device_type_name), so kernels are templated on the element type they load.
struct bf16_t {
  u16 bits;
};
struct f16_t {
  u16 bits;
};

// --- BF16 ---------------------------------------------------------------------------------

// Two floats -> packed bf16x2, round to nearest even. `lo` lands in the low half (the lower
// address once stored), which is how the caches lay out consecutive elements.
__device__ __forceinline__ u32 pack_bf16x2_rn(float lo, float hi) {
  u32 packed;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(packed) : "f"(hi), "f"(lo));
  return packed;
}

__device__ __forceinline__ float bf16_bits_to_float(u16 bits) {
  return __uint_as_float(static_cast<u32>(bits) << 16);
}

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(bf16_t v) { return bf16_bits_to_float(v.bits); }

// Round a float to bf16 and back: the value a bf16 store followed by a load would see.
__device__ __forceinline__ float round_to_bf16(float x) {
  return __uint_as_float(pack_bf16x2_rn(x, 0.0f) << 16);
}

__device__ __forceinline__ float bf16x2_low(u32 packed) { return __uint_as_float(packed << 16); }
__device__ __forceinline__ float bf16x2_high(u32 packed) {
  return __uint_as_float(packed & 0xFFFF0000u);
}

// --- FP8 E4M3 (OCP E4M3FN) -----------------------------------------------------------------

// Two floats -> two e4m3 codes, RNE, saturating to +-448, `lo` in the low byte.
__device__ __forceinline__ u16 pack_e4m3x2_rn_sat(float lo, float hi) {
  u16 packed;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(packed) : "f"(hi), "f"(lo));
  return packed;
}

// Two e4m3 codes (low byte first) -> two halves, exact. Returned as the raw f16x2 bits.
__device__ __forceinline__ u32 unpack_e4m3x2_to_f16x2(u16 packed) {
  u32 halves;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(halves) : "h"(packed));
  return halves;
}

// f16x2 -> bf16x2. Exact for every value an e4m3 code can hold (4 significant bits, range
// 2^-9 .. 448), so the e4m3 -> f16 -> bf16 chain never rounds.
__device__ __forceinline__ u32 f16x2_to_bf16x2(u32 halves) {
  float lo, hi;
  asm("{ .reg .f16 l, h; mov.b32 {l, h}, %2; cvt.f32.f16 %0, l; cvt.f32.f16 %1, h; }"
      : "=f"(lo), "=f"(hi)
      : "r"(halves));
  return pack_bf16x2_rn(lo, hi);
}

// --- UE8M0 power-of-two scales ------------------------------------------------------------

// Biased exponent of the smallest power of two >= s, for a positive normal float s:
// ceil(log2 s) + 127, computed exactly on the bits (no log2, no rounding).
__device__ __forceinline__ u32 ue8m0_ceil_pow2_bits(float s) {
  return ((__float_as_uint(s) + 0x7FFFFFu) >> 23) & 0xFFu;
}

// 2^(127 - E): the multiplier that brings a block with scale exponent E into range. Exact for
// E in [1, 253]; the kernels multiply by it instead of dividing.
__device__ __forceinline__ float ue8m0_inverse_scale(u32 exponent) {
  return __uint_as_float((254u - exponent) << 23);
}

// 2^(E - 127) as a float (E in [1, 254]).
__device__ __forceinline__ float ue8m0_scale(u32 exponent) { return __uint_as_float(exponent << 23); }

// --- FP4 E2M1 ------------------------------------------------------------------------------

// One float -> one e2m1 code (sign in bit 3), RNE on the code with the tie rules of the PTX
// instruction cvt.rn.satfinite.e2m1x2.f32: |x| <= 0.25 -> 0, (0.25, 0.75) -> 0.5,
// [0.75, 1.25] -> 1, (1.25, 1.75) -> 1.5, [1.75, 2.5] -> 2, (2.5, 3.5) -> 3, [3.5, 5] -> 4,
// > 5 -> 6. The sign comes from the float's sign bit, so -0.0 and small negatives give 0x8.
// Used on targets without the instruction (sm_90); bit-identical to it for finite inputs.
__device__ __forceinline__ u32 e2m1_rn_sat_software(float x) {
  // Each binade of the E2M1 grid is a uniform step (0.5 below 2, 1 below 4, 2 above), so
  // scaling by the inverse step and adding 1.5 * 2^23 rounds onto the integer grid with the
  // FPU's own round-half-to-even: the same ties as the hardware, in a few instructions.
  const float a = fabsf(x);
  const float inverse_step = a < 2.0f ? 2.0f : (a < 4.0f ? 1.0f : 0.5f);
  const int base = a < 2.0f ? 0 : (a < 4.0f ? 2 : 4);
  const int steps = __float_as_int(__fmaf_rn(a, inverse_step, 12582912.0f)) - 0x4B400000;
  const int code = base + min(steps, 7 - base);  // saturates at 6 (code 7), infinities too
  return static_cast<u32>(code) | ((__float_as_uint(x) >> 28) & 0x8u);
}

// Two floats -> one byte of e2m1 codes, `lo` in the low nibble.
__device__ __forceinline__ u32 pack_e2m1x2_rn_sat(float lo, float hi) {
#if defined(__CUDA_ARCH_FAMILY_SPECIFIC__) && __CUDA_ARCH_FAMILY_SPECIFIC__ >= 1000
  // Blackwell-family targets (sm_100a, sm_100f, sm_120a, ...) have the instruction.
  u32 packed;
  asm("{ .reg .b8 byte; cvt.rn.satfinite.e2m1x2.f32 byte, %1, %2; cvt.u32.u8 %0, byte; }"
      : "=r"(packed)
      : "f"(hi), "f"(lo));
  return packed;
#else
  return e2m1_rn_sat_software(lo) | (e2m1_rn_sat_software(hi) << 4);
#endif
}

// --- Fast math used by the compressor kernels ------------------------------------------------

__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ float rsqrt_approx(float x) {
  float y;
  asm("rsqrt.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// --- RoPE -----------------------------------------------------------------------------------

// GPT-J interleaved rotation of one (even, odd) pair. The FMA form is pinned here and
// mirrored by the CPU reference with std::fma, so both round identically.
struct RotatedPair {
  float even;
  float odd;
};

__device__ __forceinline__ RotatedPair rope_rotate(float even, float odd, float cos_v, float sin_v) {
  RotatedPair r;
  r.even = __fmaf_rn(even, cos_v, -__fmul_rn(odd, sin_v));
  r.odd = __fmaf_rn(even, sin_v, __fmul_rn(odd, cos_v));
  return r;
}

}  // namespace zj
