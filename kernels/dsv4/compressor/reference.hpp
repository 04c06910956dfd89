// The shared stages of the CPU references of the five DSv4 compressor kernels (spec sections
// 3-7): softmax pooling, the post-pooling stages (RMSNorm, the fp8_ds_mla and full row stores),
// and the tolerance-aware comparisons that GPU tests use to check a kernel's output against a
// reference.
//
// The whole-kernel references live beside their kernels (c4_store/reference.hpp,
// c128_compress/reference.hpp, c128_store/reference.hpp). Each takes the key the kernel was
// compiled for, so that the compile-time values a reference uses are the key's own and cannot
// drift from a restated copy, plus the kernel's own argument block (filled with HOST pointers).
// Each writes exactly the bytes the kernel writes and nothing else, and returns the rows it
// wrote (kv slots for the stores, token indices for the C128 compress), in token order, ready
// to hand to the comparisons.
//
// Numerics (see spec 0.2, 10, 11):
//  * Pooling is two-pass in double (max, then sum of exp(sc - max)): the softmax value itself,
//    with no rounding of its own worth mentioning. The kernels use ex2.approx, float sums and
//    (C128) a split reduction, so no float recurrence could mirror them all; the comparisons
//    measure the kernels' own error (~1e-6 relative) against this ground truth instead.
//  * RMSNorm sums squares in double and takes 1 / sqrt in double (the kernels: float sums and
//    rsqrt.approx); y = (x * rrms) * weight in float, as on the device.
//  * Given y, the store stages are bit-exact mirrors of the device: bf16 rounding before
//    quantization, amax / 448 as an IEEE float division, UE8M0 ceil-pow2 exponents, clamp then
//    e4m3 RNE-saturate, the pinned RoPE FMA form, pad byte 7 = 0.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "dsv4/compressor/compressor_params.h"
#include "zerojit/dtype.hpp"

namespace zerojit::dsv4::reference {

// The NormWeightT template argument of the kernels.
enum class NormWeightType { kFloat32, kBFloat16 };

// --- Helpers shared by the whole-kernel references ------------------------------------------

// The NormWeightT a key's norm_weight_dtype selects: f32 loads float weights, any other dtype
// (dispatch accepts only bf16 besides f32) bf16.
NormWeightType norm_weight_type(DType norm_weight_dtype);

// Throws std::invalid_argument("<kernel>: <what>") for a configuration the launcher must
// reject, so that every reference names the kernel and the argument the same way.
[[noreturn]] void throw_invalid_argument(const char* kernel, const std::string& what);

// One pooled row's contribution to one element: its kv value and its score.
struct PoolTerm {
  double kv;
  double score;
};

// Softmax pooling of `count` terms for one element, two-pass in double (see Numerics above):
// the C4 stores and the C128 compress pool the same way over different rows.
float softmax_pool(const PoolTerm* terms, int count);

// --- Stages after pooling ----------------------------------------------------------------------

// y[e] = (x[e] * rrms) * weight[e] over 512 dims, rrms = 1 / sqrt(mean(x^2) + eps).
void rms_norm_row(const float* x, const void* weight, NormWeightType weight_type, float eps,
                  float* y);

// Writes one fp8_ds_mla row for y[512] (not yet rotated) at kv_slot: quantizes dims 0..447 in
// 7 blocks of 64, rotates dims 448..511 with cos_sin_row[0..32) / [32..64), stores bf16 there,
// the 7 scale exponents and the zero pad byte. Bit-exact with the kernels given y.
void store_ds_mla_row(const float* y, const float* cos_sin_row, unsigned char* k_cache,
                      long long page_stride_bytes, long long kv_cache_block_size,
                      long long kv_slot);

// Writes one full row for y[512] (not yet rotated) at kv_slot: bf16 (1024 bytes) or, with
// store_full_fp8, e4m3 of bf16_rn(v) * (1 / fp8_scale) (512 bytes). Bit-exact given y.
void store_full_row(const float* y, const float* cos_sin_row, unsigned char* k_cache,
                    long long page_stride_bytes, long long row_stride_bytes,
                    long long kv_cache_block_size, long long kv_slot, bool store_full_fp8,
                    float fp8_scale);

// --- Comparisons for GPU tests -----------------------------------------------------------------
// Each compares a kernel's output buffer (`actual`) with the reference's (`expected`), both
// starting from the same initial contents (e.g. a 0xA5 sentinel): bytes outside the listed rows
// must be identical; the listed rows are compared with the tolerances below. Returns an empty
// string when they agree, else a description of the first mismatch (row, dim, expected,
// actual). Rows must be listed once each; a slot written by two tokens is a race on the GPU.
//
// Why tolerances at all: pooling and norm on the GPU use ex2.approx / rsqrt.approx and float
// sums, so y differs from the reference by ~1e-6 relative. That moves a bf16 rounding (and so
// an e4m3 code) only when y sits within 1e-6 of a rounding boundary: a one-step "rounding
// flip", roughly once per 1e5 values, which a value tolerance of 1e-2 cannot absorb (an e4m3
// step is 6-12 %). Flips are therefore allowed, but counted and capped, so that a systematic
// rounding error (which flips half the values) still fails.

struct DsMlaTolerance {
  double value_rtol = 1e-2;  // dequantized nope values and bf16 rope values
  // RoPE values come from e*c - o*s, which can cancel: allow this fraction of the row's largest
  // expected rope magnitude on top of the relative tolerance.
  double rope_atol_fraction = 1e-3;
  // Nope values that may differ by one e4m3 step: allowance + fraction * values compared.
  long long rounding_flip_allowance = 2;
  double rounding_flip_fraction = 1e-3;
};

// fp8_ds_mla pages. A scale exponent may differ by +-1 only where the block's amax sits at a
// power-of-two boundary (amax / 448 within ~1e-5 of 2^k). From the bytes that shows as: the
// side with the smaller exponent has its largest code at 448 and the other at 224; the block's
// dequantized values must still agree within one step of the coarser scale.
std::string compare_ds_mla_rows(std::span<const std::uint8_t> expected,
                                std::span<const std::uint8_t> actual, long long page_stride_bytes,
                                long long kv_cache_block_size, std::span<const long long> kv_slots,
                                const DsMlaTolerance& tolerance = {});

struct FullRowTolerance {
  double value_rtol = 1e-2;
  // Absolute slack as a fraction of the row's largest expected magnitude (RoPE cancellation,
  // values near zero).
  double atol_fraction = 1e-3;
  long long rounding_flip_allowance = 2;  // e4m3 rows: one-step code differences allowed
  double rounding_flip_fraction = 1e-3;
};

// Full rows (bf16: 1024 bytes, e4m3: 512 bytes a row). e4m3 codes are compared as code values
// (the per-tensor scale is common to both sides).
std::string compare_full_rows(std::span<const std::uint8_t> expected,
                              std::span<const std::uint8_t> actual, long long page_stride_bytes,
                              long long row_stride_bytes, long long kv_cache_block_size,
                              std::span<const long long> kv_slots, bool store_full_fp8,
                              const FullRowTolerance& tolerance = {});

// compressed_kv [rows, row_length] f32. A pooled value is a convex combination of the rows' kv
// values, so the GPU's error is bounded by (relative error of its weights and sums) x (the
// largest |kv| pooled): ex2.approx is within ~2 ulp (2.4e-7), the float sums of 8 and 16 terms
// and the rescales add a few ulp, ~1e-6 in all. Near-cancelling columns make a per-element
// relative bound meaningless, so the absolute slack is a fraction of the row's largest
// expected magnitude; 1e-5 leaves a 10x margin. Unlisted rows must be bit-identical.
struct CompressedKvTolerance {
  double rtol = 1e-5;
  double atol_fraction = 1e-5;
};

std::string compare_compressed_kv(std::span<const float> expected, std::span<const float> actual,
                                  long long row_length, std::span<const long long> rows,
                                  const CompressedKvTolerance& tolerance = {});

}  // namespace zerojit::dsv4::reference
