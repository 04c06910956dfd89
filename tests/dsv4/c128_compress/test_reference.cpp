// CPU reference test of the C128 compress kernel (spec section 5): 128 state rows pooled with
// equal scores and with one dominant score, by hand.
// The patterns and row checks are dsv4/support/compressor_patterns.hpp.
#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <vector>

#include "dsv4/c128_compress/c128_compress_params.h"
#include "dsv4/c128_compress/reference.hpp"
#include "dsv4/support/compressor_patterns.hpp"

namespace {

using namespace zerojit::dsv4::testing;
namespace ref = zerojit::dsv4::reference;
using zerojit::dsv4::C128CompressKey;
using zj::dsv4::C128CompressParams;

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
  const auto rows = ref::c128_compress(C128CompressKey{.head_size = 512}, p);
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
  EXPECT_THROW(ref::c128_compress(C128CompressKey{.head_size = 512}, p), std::invalid_argument);
}

}  // namespace
