#include "dsv4/dcp_pack/reference.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>

namespace zerojit::dsv4::reference {
namespace {

constexpr std::uint32_t kNegativeInfinityBits = 0xFF800000u;
constexpr std::uint32_t kMinusOneBits = 0xBF800000u;

// Floats move as bit patterns (memcpy), so a signaling NaN is copied, never quieted.
std::uint32_t load_bits(const float* source) {
  std::uint32_t bits;
  std::memcpy(&bits, source, sizeof(bits));
  return bits;
}

void store_bits(float* destination, std::uint32_t bits) {
  std::memcpy(destination, &bits, sizeof(bits));
}

void require(bool condition, const std::string& message) {
  if (!condition) throw std::invalid_argument(message);
}

void require_sharding(int world_size, int cp_interleave, const char* function) {
  require(world_size >= 1,
          std::string(function) + ": world_size must be >= 1, got " + std::to_string(world_size));
  require(cp_interleave >= 1, std::string(function) + ": cp_interleave must be >= 1, got " +
                                  std::to_string(cp_interleave));
}

}  // namespace

void dcp_pack(const DcpPackKey& key, const zj::dsv4::DcpPackParams& params) {
  require(key.topk > 0, "dcp_pack: topk must be positive, got " + std::to_string(key.topk));
  require_sharding(key.dcp_world_size, key.cp_interleave, "dcp_pack");
  require(params.rank >= 0 && params.rank < key.dcp_world_size,
          "dcp_pack: rank " + std::to_string(params.rank) +
              " is outside [0, world_size = " + std::to_string(key.dcp_world_size) + ")");
  require(params.num_rows >= 0,
          "dcp_pack: num_rows must be >= 0, got " + std::to_string(params.num_rows));
  require(params.num_cols >= 0,
          "dcp_pack: num_cols must be >= 0, got " + std::to_string(params.num_cols));
  if (params.num_rows == 0) return;  // no launch
  require(params.topk_indices != nullptr, "dcp_pack: topk_indices is null");
  require(params.packed != nullptr, "dcp_pack: packed is null");
  require(params.logits != nullptr, "dcp_pack: logits is null");
  require(!key.has_row_starts || params.row_starts != nullptr,
          "dcp_pack: row_starts is null but the kernel has row starts");

  const std::int64_t world_size = key.dcp_world_size;
  const std::int64_t interleave = key.cp_interleave;
  const std::int64_t last_col = std::max<std::int64_t>(params.num_cols - 1, 0);
  for (std::int64_t row = 0; row < params.num_rows; ++row) {
    const std::int64_t row_start = key.has_row_starts ? params.row_starts[row] : 0;
    for (std::int64_t col = 0; col < key.topk; ++col) {
      const int local = params.topk_indices[row * params.topk_indices_stride_row +
                                            col * params.topk_indices_stride_col];
      std::uint32_t score_bits = kNegativeInfinityBits;
      std::uint32_t id_bits = kMinusOneBits;
      if (local >= 0) {
        const std::int64_t logits_col =
            std::max<std::int64_t>(std::min<std::int64_t>(local + row_start, last_col), 0);
        score_bits = load_bits(params.logits + row * params.logits_stride_row +
                               logits_col * params.logits_stride_col);
        const std::int64_t global = (local / interleave) * (world_size * interleave) +
                                    params.rank * interleave + local % interleave;
        // int64 -> float rounds to nearest even under the default rounding mode, as
        // __ll2float_rn does on the device.
        id_bits = std::bit_cast<std::uint32_t>(static_cast<float>(global));
      }
      float* out = params.packed + row * params.packed_stride_row + col * params.packed_stride_col;
      store_bits(out, score_bits);
      store_bits(out + params.packed_stride_pair, id_bits);
    }
  }
}

DcpShardPosition dcp_shard_position(std::int64_t global_position, int world_size,
                                    int cp_interleave) {
  require_sharding(world_size, cp_interleave, "dcp_shard_position");
  require(global_position >= 0, "dcp_shard_position: global_position must be >= 0, got " +
                                    std::to_string(global_position));
  const std::int64_t interleave = cp_interleave;
  DcpShardPosition position;
  position.rank = static_cast<int>((global_position / interleave) % world_size);
  position.local_position =
      (global_position / (world_size * interleave)) * interleave + global_position % interleave;
  return position;
}

std::int64_t dcp_global_position(int rank, std::int64_t local_position, int world_size,
                                 int cp_interleave) {
  require_sharding(world_size, cp_interleave, "dcp_global_position");
  require(rank >= 0 && rank < world_size, "dcp_global_position: rank " + std::to_string(rank) +
                                              " is outside [0, " + std::to_string(world_size) +
                                              ")");
  require(local_position >= 0, "dcp_global_position: local_position must be >= 0, got " +
                                   std::to_string(local_position));
  const std::int64_t interleave = cp_interleave;
  return (local_position / interleave) * (world_size * interleave) + rank * interleave +
         local_position % interleave;
}

std::int64_t dcp_local_width(std::int64_t global_width, int rank, int world_size,
                             int cp_interleave) {
  require_sharding(world_size, cp_interleave, "dcp_local_width");
  require(rank >= 0 && rank < world_size, "dcp_local_width: rank " + std::to_string(rank) +
                                              " is outside [0, " + std::to_string(world_size) +
                                              ")");
  require(global_width >= 0,
          "dcp_local_width: global_width must be >= 0, got " + std::to_string(global_width));
  // Whole rounds of W * I positions give each rank I of them; the last partial round gives this
  // rank whatever of its I-slot falls below global_width.
  const std::int64_t interleave = cp_interleave;
  const std::int64_t round = world_size * interleave;
  const std::int64_t remainder = global_width % round;
  const std::int64_t in_last_round =
      std::clamp<std::int64_t>(remainder - rank * interleave, 0, interleave);
  return (global_width / round) * interleave + in_last_round;
}

std::uint32_t dcp_score_order_bits(float score) {
  const auto bits = std::bit_cast<std::uint32_t>(score);
  return (bits & 0x80000000u) != 0 ? ~bits : (bits | 0x80000000u);
}

std::int32_t dcp_candidate_id(float id_value) {
  if (std::isnan(id_value)) return 0;
  // 2^31 is the first float above the int32 range; -2^31 is representable.
  if (id_value >= 2147483648.0f) return std::numeric_limits<std::int32_t>::max();
  if (id_value <= -2147483648.0f) return std::numeric_limits<std::int32_t>::min();
  return static_cast<std::int32_t>(id_value);  // truncates toward zero
}

std::uint64_t dcp_candidate_key(float score, std::int32_t id) {
  return (static_cast<std::uint64_t>(dcp_score_order_bits(score)) << 32) |
         static_cast<std::uint64_t>(~static_cast<std::uint32_t>(id));
}

namespace {

struct KeyedId {
  std::uint64_t key;
  std::int32_t id;
};

// Keeps the topk largest keys of `candidates` (best first) in row_out, -1 padded.
void write_best(std::vector<KeyedId>& candidates, int topk, std::int32_t* row_out) {
  const auto kept = std::min<std::size_t>(candidates.size(), static_cast<std::size_t>(topk));
  std::partial_sort(candidates.begin(), candidates.begin() + static_cast<std::ptrdiff_t>(kept),
                    candidates.end(),
                    [](const KeyedId& a, const KeyedId& b) { return a.key > b.key; });
  for (std::size_t i = 0; i < static_cast<std::size_t>(topk); ++i) {
    row_out[i] = i < kept ? candidates[i].id : -1;
  }
}

}  // namespace

std::vector<std::int32_t> dcp_select_global_topk(const float* gathered, std::int64_t num_rows,
                                                 std::int64_t num_candidates, int topk) {
  require(topk > 0, "dcp_select_global_topk: topk must be positive, got " + std::to_string(topk));
  require(num_rows >= 0,
          "dcp_select_global_topk: num_rows must be >= 0, got " + std::to_string(num_rows));
  require(num_candidates >= 0, "dcp_select_global_topk: num_candidates must be >= 0, got " +
                                   std::to_string(num_candidates));
  require(num_rows * num_candidates == 0 || gathered != nullptr,
          "dcp_select_global_topk: gathered is null");
  std::vector<std::int32_t> selected(static_cast<std::size_t>(num_rows * topk), -1);
  std::vector<KeyedId> candidates;
  for (std::int64_t row = 0; row < num_rows; ++row) {
    candidates.clear();
    const float* row_in = gathered + row * num_candidates * 2;
    for (std::int64_t c = 0; c < num_candidates; ++c) {
      const std::int32_t id = dcp_candidate_id(row_in[2 * c + 1]);
      if (id < 0) continue;
      candidates.push_back({dcp_candidate_key(row_in[2 * c], id), id});
    }
    write_best(candidates, topk, selected.data() + row * topk);
  }
  return selected;
}

std::vector<std::int32_t> dcp_exact_topk(const float* logits, std::int64_t num_rows,
                                         std::int64_t row_stride, std::int64_t width, int topk) {
  require(topk > 0, "dcp_exact_topk: topk must be positive, got " + std::to_string(topk));
  require(num_rows >= 0, "dcp_exact_topk: num_rows must be >= 0, got " + std::to_string(num_rows));
  require(width >= 0 && width <= std::numeric_limits<std::int32_t>::max(),
          "dcp_exact_topk: width must be in [0, 2^31), got " + std::to_string(width));
  require(num_rows * width == 0 || logits != nullptr, "dcp_exact_topk: logits is null");
  std::vector<std::int32_t> selected(static_cast<std::size_t>(num_rows * topk), -1);
  std::vector<KeyedId> candidates;
  for (std::int64_t row = 0; row < num_rows; ++row) {
    candidates.clear();
    for (std::int64_t col = 0; col < width; ++col) {
      const auto id = static_cast<std::int32_t>(col);
      candidates.push_back({dcp_candidate_key(logits[row * row_stride + col], id), id});
    }
    write_best(candidates, topk, selected.data() + row * topk);
  }
  return selected;
}

}  // namespace zerojit::dsv4::reference

namespace zerojit::dsv4 {

void DcpPackKernel::reference(const DcpPackKey& key, const zj::dsv4::DcpPackParams& params) {
  reference::dcp_pack(key, params);
}

}  // namespace zerojit::dsv4
