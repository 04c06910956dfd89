// CPU reference tests of the C4 compressor stores (spec sections 3 and 4): pooling of the 8
// overlapping state rows, which tokens write, and the fp8_ds_mla and full rows they store. Every
// expected byte is derived by hand.
// The patterns and row checks are dsv4/support/compressor_patterns.hpp.
#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <vector>

#include "dsv4/c4_store/c4_store_params.h"
#include "dsv4/c4_store/reference.hpp"
#include "dsv4/support/compressor_patterns.hpp"

namespace {

using namespace zerojit::dsv4::testing;
namespace ref = zerojit::dsv4::reference;
using zerojit::DType;
using zerojit::dsv4::C4StoreFullKey;
using zerojit::dsv4::C4StoreKey;
using zj::dsv4::C4StoreFullParams;
using zj::dsv4::C4StoreParams;

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
  const auto written =
      ref::c4_store(C4StoreKey{.norm_weight_dtype = DType::bf16}, f.params(cache, kStride, 2));
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
      ref::c4_store(C4StoreKey{.norm_weight_dtype = DType::bf16}, f.params(cache, kStride, 64));
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
  const auto written =
      ref::c4_store(C4StoreKey{.norm_weight_dtype = DType::bf16}, f.params(cache, 1728, 2));
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
    const auto written = ref::c4_store_full(
        C4StoreFullKey{.store_full_fp8 = fp8, .norm_weight_dtype = DType::bf16}, p);
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

}  // namespace
