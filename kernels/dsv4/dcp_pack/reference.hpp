// CPU reference of the DCP top-k exchange (spec section 12): the candidate packing kernel
// (kernels/dsv4/dcp_pack/dcp_pack.cu), the sharding maps it relies on, and the stable global top-k
// selection that follows the all-gather, so that one machine can check the whole exchange:
// pack on every rank, concatenate rank-major, select, and compare with the exact top-k of the
// unsharded logits.
#pragma once

#include <cstdint>
#include <vector>

#include "dsv4/dcp_pack/dcp_pack.hpp"
#include "dsv4/dcp_pack/dcp_pack_params.h"

namespace zerojit::dsv4::reference {

// Spec 12.3 on host pointers, for the kernel compiled for `key`: for every row r < num_rows and
// column c < topk, writes the score and id floats of packed[r, c] and nothing else, with the
// kernel's exact bytes:
//  * index l >= 0: score = bit copy of logits[r, clamp(l + row_start, 0, max(N - 1, 0))], so
//    NaN payloads and infinities pass through; id = (float)g rounded to nearest even, with
//    g = (l / I) * (W * I) + rank * I + l % I computed in 64 bits.
//  * index l < 0 (-1 marks an empty slot): (-inf, -1.0f) and the logits are not read.
// With N = 0 a row must hold only -1; an index >= 0 there reads column 0 (the spec's clamp).
// The lower clamp at column 0 only matters for a negative row start, which callers never pass.
// Throws std::invalid_argument naming the argument at fault (non-positive topk / world size /
// interleave, rank outside [0, world_size), negative num_rows, a null pointer the call needs).
void dcp_pack(const DcpPackKey& key, const zj::dsv4::DcpPackParams& params);

// --- Sharding maps ------------------------------------------------------------------------

// Where global position g lives: rank (g / I) % W, local position (g / (W * I)) * I + g % I.
struct DcpShardPosition {
  int rank = 0;
  std::int64_t local_position = 0;
};

DcpShardPosition dcp_shard_position(std::int64_t global_position, int world_size,
                                    int cp_interleave);

// The inverse: the global position of local position l on `rank`,
// (l / I) * (W * I) + rank * I + l % I.
std::int64_t dcp_global_position(int rank, std::int64_t local_position, int world_size,
                                 int cp_interleave);

// How many of the global positions [0, global_width) `rank` owns: its local logits width.
std::int64_t dcp_local_width(std::int64_t global_width, int rank, int world_size,
                             int cp_interleave);

// --- Stable global top-k selection (the downstream contract of spec 12.3) -------------------

// Order-preserving bits of a score: unsigned comparison of the results orders the floats, with
// sign-bit-clear values mapped to bits | 0x80000000 and sign-bit-set values to ~bits. Every
// bit pattern gets its own place, so beyond the float order: a NaN with the sign bit clear sorts
// above +inf, a NaN with the sign bit set sorts below -inf, -0.0 sorts just below +0.0, and NaNs
// order among themselves by payload.
std::uint32_t dcp_score_order_bits(float score);

// The id a selector reads from a packed id float: (int)value as cvt.rzi.s32.f32 does it
// (truncate toward zero, saturate to the int32 range, NaN -> 0). Negative ids are invalid.
std::int32_t dcp_candidate_id(float id_value);

// The selection key of a valid candidate: (order bits << 32) | ~id. A larger key is better:
// score descending, ties to the lowest id.
std::uint64_t dcp_candidate_key(float score, std::int32_t id);

// From gathered candidates [num_rows, num_candidates, 2] f32, contiguous (rank-major blocks of
// topk after the all-gather, so num_candidates = W * topk), picks per row the topk valid
// candidates (id >= 0) with the largest keys. Returns [num_rows, topk] int32 global ids, each
// row best first and padded with -1. The device selector writes the same set in an unspecified
// order, so compare it sorted. (The device selector also requires num_candidates % 512 == 0;
// the reference does not.)
std::vector<std::int32_t> dcp_select_global_topk(const float* gathered, std::int64_t num_rows,
                                                 std::int64_t num_candidates, int topk);

// Exact top-k of plain logits [num_rows, width] (element row stride, unit column stride) under
// the same ordering, with column index c as the id: returns [num_rows, topk] int32 column
// indices, best first, -1 padded when width < topk. On the unsharded logits it is the answer the
// exchange must reproduce (while global ids stay below 2^24, the exact range of a float id); on
// one rank's local logits it is a local top-k that keeps the exchange exact, because the
// local-to-global map is increasing within a rank.
std::vector<std::int32_t> dcp_exact_topk(const float* logits, std::int64_t num_rows,
                                         std::int64_t row_stride, std::int64_t width, int topk);

}  // namespace zerojit::dsv4::reference
