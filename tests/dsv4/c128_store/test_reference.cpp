// CPU reference tests of the C128 stores (spec sections 6 and 7): pages addressed by the
// compile-time page stride, and the full bf16 row. Every expected byte is derived by hand.
// The patterns and row checks are dsv4/support/compressor_patterns.hpp.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "dsv4/c128_store/c128_store_params.h"
#include "dsv4/c128_store/reference.hpp"
#include "dsv4/support/compressor_patterns.hpp"

namespace {

using namespace zerojit::dsv4::testing;
namespace ref = zerojit::dsv4::reference;
using zerojit::DType;
using zerojit::dsv4::C128StoreFullKey;
using zerojit::dsv4::C128StoreKey;
using zj::dsv4::C128StoreFullParams;
using zj::dsv4::C128StoreParams;

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
        C128StoreKey{
            .kv_block_stride = stride, .norm_weight_dtype = DType::bf16, .kv_cache_block_size = 2},
        c128_store_params(compressed_kv, positions, slot_mapping, kv_slots, weight, cos_sin,
                          cache));
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
      C128StoreKey{
          .kv_block_stride = 1152, .norm_weight_dtype = DType::bf16, .kv_cache_block_size = 1},
      c128_store_params(compressed_kv, positions, slot_mapping, kv_slots, weight, cos_sin, cache));
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
  const auto written = ref::c128_store_full(
      C128StoreFullKey{.store_full_fp8 = false, .norm_weight_dtype = DType::f32}, p);
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

}  // namespace
