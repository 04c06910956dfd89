// CPU reference of the DCP top-k exchange (spec section 12): candidate packing on hand-made
// inputs with exact expected bytes, the sharding maps, the stable global selector, and the
// whole exchange simulated on one machine against the exact top-k of the unsharded logits.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <limits>
#include <random>
#include <set>
#include <stdexcept>
#include <vector>

#include "dsv4/dcp_pack/dcp_pack_params.h"
#include "dsv4/dcp_pack/reference.hpp"

namespace {

using zerojit::dsv4::DcpPackKey;
using zerojit::dsv4::reference::dcp_candidate_id;
using zerojit::dsv4::reference::dcp_candidate_key;
using zerojit::dsv4::reference::dcp_exact_topk;
using zerojit::dsv4::reference::dcp_global_position;
using zerojit::dsv4::reference::dcp_local_width;
using zerojit::dsv4::reference::dcp_pack;
using zerojit::dsv4::reference::dcp_score_order_bits;
using zerojit::dsv4::reference::dcp_select_global_topk;
using zerojit::dsv4::reference::dcp_shard_position;
using zj::dsv4::DcpPackParams;

constexpr std::uint32_t kSentinelBits = 0x7FA5A5A5u;  // a NaN no kernel path produces
constexpr std::uint32_t kNegativeInfinityBits = 0xFF800000u;
constexpr std::uint32_t kMinusOneBits = 0xBF800000u;
constexpr float kInfinity = std::numeric_limits<float>::infinity();

float from_bits(std::uint32_t bits) { return std::bit_cast<float>(bits); }
std::uint32_t bits_of(float value) { return std::bit_cast<std::uint32_t>(value); }

std::vector<float> sentinel_buffer(std::size_t size) {
  return std::vector<float>(size, from_bits(kSentinelBits));
}

// One contiguous problem: logits [rows, num_cols], topk_indices [rows, topk], packed
// [rows, topk, 2] filled with the sentinel.
struct PackProblem {
  std::vector<float> logits;
  std::vector<int> indices;
  std::vector<int> row_starts;
  std::vector<float> packed;
  DcpPackParams params{};

  PackProblem(std::vector<float> logits_in, long long num_cols, std::vector<int> indices_in,
              int topk, int rank)
      : logits(std::move(logits_in)), indices(std::move(indices_in)) {
    const auto rows = static_cast<long long>(indices.size()) / topk;
    packed = sentinel_buffer(static_cast<std::size_t>(rows * topk * 2));
    params.logits = logits.data();
    params.logits_stride_row = num_cols;
    params.logits_stride_col = 1;
    params.num_cols = num_cols;
    params.topk_indices = indices.data();
    params.topk_indices_stride_row = topk;
    params.topk_indices_stride_col = 1;
    params.row_starts = nullptr;
    params.packed = packed.data();
    params.packed_stride_row = 2LL * topk;
    params.packed_stride_col = 2;
    params.packed_stride_pair = 1;
    params.num_rows = rows;
    params.rank = rank;
  }

  std::vector<std::uint32_t> packed_bits() const {
    std::vector<std::uint32_t> bits;
    for (float value : packed) bits.push_back(bits_of(value));
    return bits;
  }
};

// (score, id) pairs of packed floats, as bits.
std::vector<std::uint32_t> pairs(std::initializer_list<float> values) {
  std::vector<std::uint32_t> bits;
  for (float value : values) bits.push_back(bits_of(value));
  return bits;
}

// --- Launch geometry ------------------------------------------------------------------------

TEST(Dsv4DcpPack, GridIsRowsByTilesOf512Columns) {
  static_assert(zj::dsv4::kDcpPackThreadsPerBlock == 256);
  static_assert(zj::dsv4::kDcpPackColumnsPerTile == 512);
  static_assert(zj::dsv4::dcp_pack_grid(7, 512).rows == 7);
  static_assert(zj::dsv4::dcp_pack_grid(7, 512).tiles == 1);
  EXPECT_EQ(zj::dsv4::dcp_pack_grid(3, 1024).tiles, 2);
  EXPECT_EQ(zj::dsv4::dcp_pack_grid(3, 2048).tiles, 4);
  EXPECT_EQ(zj::dsv4::dcp_pack_grid(3, 513).tiles, 2);
  EXPECT_EQ(zj::dsv4::dcp_pack_grid(2147483647LL, 512).rows, zj::dsv4::kDcpPackMaxRows);
}

// --- Packing --------------------------------------------------------------------------------

TEST(Dsv4DcpPack, PacksScoreAndGlobalIdColumnForColumn) {
  // W = 2, I = 1, rank 1: g = 2l + 1.
  PackProblem problem({10, 11, 12, 13, 14, 15, 16, 17, 18, 19}, 10, {3, 0, 9, 5}, 4, 1);
  dcp_pack(DcpPackKey{4, false, 2, 1}, problem.params);
  EXPECT_EQ(problem.packed_bits(), pairs({13, 7, 10, 1, 19, 19, 15, 11}));
}

TEST(Dsv4DcpPack, TiedScoresKeepColumnOrder) {
  // The kernel neither sorts nor breaks ties. W = 4, I = 1, rank 2: g = 4l + 2.
  PackProblem problem({2.5f, 2.5f, 2.5f, 2.5f, 2.5f}, 5, {4, 1, 2, 3}, 4, 2);
  dcp_pack(DcpPackKey{4, false, 4, 1}, problem.params);
  EXPECT_EQ(problem.packed_bits(), pairs({2.5f, 18, 2.5f, 6, 2.5f, 10, 2.5f, 14}));
}

TEST(Dsv4DcpPack, EmptySlotsAnywhereBecomeNegativeInfinityAndMinusOne) {
  // Interior and trailing -1, and any other negative index, give (-inf, -1.0f); a real -inf
  // logit keeps its id. W = 2, I = 1, rank 0: g = 2l.
  PackProblem problem({-kInfinity, 1, 2, 3}, 4, {0, -1, 2, -7, -1}, 5, 0);
  dcp_pack(DcpPackKey{5, false, 2, 1}, problem.params);
  const std::vector<std::uint32_t> expected = {
      kNegativeInfinityBits, bits_of(0.0f), kNegativeInfinityBits, kMinusOneBits,
      bits_of(2.0f),         bits_of(4.0f), kNegativeInfinityBits, kMinusOneBits,
      kNegativeInfinityBits, kMinusOneBits};
  EXPECT_EQ(problem.packed_bits(), expected);
}

TEST(Dsv4DcpPack, ScoresAreBitCopiesIncludingNaNPayloads) {
  // A quiet NaN with a payload, a negative signaling NaN, +inf and -0.0 all pass unchanged.
  // W = 3, I = 1, rank 0: g = 3l.
  PackProblem problem({from_bits(0x7FC12345u), from_bits(0xFFA00001u), kInfinity, -0.0f}, 4,
                      {1, 0, 2, 3}, 4, 0);
  dcp_pack(DcpPackKey{4, false, 3, 1}, problem.params);
  const std::vector<std::uint32_t> expected = {0xFFA00001u,   bits_of(3.0f), 0x7FC12345u,
                                               bits_of(0.0f), 0x7F800000u,   bits_of(6.0f),
                                               0x80000000u,   bits_of(9.0f)};
  EXPECT_EQ(problem.packed_bits(), expected);
}

TEST(Dsv4DcpPack, RowStartsOffsetColumnsAndIndicesClampToTheLastColumn) {
  // logits[r][c] = 10r + c over N = 8; row starts {0, 3, 6}. W = 2, I = 2, rank 1:
  // g = (l / 2) * 4 + 2 + l % 2.
  std::vector<float> logits;
  for (int r = 0; r < 3; ++r) {
    for (int c = 0; c < 8; ++c) logits.push_back(static_cast<float>(10 * r + c));
  }
  PackProblem problem(logits, 8, {0, 7, 9, /**/ 0, 4, 5, /**/ 1, -1, 0}, 3, 1);
  problem.row_starts = {0, 3, 6};
  problem.params.row_starts = problem.row_starts.data();
  dcp_pack(DcpPackKey{3, true, 2, 2}, problem.params);
  // Row 0: columns 0, 7, min(9, 7). Row 1: 3, 7, min(8, 7). Row 2: 7, -, 6.
  EXPECT_EQ(problem.packed_bits(), pairs({0, 2, 7, 15, 7, 19,     //
                                          13, 2, 17, 10, 17, 11,  //
                                          27, 3, -kInfinity, -1, 26, 2}));

  // Without row starts the same indices read from column 0 of each row, and the (now null)
  // row_starts pointer is never needed.
  PackProblem decode(logits, 8, {0, 7, 9, /**/ 0, 4, 5, /**/ 1, -1, 0}, 3, 1);
  dcp_pack(DcpPackKey{3, false, 2, 2}, decode.params);
  EXPECT_EQ(decode.packed_bits(), pairs({0, 2, 7, 15, 7, 19,     //
                                         10, 2, 14, 10, 15, 11,  //
                                         21, 3, -kInfinity, -1, 20, 2}));
}

TEST(Dsv4DcpPack, ZeroColumnsClampToColumnZero) {
  // N = 0: a row of only -1 is all padding. An index >= 0 there follows the spec's clamp,
  // min(l + rs, max(N - 1, 0)) = 0, and reads column 0 (the caller never sends one).
  std::vector<float> logits = {41.0f, 42.0f};  // column 0 of rows 0 and 1, row stride 1
  PackProblem problem(logits, 0, {-1, -1, /**/ 5, -1}, 2, 0);
  problem.params.logits_stride_row = 1;
  dcp_pack(DcpPackKey{2, false, 2, 1}, problem.params);
  EXPECT_EQ(problem.packed_bits(), pairs({-kInfinity, -1, -kInfinity, -1,  //
                                          42, 10, -kInfinity, -1}));
}

TEST(Dsv4DcpPack, InterleavedShardingIds) {
  // W = 4, rank 3, N = 1 (every index clamps to column 0, score 0.5).
  const std::vector<int> locals = {0, 1, 63, 64, 130};
  struct Case {
    int interleave;
    std::vector<float> ids;
  };
  const std::vector<Case> cases = {
      {1, {3, 7, 255, 259, 523}},      // g = 4l + 3
      {2, {6, 7, 255, 262, 526}},      // g = (l / 2) * 8 + 6 + l % 2
      {64, {192, 193, 255, 448, 706}}  // g = (l / 64) * 256 + 192 + l % 64
  };
  for (const Case& c : cases) {
    PackProblem problem({0.5f}, 1, locals, 5, 3);
    dcp_pack(DcpPackKey{5, false, 4, c.interleave}, problem.params);
    for (std::size_t i = 0; i < locals.size(); ++i) {
      EXPECT_EQ(problem.packed[2 * i], 0.5f) << "I = " << c.interleave << ", column " << i;
      EXPECT_EQ(problem.packed[2 * i + 1], c.ids[i]) << "I = " << c.interleave << ", column " << i;
    }
  }
}

TEST(Dsv4DcpPack, IdsRoundToNearestEvenPast2To24) {
  // W = 2, I = 1: rank 1 gives g = 2l + 1, rank 0 gives g = 2l.
  const int half = 1 << 23;
  PackProblem odd({1.0f}, 1, {half - 1, half, half + 1}, 3, 1);
  dcp_pack(DcpPackKey{3, false, 2, 1}, odd.params);
  EXPECT_EQ(bits_of(odd.packed[1]), 0x4B7FFFFFu);  // 2^24 - 1 = 16777215, exact
  EXPECT_EQ(bits_of(odd.packed[3]), 0x4B800000u);  // 2^24 + 1 -> tie -> 16777216 (even)
  EXPECT_EQ(bits_of(odd.packed[5]), 0x4B800002u);  // 2^24 + 3 -> tie -> 16777220 (even)
  PackProblem even({1.0f}, 1, {half + 1}, 1, 0);
  dcp_pack(DcpPackKey{1, false, 2, 1}, even.params);
  EXPECT_EQ(bits_of(even.packed[1]), 0x4B800001u);  // 2^24 + 2 = 16777218, exact

  // g is computed in 64 bits: W = 8, rank 7, l = 2^31 - 1 gives 2^34 - 1, which rounds to 2^34.
  PackProblem wide({1.0f}, 1, {std::numeric_limits<int>::max()}, 1, 7);
  dcp_pack(DcpPackKey{1, false, 8, 1}, wide.params);
  EXPECT_EQ(bits_of(wide.packed[1]), 0x50800000u);
}

TEST(Dsv4DcpPack, StridedOperandsWriteOnlyTheirFloats) {
  // logits with strides (20, 3), indices with strides (7, 2), packed with strides (16, 5, 2):
  // every other float of every buffer is junk or sentinel. W = 2, I = 1, rank 0: g = 2l.
  std::vector<float> logits(40, from_bits(0x7FC0DEADu));
  for (int r = 0; r < 2; ++r) {
    for (int c = 0; c < 5; ++c)
      logits[static_cast<std::size_t>(20 * r + 3 * c)] =
          100.0f * static_cast<float>(r) + static_cast<float>(c);
  }
  std::vector<int> indices(14, 0);
  const int row0[3] = {4, -1, 2};
  const int row1[3] = {1, 3, 6};
  for (int c = 0; c < 3; ++c) {
    indices[static_cast<std::size_t>(2 * c)] = row0[c];
    indices[static_cast<std::size_t>(7 + 2 * c)] = row1[c];
  }
  std::vector<float> packed = sentinel_buffer(32);
  DcpPackParams params{};
  params.logits = logits.data();
  params.logits_stride_row = 20;
  params.logits_stride_col = 3;
  params.num_cols = 5;
  params.topk_indices = indices.data();
  params.topk_indices_stride_row = 7;
  params.topk_indices_stride_col = 2;
  params.packed = packed.data();
  params.packed_stride_row = 16;
  params.packed_stride_col = 5;
  params.packed_stride_pair = 2;
  params.num_rows = 2;
  params.rank = 0;
  dcp_pack(DcpPackKey{3, false, 2, 1}, params);

  std::vector<std::uint32_t> expected(32, kSentinelBits);
  const float written[2][3][2] = {{{4, 8}, {-kInfinity, -1}, {2, 4}},
                                  {{101, 2}, {103, 6}, {104, 12}}};  // l = 6 clamps to column 4
  for (int r = 0; r < 2; ++r) {
    for (int c = 0; c < 3; ++c) {
      expected[static_cast<std::size_t>(16 * r + 5 * c)] = bits_of(written[r][c][0]);
      expected[static_cast<std::size_t>(16 * r + 5 * c + 2)] = bits_of(written[r][c][1]);
    }
  }
  std::vector<std::uint32_t> actual;
  for (float value : packed) actual.push_back(bits_of(value));
  EXPECT_EQ(actual, expected);
}

TEST(Dsv4DcpPack, EveryRankOfEveryWorldSizeCoversItsOwnPositions) {
  // Local positions 0..3 on each rank, I = 1: rank k emits ids 4..., g = W * l + k, so the ranks
  // together emit exactly 0 .. 4W - 1, each once.
  for (int world_size : {2, 3, 4, 8}) {
    std::set<float> all_ids;
    for (int rank = 0; rank < world_size; ++rank) {
      PackProblem problem({7.0f, 8.0f, 9.0f, 10.0f}, 4, {0, 1, 2, 3}, 4, rank);
      dcp_pack(DcpPackKey{4, false, world_size, 1}, problem.params);
      for (int l = 0; l < 4; ++l) {
        EXPECT_EQ(problem.packed[static_cast<std::size_t>(2 * l)], 7.0f + static_cast<float>(l));
        const float id = problem.packed[static_cast<std::size_t>(2 * l + 1)];
        EXPECT_EQ(id, static_cast<float>(world_size * l + rank)) << "W = " << world_size;
        all_ids.insert(id);
      }
    }
    EXPECT_EQ(all_ids.size(), static_cast<std::size_t>(4 * world_size));
    EXPECT_EQ(*all_ids.begin(), 0.0f);
    EXPECT_EQ(*all_ids.rbegin(), static_cast<float>(4 * world_size - 1));
  }
}

TEST(Dsv4DcpPack, RejectsBadArgumentsAndSkipsEmptyBatches) {
  PackProblem problem({1.0f}, 1, {0}, 1, 2);
  EXPECT_THROW(dcp_pack(DcpPackKey{1, false, 2, 1}, problem.params),
               std::invalid_argument);  // rank >= W
  problem.params.rank = -1;
  EXPECT_THROW(dcp_pack(DcpPackKey{1, false, 2, 1}, problem.params), std::invalid_argument);
  problem.params.rank = 0;
  EXPECT_THROW(dcp_pack(DcpPackKey{0, false, 2, 1}, problem.params), std::invalid_argument);
  EXPECT_THROW(dcp_pack(DcpPackKey{1, false, 2, 0}, problem.params), std::invalid_argument);
  EXPECT_THROW(dcp_pack(DcpPackKey{1, true, 2, 1}, problem.params),
               std::invalid_argument);  // no starts

  // R = 0 writes nothing and needs no buffers.
  DcpPackParams empty{};
  EXPECT_NO_THROW(dcp_pack(DcpPackKey{512, true, 2, 1}, empty));
  problem.params.num_rows = 0;
  dcp_pack(DcpPackKey{1, false, 2, 1}, problem.params);
  EXPECT_EQ(bits_of(problem.packed[0]), kSentinelBits);
  EXPECT_EQ(bits_of(problem.packed[1]), kSentinelBits);
}

// --- Sharding maps --------------------------------------------------------------------------

TEST(Dsv4DcpSharding, OwnerAndLocalPositionByHand) {
  // W = 3, I = 2: positions go 0,1 -> rank 0; 2,3 -> rank 1; 4,5 -> rank 2; 6,7 -> rank 0 ...
  EXPECT_EQ(dcp_shard_position(0, 3, 2).rank, 0);
  EXPECT_EQ(dcp_shard_position(1, 3, 2).local_position, 1);
  EXPECT_EQ(dcp_shard_position(2, 3, 2).rank, 1);
  EXPECT_EQ(dcp_shard_position(2, 3, 2).local_position, 0);
  EXPECT_EQ(dcp_shard_position(5, 3, 2).rank, 2);
  EXPECT_EQ(dcp_shard_position(5, 3, 2).local_position, 1);
  EXPECT_EQ(dcp_shard_position(6, 3, 2).rank, 0);
  EXPECT_EQ(dcp_shard_position(6, 3, 2).local_position, 2);
  EXPECT_EQ(dcp_shard_position(13, 3, 2).rank, 0);
  EXPECT_EQ(dcp_shard_position(13, 3, 2).local_position, 5);
  // W = 8, I = 64: 1000 = 1 * 512 + 7 * 64 + 40.
  EXPECT_EQ(dcp_shard_position(1000, 8, 64).rank, 7);
  EXPECT_EQ(dcp_shard_position(1000, 8, 64).local_position, 104);
  EXPECT_EQ(dcp_global_position(7, 104, 8, 64), 1000);
  EXPECT_EQ(dcp_global_position(2, 1, 3, 2), 5);
  EXPECT_EQ(dcp_global_position(0, 5, 3, 2), 13);
  EXPECT_THROW(dcp_global_position(3, 0, 3, 2), std::invalid_argument);
}

TEST(Dsv4DcpSharding, MapsAreInverseAndWidthsPartitionTheRange) {
  for (int world_size : {2, 3, 4, 8}) {
    for (int interleave : {1, 2, 64}) {
      const std::int64_t width = 3LL * world_size * interleave + 5;
      std::vector<std::int64_t> owned(static_cast<std::size_t>(world_size), 0);
      for (std::int64_t g = 0; g < width; ++g) {
        const auto position = dcp_shard_position(g, world_size, interleave);
        ASSERT_EQ(position.local_position, owned[static_cast<std::size_t>(position.rank)])
            << "local positions of a rank are dense and increasing in g";
        ++owned[static_cast<std::size_t>(position.rank)];
        ASSERT_EQ(
            dcp_global_position(position.rank, position.local_position, world_size, interleave), g);
      }
      for (int rank = 0; rank < world_size; ++rank) {
        EXPECT_EQ(dcp_local_width(width, rank, world_size, interleave),
                  owned[static_cast<std::size_t>(rank)])
            << "W = " << world_size << ", I = " << interleave << ", rank " << rank;
      }
    }
  }
  // W = 3, I = 2, 13 positions: two whole rounds (4 each) and position 12 on rank 0.
  EXPECT_EQ(dcp_local_width(13, 0, 3, 2), 5);
  EXPECT_EQ(dcp_local_width(13, 1, 3, 2), 4);
  EXPECT_EQ(dcp_local_width(13, 2, 3, 2), 4);
  EXPECT_EQ(dcp_local_width(3, 5, 8, 1), 0);  // a rank that owns nothing
}

// --- Selection ------------------------------------------------------------------------------

TEST(Dsv4DcpSelect, OrderPreservingScoreBits) {
  EXPECT_EQ(dcp_score_order_bits(0.0f), 0x80000000u);
  EXPECT_EQ(dcp_score_order_bits(-0.0f), 0x7FFFFFFFu);
  EXPECT_EQ(dcp_score_order_bits(1.0f), 0xBF800000u);
  EXPECT_EQ(dcp_score_order_bits(-1.0f), 0x407FFFFFu);
  EXPECT_EQ(dcp_score_order_bits(kInfinity), 0xFF800000u);
  EXPECT_EQ(dcp_score_order_bits(-kInfinity), 0x007FFFFFu);
  EXPECT_EQ(dcp_score_order_bits(from_bits(0x7FC00000u)), 0xFFC00000u);  // +NaN above +inf
  EXPECT_EQ(dcp_score_order_bits(from_bits(0xFFC00000u)), 0x003FFFFFu);  // -NaN below -inf
  EXPECT_EQ(dcp_candidate_key(1.0f, 0), 0xBF800000FFFFFFFFull);
  EXPECT_EQ(dcp_candidate_key(1.0f, 5), 0xBF800000FFFFFFFAull);
}

TEST(Dsv4DcpSelect, CandidateIdsConvertLikeTheDevice) {
  EXPECT_EQ(dcp_candidate_id(3.0f), 3);
  EXPECT_EQ(dcp_candidate_id(-1.0f), -1);
  EXPECT_EQ(dcp_candidate_id(2.75f), 2);
  EXPECT_EQ(dcp_candidate_id(16777216.0f), 16777216);
  EXPECT_EQ(dcp_candidate_id(1e10f), std::numeric_limits<std::int32_t>::max());
  EXPECT_EQ(dcp_candidate_id(-1e10f), std::numeric_limits<std::int32_t>::min());
  EXPECT_EQ(dcp_candidate_id(from_bits(0x7FC00000u)), 0);
}

TEST(Dsv4DcpSelect, ScoreDescendingTiesToLowestIdPaddingLast) {
  // W = 2, K = 4: each row holds rank 0's block of 4 then rank 1's.
  const float nan = from_bits(0x7FC00001u);
  const float negative_nan = from_bits(0xFFC00001u);
  const float inf = kInfinity;
  const std::vector<float> gathered = {
      // Row 0: +NaN is best, then the tied 7s (ids 1, 2), then the lowest of the tied 5s.
      5, 0, 7, 2, -inf, -1, 5, 4, /**/ 7, 1, 5, 3, nan, 9, -inf, 5,
      // Row 1: fewer than K valid candidates; a valid -inf beats -NaN, both beat padding.
      1, 6, -inf, -1, -inf, -1, -inf, -1, /**/ negative_nan, 11, -inf, 7, -inf, -1, -inf, -1,
      // Row 2: +0.0 above -0.0 regardless of ids.
      -0.0f, 0, -inf, -1, -inf, -1, -inf, -1, /**/ 0.0f, 5, -inf, -1, -inf, -1, -inf, -1,
      // Row 3: a rank that owns no tokens (all padding) next to a full one.
      -inf, -1, -inf, -1, -inf, -1, -inf, -1, /**/ 3, 1, 3, 3, 2, 5, 4, 7};
  const std::vector<std::int32_t> expected = {9, 1, 2, 0, 6, 7, 11, -1, 5, 0, -1, -1, 7, 1, 3, 5};
  EXPECT_EQ(dcp_select_global_topk(gathered.data(), 4, 8, 4), expected);
}

TEST(Dsv4DcpSelect, ExactTopKOfPlainLogits) {
  const std::vector<float> logits = {3, 1, 3, 2, from_bits(0x7FC00000u),
                                     3,  //
                                     1, 2, 0, 0, 0,
                                     0};
  EXPECT_EQ(dcp_exact_topk(logits.data(), 2, 6, 6, 4),
            (std::vector<std::int32_t>{4, 0, 2, 5, 1, 0, 2, 3}));
  EXPECT_EQ(dcp_exact_topk(logits.data() + 6, 1, 6, 2, 3), (std::vector<std::int32_t>{1, 0, -1}));
}

// --- The whole exchange -----------------------------------------------------------------------

// Random logits from a small set of values (so ties are everywhere), with some -inf, NaNs of
// both signs and signed zeros.
float random_logit(std::mt19937& rng) {
  const auto draw = static_cast<std::uint32_t>(rng() % 100);
  const auto payload = static_cast<std::uint32_t>(rng() & 0xFFu);
  if (draw == 0) return -kInfinity;
  if (draw == 1) return from_bits(0x7FC00000u | payload);
  if (draw == 2) return from_bits(0xFFC00000u | payload);
  if (draw == 3) return -0.0f;
  return static_cast<float>(static_cast<int>(rng() % 7) - 3);
}

// Packs every rank's local top-k straight into its rank-major slice of the gathered buffer (as
// the symmetric-memory exchange does), selects, and compares with the exact top-k of the
// unsharded logits.
void check_exchange(int world_size, int interleave, bool has_row_starts, std::int64_t global_width,
                    int topk, std::uint32_t seed) {
  SCOPED_TRACE(testing::Message() << "W = " << world_size << ", I = " << interleave
                                  << ", row starts " << has_row_starts << ", width " << global_width
                                  << ", K = " << topk);
  std::mt19937 rng(seed);
  const std::int64_t rows = 5;
  std::vector<float> global_logits(static_cast<std::size_t>(rows * global_width));
  for (float& value : global_logits) value = random_logit(rng);

  const std::int64_t candidates = static_cast<std::int64_t>(world_size) * topk;
  std::vector<float> gathered = sentinel_buffer(static_cast<std::size_t>(rows * candidates * 2));
  for (int rank = 0; rank < world_size; ++rank) {
    const std::int64_t local_width = dcp_local_width(global_width, rank, world_size, interleave);
    std::vector<int> row_starts(static_cast<std::size_t>(rows), 0);
    if (has_row_starts) {
      for (std::int64_t r = 0; r < rows; ++r)
        row_starts[static_cast<std::size_t>(r)] = 3 * static_cast<int>(r);
    }
    const std::int64_t num_cols = local_width + 3 * (rows - 1);
    // Columns before a row's start hold +inf: reading one would win every selection.
    std::vector<float> local_logits(static_cast<std::size_t>(rows * num_cols), kInfinity);
    std::vector<int> indices(static_cast<std::size_t>(rows * topk));
    for (std::int64_t r = 0; r < rows; ++r) {
      float* local_row =
          local_logits.data() + r * num_cols + row_starts[static_cast<std::size_t>(r)];
      for (std::int64_t l = 0; l < local_width; ++l) {
        const std::int64_t g = dcp_global_position(rank, l, world_size, interleave);
        local_row[l] = global_logits[static_cast<std::size_t>(r * global_width + g)];
      }
      // The local top-k, in a shuffled column order: packing must not care.
      std::vector<std::int32_t> local_topk =
          dcp_exact_topk(local_row, 1, num_cols, local_width, topk);
      std::shuffle(local_topk.begin(), local_topk.end(), rng);
      std::copy(local_topk.begin(), local_topk.end(), indices.begin() + r * topk);
    }

    DcpPackParams params{};
    params.logits = local_logits.data();
    params.logits_stride_row = num_cols;
    params.logits_stride_col = 1;
    params.num_cols = num_cols;
    params.topk_indices = indices.data();
    params.topk_indices_stride_row = topk;
    params.topk_indices_stride_col = 1;
    params.row_starts = has_row_starts ? row_starts.data() : nullptr;
    params.packed = gathered.data() + static_cast<std::int64_t>(rank) * topk * 2;
    params.packed_stride_row = candidates * 2;
    params.packed_stride_col = 2;
    params.packed_stride_pair = 1;
    params.num_rows = rows;
    params.rank = rank;
    dcp_pack(DcpPackKey{topk, has_row_starts, world_size, interleave}, params);
  }
  for (float value : gathered) ASSERT_NE(bits_of(value), kSentinelBits) << "a float left unwritten";

  const auto selected = dcp_select_global_topk(gathered.data(), rows, candidates, topk);
  const auto exact = dcp_exact_topk(global_logits.data(), rows, global_width, global_width, topk);
  EXPECT_EQ(selected, exact);
}

TEST(Dsv4DcpExchange, PackGatherSelectEqualsExactTopKOfUnshardedLogits) {
  std::uint32_t seed = 1;
  for (int world_size : {2, 4, 8}) {
    for (int interleave : {1, 2, 64}) {
      for (bool has_row_starts : {false, true}) {
        check_exchange(world_size, interleave, has_row_starts, 1000, 16, seed++);
        // Ranks own fewer than K positions, some own none, and the row has fewer than K.
        check_exchange(world_size, interleave, has_row_starts, 20, 16, seed++);
        check_exchange(world_size, interleave, has_row_starts, 5, 16, seed++);
      }
    }
  }
}

}  // namespace
