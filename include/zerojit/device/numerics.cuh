// Device-side numeric primitives shared by zerojit's kernels and available to a project's
// ("zerojit/device/numerics.cuh", embedded with zerojit_embed(... DEVICE_HEADERS)).
//
// Compiled by NVRTC from memory, so this header includes nothing from the CUDA toolkit: every
// conversion is one PTX instruction (or, where a target lacks it, a software routine that is
// bit-identical to that instruction). The CPU references mirror each function in
// kernels/reference/numerics.hpp; keep the two in step.
#pragma once

#include "zerojit/device/types.cuh"

namespace zj {

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

// The 2 Words bf16 values of Words packed pairs as floats, in order (the low half first).
template <int Words>
__device__ __forceinline__ void unpack_bf16x2(const u32 (&packed)[Words], float (&out)[2 * Words]) {
#pragma unroll
  for (int k = 0; k < Words; ++k) {
    out[2 * k] = bf16x2_low(packed[k]);
    out[2 * k + 1] = bf16x2_high(packed[k]);
  }
}

// Packed bf16x2 arithmetic, one rounding to nearest even per half. min/max return the other
// operand when one is NaN (IEEE minNum/maxNum, like fminf/fmaxf).
__device__ __forceinline__ u32 mul_bf16x2_rn(u32 a, u32 b) {
  u32 d;
  asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}

__device__ __forceinline__ u32 fma_bf16x2_rn(u32 a, u32 b, u32 c) {
  u32 d;
  asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}

__device__ __forceinline__ u32 max_bf16x2(u32 a, u32 b) {
  u32 d;
  asm("max.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}

__device__ __forceinline__ u32 min_bf16x2(u32 a, u32 b) {
  u32 d;
  asm("min.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
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
__device__ __forceinline__ float ue8m0_scale(u32 exponent) {
  return __uint_as_float(exponent << 23);
}

// --- FP4 E2M1 ------------------------------------------------------------------------------
//
// MXFP4 quantizes bf16 values x of a 32-element block with scale exponent E to the codes of
// cvt.rn.satfinite.e2m1x2.f32(x * 2^(127-E)): round half to even on the code, |x| <= 0.25 -> 0,
// (0.25, 0.75) -> 0.5, [0.75, 1.25] -> 1, (1.25, 1.75) -> 1.5, [1.75, 2.5] -> 2, (2.5, 3.5) -> 3,
// [3.5, 5] -> 4, > 5 -> 6; the sign bit (bit 3) is the input's, so -0.0 gives 0x8.
// Blackwell-family targets (sm_100a, sm_100f, sm_120a, ...) have that instruction. Hopper does
// not, and a per-element software rounding costs more ALU time than the kernel has per byte,
// so there the codes come from packed bf16x2 arithmetic, two elements per instruction:
//
// With a = |x| * 2^(127-E) (at most 6 by the choice of E: a bf16 amax just above 6 * 2^k is
// 1 % above it, far more than the rounding of amax * f32(1/6)), the E2M1 grid has step 1/2
// below 2, 1 below 4 and 2 above. Two bf16 FMAs (exact product and sum, one rounding to
// nearest even) round a onto such grids, because a bf16 step is 2^-7 of its binade:
//   fine   = 64 + a: the steps of [64, 128) are 1/2, so fine = 64 + rint(2a)/2, whose bit
//            pattern is 0x4280 + rint(2a): the code for a < 2;
//   coarse = 252 + a: steps of 1 below 256 and 2 above, so coarse = 252 + rint(a) for a < 4
//            and 252 + 2 rint(a/2) beyond, whose bit patterns are 0x437A + (2 + rint(a)) and
//            0x437A + (4 + rint(a/2)): the code for a >= 2 (the wider step compresses the
//            pattern exactly as the E2M1 binade does).
// The code is the smaller of the two (each overshoots outside its range), and each rint is
// half-to-even on the code's own parity, so the ties agree with the instruction. Two FMAs, a
// subtraction and a minimum for two elements, bit-identical to the instruction on every finite
// input (tests/dsv4/indexer_q/test_e2m1_identity.cpp checks every bf16 x and every E). The codes
// and the signs then go into their nibbles eight at a time, by byte permutations of whole words
// (pack_e2m1x8_scaled): placing costs ~1.5 instructions an element, where per-pair shifts and
// masks cost ~2.4 and left the sm_90 kernel ALU-bound (81 % of copy, now 93 %).

// The multiplier of one MXFP4 block with scale exponent E (1 <= E <= 253), as f32 for the
// instruction and as bf16x2 for the FMAs (2^(127-E) is a normal bf16 for every such E).
struct E2m1BlockScale {
  float inverse;   // 2^(127-E)
  u32 inverse_x2;  // bf16x2 {2^(127-E), 2^(127-E)}
};

__device__ __forceinline__ E2m1BlockScale e2m1_block_scale(u32 exponent) {
  E2m1BlockScale s;
  s.inverse = __uint_as_float((254u - exponent) << 23);
  s.inverse_x2 = ((254u - exponent) << 7) * 0x00010001u;
  return s;
}

__device__ __forceinline__ u32 byte_perm(u32 a, u32 b, u32 selector) {
  u32 d;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(selector));
  return d;
}

// One packed bf16 pair -> 0x4280 + code in each half (the magnitude's code, sign not yet
// applied). The Hopper path described above; needs |x| * 2^(127-E) <= 6.
__device__ __forceinline__ u32 e2m1x2_nearest_from_bf16x2(u32 pair, const E2m1BlockScale& s) {
  constexpr u32 kFineBase = 0x42804280u;      // bf16x2 {64, 64}
  constexpr u32 kCoarseBase = 0x437C437Cu;    // bf16x2 {252, 252}
  constexpr u32 kCoarseToFine = 0x00FA00FAu;  // 0x437A + code -> 0x4280 + code
  const u32 magnitude = pair & 0x7FFF7FFFu;
  const u32 fine = fma_bf16x2_rn(magnitude, s.inverse_x2, kFineBase);
  const u32 coarse = fma_bf16x2_rn(magnitude, s.inverse_x2, kCoarseBase);
  // Both are positive bf16 values, so the smaller one also has the smaller bit pattern.
  return min_bf16x2(fine, coarse - kCoarseToFine);
}

// Bits of `a` where `mask` is set, of `b` elsewhere (one LOP3).
__device__ __forceinline__ u32 select_bits(u32 a, u32 b, u32 mask) {
  return (a & mask) | (b & ~mask);
}

// Four packed bf16 pairs (elements 0..7, element 2k in the low half of pairs[k]) times the
// block's 2^(127-E) -> eight e2m1 codes in one word, element i in bits [4i, 4i + 4).
__device__ __forceinline__ u32 pack_e2m1x8_scaled(const u32 (&pairs)[4], const E2m1BlockScale& s) {
#if defined(__CUDA_ARCH_FAMILY_SPECIFIC__) && __CUDA_ARCH_FAMILY_SPECIFIC__ >= 1000
  u32 word = 0u;
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    u32 byte;
    asm("{ .reg .b8 b; cvt.rn.satfinite.e2m1x2.f32 b, %1, %2; cvt.u32.u8 %0, b; }"
        : "=r"(byte)
        : "f"(bf16x2_high(pairs[k]) * s.inverse), "f"(bf16x2_low(pairs[k]) * s.inverse));
    word |= byte << (8 * k);
  }
  return word;
#else
  // Element j's code is byte 2 (j % 2) of nearest[j / 2] (0x80 + code: the code in bits 0-2,
  // bit 7 set), its sign bit 7 of byte 2 (j % 2) + 1 of pairs[j / 2]. Byte permutations gather
  // the even elements' bytes into one word and the odd elements' into another (byte i holding
  // element 2i or 2i + 1), so whole words assemble the nibbles: no per-element shifts.
  u32 nearest[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) nearest[k] = e2m1x2_nearest_from_bf16x2(pairs[k], s);
  const u32 codes_0213 = byte_perm(nearest[0], nearest[1], 0x6240u);
  const u32 codes_4657 = byte_perm(nearest[2], nearest[3], 0x6240u);
  const u32 even_codes = byte_perm(codes_0213, codes_4657, 0x5410u);
  const u32 odd_codes = byte_perm(codes_0213, codes_4657, 0x7632u);
  const u32 signs_0213 = byte_perm(pairs[0], pairs[1], 0x7351u);
  const u32 signs_4657 = byte_perm(pairs[2], pairs[3], 0x7351u);
  const u32 even_signs = byte_perm(signs_0213, signs_4657, 0x5410u);
  const u32 odd_signs = byte_perm(signs_0213, signs_4657, 0x7632u);
  // Bits 0-2 even code, 4-6 odd code. The sum never carries (the odd word's set bit 7 lands on
  // bit 3 of the next byte, the even word's is bit 7 of its own; both are replaced below).
  const u32 magnitudes = (odd_codes << 4) + even_codes;
  const u32 signs = select_bits(even_signs >> 4, odd_signs, 0x08080808u);  // bits 3 and 7
  return select_bits(signs, magnitudes, 0x88888888u);
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

__device__ __forceinline__ RotatedPair rope_rotate(float even, float odd, float cos_v,
                                                   float sin_v) {
  RotatedPair r;
  r.even = __fmaf_rn(even, cos_v, -__fmul_rn(odd, sin_v));
  r.odd = __fmaf_rn(even, sin_v, __fmul_rn(odd, cos_v));
  return r;
}

}  // namespace zj
