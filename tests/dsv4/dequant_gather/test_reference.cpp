// CPU reference of the dequantize-and-gather kernel (spec section 2) on hand-computed pages:
// e4m3 codes times UE8M0 scales decode to known bf16 bits, the bf16 tail is copied, and only
// the gathered rows of the workspace change.
#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <vector>

#include "dsv4/dequant_gather/dequant_gather_params.h"
#include "dsv4/dequant_gather/reference.hpp"

namespace {

using zerojit::dsv4::DequantGatherKey;

constexpr int kDim = 512;
constexpr int kRowBytes = 576;
constexpr unsigned char kSentinel = 0xA5;
constexpr std::uint16_t kSentinelBf16 = 0xA5A5;

// A paged fp8_ds_mla cache of `pages` pages of B rows, with a page stride larger than B * 584
// (bytes past B * 584 stay sentinel, as in a shared page layout).
struct Cache {
  int block_size;
  long long page_stride;
  std::vector<unsigned char> bytes;

  Cache(int pages, int block, long long stride)
      : block_size(block),
        page_stride(stride),
        bytes(static_cast<std::size_t>(pages * stride), kSentinel) {}

  unsigned char* data(int page, int row) {
    return bytes.data() + page * page_stride + row * kRowBytes;
  }
  unsigned char* scales(int page, int row) {
    return bytes.data() + page * page_stride + block_size * kRowBytes + row * 8;
  }
  // A row whose 448 codes are all `code` under one scale exponent, with tail element j = tag+j.
  void fill_row(int page, int row, unsigned char code, unsigned char exponent,
                std::uint16_t tail_tag) {
    for (int d = 0; d < 448; ++d) data(page, row)[d] = code;
    for (int k = 0; k < 7; ++k) scales(page, row)[k] = exponent;
    scales(page, row)[7] = 0;
    for (int j = 0; j < 64; ++j) {
      const auto value = static_cast<std::uint16_t>(tail_tag + j);
      data(page, row)[448 + 2 * j] = static_cast<unsigned char>(value & 0xFF);
      data(page, row)[449 + 2 * j] = static_cast<unsigned char>(value >> 8);
    }
  }
};

// The workspace [num_reqs, M, 512] with one spare sentinel row after each request's M rows.
struct Workspace {
  int num_reqs;
  int rows;
  std::vector<std::uint16_t> out;

  Workspace(int reqs, int m)
      : num_reqs(reqs),
        rows(m),
        out(static_cast<std::size_t>(reqs * (m + 1) * kDim), kSentinelBf16) {}

  std::uint16_t at(int req, int row, int dim) const {
    return out[static_cast<std::size_t>((req * (rows + 1) + row) * kDim + dim)];
  }
  bool row_untouched(int req, int row) const {
    for (int d = 0; d < kDim; ++d) {
      if (at(req, row, d) != kSentinelBf16) return false;
    }
    return true;
  }
};

zj::dsv4::DequantGatherParams make_params(Workspace& w, Cache& c, const std::vector<int>& seq_lens,
                                          const std::vector<int>* gather_lens,
                                          const std::vector<int>& block_table,
                                          long long table_stride, long long max_blocks,
                                          long long offset) {
  zj::dsv4::DequantGatherParams p{};
  p.out = w.out.data();
  p.out_req_stride = static_cast<long long>(w.rows + 1) * kDim;
  p.out_row_stride = kDim;
  p.num_rows_out = w.rows;
  p.k_cache = c.bytes.data();
  p.page_stride_bytes = c.page_stride;
  p.seq_lens = seq_lens.data();
  p.gather_lens = gather_lens ? gather_lens->data() : nullptr;
  p.block_table = block_table.data();
  p.block_table_row_stride = table_stride;
  p.max_blocks = max_blocks;
  p.offset = offset;
  p.num_reqs = static_cast<long long>(seq_lens.size());
  p.num_workers = 1;
  return p;
}

// One row with a different code in each of 8 consecutive dims and a different exponent in each
// 64-dim group; every output is bf16 bits worked out by hand (value * 2^(E - 127)).
TEST(DequantGatherReference, DecodesKnownCodesScalesAndTail) {
  Cache cache(3, 2, 1728);  // B = 2: the default page stride round_up(2 * 584, 576)
  // codes: 1.0, -1.0, 2.0, 2^-9 (smallest subnormal), 448, +0, -0, 1.25
  const unsigned char codes[8] = {0x38, 0xB8, 0x40, 0x01, 0x7E, 0x00, 0x80, 0x3A};
  const unsigned char exponents[7] = {127, 128, 120, 0, 134, 126, 100};
  const std::uint16_t expected[7][8] = {
      {0x3F80, 0xBF80, 0x4000, 0x3B00, 0x43E0, 0x0000, 0x8000, 0x3FA0},  // x 1
      {0x4000, 0xC000, 0x4080, 0x3B80, 0x4460, 0x0000, 0x8000, 0x4020},  // x 2
      {0x3C00, 0xBC00, 0x3C80, 0x3780, 0x4060, 0x0000, 0x8000, 0x3C20},  // x 2^-7
      {0x0000, 0x8000, 0x0000, 0x0000, 0x0000, 0x0000, 0x8000, 0x0000},  // E = 0: +-0
      {0x4300, 0xC300, 0x4380, 0x3E80, 0x4760, 0x0000, 0x8000, 0x4320},  // x 2^7
      {0x3F00, 0xBF00, 0x3F80, 0x3A80, 0x4360, 0x0000, 0x8000, 0x3F20},  // x 2^-1
      {0x3200, 0xB200, 0x3280, 0x2D80, 0x3660, 0x0000, 0x8000, 0x3220},  // x 2^-27
  };
  // Position 0 -> page 2 row 0 (the hand-made row), 1 -> page 2 row 1, 2 -> page 0 row 0.
  for (int d = 0; d < 448; ++d) cache.data(2, 0)[d] = codes[d % 8];
  for (int k = 0; k < 7; ++k) cache.scales(2, 0)[k] = exponents[k];
  cache.scales(2, 0)[7] = 0;
  for (int j = 0; j < 64; ++j) {
    cache.data(2, 0)[448 + 2 * j] = static_cast<unsigned char>(j);
    cache.data(2, 0)[449 + 2 * j] = static_cast<unsigned char>(0x40 + j);
  }
  cache.fill_row(2, 1, 0x40, 127, 0x1000);  // all 2.0
  cache.fill_row(0, 0, 0x38, 130, 0x2000);  // all 8.0

  Workspace work(1, 4);
  const std::vector<int> seq_lens = {3};
  const std::vector<int> table = {2, 0};
  zerojit::dsv4::reference::dequant_gather(
      DequantGatherKey{2, false}, make_params(work, cache, seq_lens, nullptr, table, 2, 2, 0));

  for (int d = 0; d < 448; ++d) {
    EXPECT_EQ(work.at(0, 0, d), expected[d / 64][d % 8]) << "dim " << d;
  }
  for (int j = 0; j < 64; ++j) {
    EXPECT_EQ(work.at(0, 0, 448 + j), static_cast<std::uint16_t>(((0x40 + j) << 8) | j));
  }
  for (int d = 0; d < 448; ++d) {
    EXPECT_EQ(work.at(0, 1, d), 0x4000);  // 2.0
    EXPECT_EQ(work.at(0, 2, d), 0x4100);  // 8.0
  }
  for (int j = 0; j < 64; ++j) {
    EXPECT_EQ(work.at(0, 1, 448 + j), 0x1000 + j);
    EXPECT_EQ(work.at(0, 2, 448 + j), 0x2000 + j);
  }
  EXPECT_TRUE(work.row_untouched(0, 3));
  EXPECT_TRUE(work.row_untouched(0, 4));  // the spare row past M
}

// A scale byte of 0 zeroes its 64-dim group (keeping the code's sign), and only that group.
TEST(DequantGatherReference, ScaleExponentZeroGivesSignedZero) {
  Cache cache(1, 1, 1152);                  // B = 1: round_up(584, 576) = 1152
  cache.fill_row(0, 0, 0xC8, 127, 0x3F80);  // -4.0 everywhere
  cache.scales(0, 0)[5] = 0;
  Workspace work(1, 1);
  const std::vector<int> seq_lens = {1};
  const std::vector<int> table = {0};
  zerojit::dsv4::reference::dequant_gather(
      DequantGatherKey{1, false}, make_params(work, cache, seq_lens, nullptr, table, 1, 1, 0));
  for (int d = 0; d < 448; ++d) {
    EXPECT_EQ(work.at(0, 0, d), d / 64 == 5 ? 0x8000 : 0xC080) << "dim " << d;
  }
}

// gather_lens takes the last G positions: positions 3 and 4 of 5 land in rows offset + 0 and
// offset + 1; every other row, including rows below the offset, keeps the sentinel.
TEST(DequantGatherReference, GatherLensSelectsTheTailAtTheOffset) {
  Cache cache(3, 2, 1728);
  // Page p row r holds code 0x38 (1.0) at exponent 120 + 2p + r and tail tag 0x100 * (2p + r).
  for (int p = 0; p < 3; ++p) {
    for (int r = 0; r < 2; ++r) {
      cache.fill_row(p, r, 0x38, static_cast<unsigned char>(120 + 2 * p + r),
                     static_cast<std::uint16_t>(0x100 * (2 * p + r)));
    }
  }
  Workspace work(1, 8);
  const std::vector<int> seq_lens = {5};
  const std::vector<int> gather_lens = {2};
  const std::vector<int> table = {1, 2, 0, 7};  // columns 0..2 used; position 3 -> page 2 row 1
  zerojit::dsv4::reference::dequant_gather(
      DequantGatherKey{2, true}, make_params(work, cache, seq_lens, &gather_lens, table, 4, 3, 3));
  for (int row = 0; row < 9; ++row) {
    if (row == 3 || row == 4) continue;
    EXPECT_TRUE(work.row_untouched(0, row)) << "row " << row;
  }
  // Row 3 = position 3 = column 1 (page 2), row 1: exponent 125 -> 2^-2 = 0x3E80.
  // Row 4 = position 4 = column 2 (page 0), row 0: exponent 120 -> 2^-7 = 0x3C00.
  for (int d = 0; d < 448; ++d) {
    EXPECT_EQ(work.at(0, 3, d), 0x3E80);
    EXPECT_EQ(work.at(0, 4, d), 0x3C00);
  }
  EXPECT_EQ(work.at(0, 3, 448), 0x500);
  EXPECT_EQ(work.at(0, 4, 511), 63);
}

// Several requests with their own block-table rows and workspace slabs; destinations at or
// past M, block-table columns past max_blocks and negative pages are skipped.
TEST(DequantGatherReference, SkipsRowsOutsideTheWorkspaceOrTable) {
  Cache cache(2, 2, 1728);
  cache.fill_row(0, 0, 0x38, 127, 0x0100);
  cache.fill_row(0, 1, 0x38, 128, 0x0200);
  cache.fill_row(1, 0, 0x38, 129, 0x0300);
  cache.fill_row(1, 1, 0x38, 130, 0x0400);
  Workspace work(2, 6);
  const std::vector<int> seq_lens = {6, 4};
  // Request 0: column 0 is a negative page, column 1 is page 1, column 2 is past max_blocks.
  // Request 1: pages 1 then 0.
  const std::vector<int> table = {-1, 1, 0, 1, 0, 5};
  zerojit::dsv4::reference::dequant_gather(
      DequantGatherKey{2, false}, make_params(work, cache, seq_lens, nullptr, table, 3, 2, 2));
  // Request 0, offset 2: positions 0, 1 (page -1) leave rows 2, 3 alone; positions 2, 3 fill
  // rows 4, 5 from page 1; positions 4, 5 would land at rows 6, 7 (>= M) and are skipped.
  for (int row = 0; row < 4; ++row) EXPECT_TRUE(work.row_untouched(0, row)) << row;
  EXPECT_EQ(work.at(0, 4, 0), 0x4080);  // 1 * 2^2
  EXPECT_EQ(work.at(0, 4, 448), 0x0300);
  EXPECT_EQ(work.at(0, 5, 0), 0x4100);  // 1 * 2^3
  EXPECT_EQ(work.at(0, 5, 448), 0x0400);
  EXPECT_TRUE(work.row_untouched(0, 6));  // spare row past M
  // Request 1, its own table row: positions 0..3 -> page 1 rows 0, 1, page 0 rows 0, 1.
  EXPECT_TRUE(work.row_untouched(1, 0));
  EXPECT_TRUE(work.row_untouched(1, 1));
  EXPECT_EQ(work.at(1, 2, 0), 0x4080);
  EXPECT_EQ(work.at(1, 3, 0), 0x4100);
  EXPECT_EQ(work.at(1, 4, 0), 0x3F80);
  EXPECT_EQ(work.at(1, 5, 0), 0x4000);
  EXPECT_EQ(work.at(1, 5, 511), 0x0200 + 63);
  EXPECT_TRUE(work.row_untouched(1, 6));
}

// A column past max_blocks is skipped even when the table row physically continues, and a
// gather longer than the sequence skips the positions below 0.
TEST(DequantGatherReference, SkipsColumnsPastMaxBlocksAndNegativePositions) {
  Cache cache(2, 1, 1152);
  cache.fill_row(0, 0, 0x38, 127, 0x0100);
  cache.fill_row(1, 0, 0x40, 127, 0x0200);
  Workspace work(1, 4);
  const std::vector<int> seq_lens = {3};
  const std::vector<int> gather_lens = {4};     // start = -1
  const std::vector<int> table = {0, 1, 0, 1};  // max_blocks 2: column 2 is outside
  zerojit::dsv4::reference::dequant_gather(
      DequantGatherKey{1, true}, make_params(work, cache, seq_lens, &gather_lens, table, 4, 2, 0));
  EXPECT_TRUE(work.row_untouched(0, 0));  // position -1
  EXPECT_EQ(work.at(0, 1, 0), 0x3F80);    // position 0 -> page 0
  EXPECT_EQ(work.at(0, 2, 0), 0x4000);    // position 1 -> page 1
  EXPECT_TRUE(work.row_untouched(0, 3));  // position 2 -> column 2 >= max_blocks
}

TEST(DequantGatherReference, RejectsBadArguments) {
  Cache cache(1, 1, 1152);
  Workspace work(1, 1);
  const std::vector<int> seq_lens = {1};
  const std::vector<int> table = {0};
  const auto params = make_params(work, cache, seq_lens, nullptr, table, 1, 1, 0);
  EXPECT_THROW(zerojit::dsv4::reference::dequant_gather(DequantGatherKey{0, false}, params),
               std::invalid_argument);
  EXPECT_THROW(zerojit::dsv4::reference::dequant_gather(DequantGatherKey{1, true}, params),
               std::invalid_argument);
}

TEST(DequantGatherParams, NumWorkersGiveEachWarpAboutTenRowsInAGridOfAtLeast512Ctas) {
  using zj::dsv4::dequant_gather_num_workers;
  static_assert(dequant_gather_num_workers(32, 0, 2) == 8);        // a row a warp: ceil(32 / 4)
  static_assert(dequant_gather_num_workers(4096, 0, 2) == 256);    // ceil(512 / 2) CTAs a request
  static_assert(dequant_gather_num_workers(128, 0, 64) == 8);      // ceil(512 / 64)
  static_assert(dequant_gather_num_workers(512, 0, 64) == 13);     // ceil(512 / 40)
  static_assert(dequant_gather_num_workers(16384, 0, 64) == 410);  // ceil(16384 / 40)
  static_assert(dequant_gather_num_workers(65536, 0, 8) == 1024);  // the cap
  static_assert(dequant_gather_num_workers(130, 128, 3) == 1);     // 2 rows left
  static_assert(dequant_gather_num_workers(10, 10, 3) == 1);       // no rows left: still 1
  static_assert(dequant_gather_num_workers(100, 0, 0) == 1);
  SUCCEED();
}

}  // namespace
