// The DCP top-k candidate pack on a GPU (spec section 12) against its CPU reference: every
// byte of `packed` bit-exact, over world sizes 2, 4, 8, interleaves 1, 2, 64, with and without
// row starts, ties, -inf, NaN payloads, -1 padding, ids near 2^24 and three layouts of `packed`.
// The harness is dsv4/support/gpu_harness.hpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "dsv4/dcp_pack/reference.hpp"
#include "dsv4/support/gpu_harness.hpp"

namespace zerojit::dsv4 {
namespace {

using namespace zerojit::dsv4::gpu_test;

enum class PackedLayout { contiguous, gathered_slice, pair_major };

struct DcpCase {
  std::string name;
  int world_size = 2;
  int interleave = 1;
  int rank = 0;
  bool has_row_starts = false;
  int topk = 512;
  std::int64_t rows = 17;
  std::int64_t columns = 3000;  // N: the local logits width
  std::int64_t logits_col_stride = 1;
  std::int64_t topk_col_stride = 1;
  PackedLayout layout = PackedLayout::contiguous;
  std::uint64_t seed = 1;
};

// Local indices whose global id g = (l / I) * W * I + rank * I + l % I lies near 2^24, where
// (float)g starts rounding.
std::vector<std::int32_t> indices_near_two_to_24(int world_size, int interleave, int rank) {
  std::vector<std::int32_t> indices;
  const std::int64_t round = static_cast<std::int64_t>(world_size) * interleave;
  for (std::int64_t g = (1 << 24) - 3 * round; g <= (1 << 24) + 3 * round; ++g) {
    if ((g / interleave) % world_size != rank) continue;
    indices.push_back(static_cast<std::int32_t>((g / round) * interleave + g % interleave));
  }
  return indices;
}

struct DcpTensors {
  in::HostTensor logits;
  in::HostTensor topk_indices;
  in::HostTensor row_starts;
  in::HostTensor packed;
  std::int64_t packed_origin = 0;  // element 0 of this rank's packed view, in floats
};

DcpTensors make_dcp_tensors(const DcpCase& c) {
  in::Random random(c.seed);
  DcpTensors t;
  const std::int64_t rows = c.rows;
  std::vector<std::int32_t> starts(static_cast<std::size_t>(rows), 0);
  std::int64_t widest_start = 0;
  if (c.has_row_starts) {
    for (auto& s : starts) {
      s = static_cast<std::int32_t>(random.uniform_int(0, 40));
      widest_start = std::max<std::int64_t>(widest_start, s);
    }
  }
  // Logits [R, N + widest start]; a row's local position l sits at column l + row_start.
  const std::int64_t width = c.columns == 0 ? 0 : c.columns + widest_start;
  t.logits = in::make_tensor(DType::f32, {rows, width},
                             {width * c.logits_col_stride + 8, c.logits_col_stride});
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t col = 0; col < width; ++col) {
      t.logits.set<float>(r * t.logits.desc.stride(0) + col * c.logits_col_stride,
                          in::random_logit(random, 0.05, 0.02));
    }
  }
  t.row_starts = in::tensor_of(std::span<const std::int32_t>(starts));
  const std::int64_t k = c.topk;
  t.topk_indices =
      in::make_tensor(DType::i32, {rows, k}, {k * c.topk_col_stride + 4, c.topk_col_stride});
  const std::vector<std::int32_t> near = indices_near_two_to_24(c.world_size, c.interleave, c.rank);
  for (std::int64_t r = 0; r < rows; ++r) {
    // A run of trailing -1 (a short local top-k) in some rows, -1 here and there in all.
    const std::int64_t trailing = random.chance(0.3) ? random.uniform_int(1, k) : 0;
    for (std::int64_t col = 0; col < k; ++col) {
      std::int32_t index = -1;
      if (c.columns > 0 && col < k - trailing && !random.chance(0.08)) {
        index = static_cast<std::int32_t>(random.uniform_int(0, c.columns - 1));
        if (r == 1 && col < static_cast<std::int64_t>(near.size())) {
          index = near[static_cast<std::size_t>(col)];  // ids near 2^24 (column clamped)
        } else if (r == 2 && col % 7 == 0) {
          index =
              static_cast<std::int32_t>(c.columns + random.uniform_int(0, 100));  // past the row
        }
      }
      t.topk_indices.set<std::int32_t>(r * t.topk_indices.desc.stride(0) + col * c.topk_col_stride,
                                       index);
    }
  }
  // packed: contiguous [R, K, 2]; this rank's slice of a gathered [R, W * K, 2]; or pairs
  // stored as two planes ([R, 2, K] viewed as [R, K, 2]).
  switch (c.layout) {
    case PackedLayout::contiguous:
      t.packed = in::make_tensor(DType::f32, {rows, k, 2});
      break;
    case PackedLayout::gathered_slice: {
      const std::int64_t gathered = c.world_size * k;
      t.packed = in::make_tensor(DType::f32, {rows, gathered, 2});
      t.packed.desc = TensorDesc::strided(DType::f32, std::vector<std::int64_t>{rows, k, 2},
                                          std::vector<std::int64_t>{gathered * 2, 2, 1});
      t.packed_origin = c.rank * k * 2;
      t.packed.offset_bytes += t.packed_origin * 4;
      break;
    }
    case PackedLayout::pair_major:
      t.packed = in::make_tensor(DType::f32, {rows, k, 2}, {2 * k, 1, k});
      break;
  }
  return t;
}

params::DcpPackParams dcp_params(const DcpCase& c, const DcpTensors& t, float* packed) {
  params::DcpPackParams p{};
  p.logits = t.logits.as<float>();
  p.logits_stride_row = t.logits.desc.stride(0);
  p.logits_stride_col = t.logits.desc.stride(1);
  p.num_cols = t.logits.desc.size(1);
  p.topk_indices = t.topk_indices.as<int>();
  p.topk_indices_stride_row = t.topk_indices.desc.stride(0);
  p.topk_indices_stride_col = t.topk_indices.desc.stride(1);
  p.row_starts = c.has_row_starts ? t.row_starts.as<int>() : nullptr;
  p.packed = packed;
  p.packed_stride_row = t.packed.desc.stride(0);
  p.packed_stride_col = t.packed.desc.stride(1);
  p.packed_stride_pair = t.packed.desc.stride(2);
  p.num_rows = c.rows;
  p.rank = c.rank;
  return p;
}

DcpPackKey dcp_key(const DcpCase& c) {
  return {c.topk, c.has_row_starts, c.world_size, c.interleave};
}

// `order`: the PDL test runs the case behind a producer of the logits and the top-k indices.
std::string check_dcp_pack(const DcpCase& c, LaunchOrder order = LaunchOrder::alone) {
  const std::string label = case_label(
      "dsv4.dcp_pack", c.name + " (W=" + std::to_string(c.world_size) +
                           ", I=" + std::to_string(c.interleave) + ", rank " +
                           std::to_string(c.rank) + ", topk " + std::to_string(c.topk) +
                           (c.has_row_starts ? ", row starts" : ", no row starts") +
                           ", R=" + std::to_string(c.rows) + ", N=" + std::to_string(c.columns) +
                           ", " + std::string(to_string(order)) + ")");
  const DcpTensors t = make_dcp_tensors(c);
  in::HostTensor expected = t.packed;
  ref::dcp_pack(DcpPackKey{c.topk, c.has_row_starts, c.world_size, c.interleave},
                dcp_params(c, t, expected.as<float>()));
  Placement device;
  Producer producer;
  DcpPackArgs args;
  args.logits = device.put_produced(t.logits, producer, order);
  args.topk_indices = device.put_produced(t.topk_indices, producer, order);
  if (c.has_row_starts) args.row_starts = device.put(t.row_starts);
  args.packed = device.put(t.packed);
  args.dcp_rank = c.rank;
  args.dcp_world_size = c.world_size;
  args.cp_interleave = c.interleave;
  try {
    producer.run(order, [&](cuda::Stream stream, bool pdl) {
      args.pdl = pdl;
      DcpPackKernel::instance()(args, stream);
    });
    finish();
  } catch (const std::exception& error) {
    return label + ": the call failed: " + error.what();
  }
  std::string failures;
  append_failure(failures, label, "packed (score, id as a float)",
                 compare_tensor(expected, device.get(t.packed), {"row", "column", "pair"}));
  return failures;
}

std::vector<DcpCase> dcp_cases() {
  std::vector<DcpCase> cases;
  std::uint64_t seed = 71;
  int variant = 0;
  for (const int world_size : {2, 4, 8}) {
    for (const int interleave : {1, 2, 64}) {
      for (const bool row_starts : {false, true}) {
        DcpCase c;
        c.name = "ties, -inf, NaN, -1 inside and at the end, ids near 2^24, indices past the row";
        c.world_size = world_size;
        c.interleave = interleave;
        c.rank = (variant * 5 + 3) % world_size;
        c.has_row_starts = row_starts;
        c.rows = variant % 3 == 0 ? 1 : 17;
        c.columns = 3000 + variant * 37;
        c.layout = static_cast<PackedLayout>(variant % 3);
        c.logits_col_stride = variant % 4 == 1 ? 2 : 1;
        c.topk_col_stride = variant % 5 == 2 ? 2 : 1;
        c.seed = seed++;
        if (c.rows == 1) c.name += " (one row)";
        cases.push_back(c);
        ++variant;
      }
    }
  }
  for (const bool row_starts : {false, true}) {
    DcpCase c{.name = "N = 0: every index is -1",
              .has_row_starts = row_starts,
              .rows = 3,
              .columns = 0,
              .seed = seed++};
    cases.push_back(c);
  }
  cases.push_back({.name = "V4-Pro top-k, 64 rows",
                   .world_size = 4,
                   .rank = 3,
                   .topk = 1024,
                   .rows = 64,
                   .columns = 5000,
                   .layout = PackedLayout::gathered_slice,
                   .seed = seed++});
  cases.push_back({.name = "a 16384-token prefill chunk",
                   .world_size = 2,
                   .rank = 1,
                   .has_row_starts = true,
                   .rows = 16384,
                   .columns = 600,
                   .layout = PackedLayout::gathered_slice,
                   .seed = seed++});
  cases.push_back({.name = "top-k 2048 with row starts",
                   .world_size = 8,
                   .interleave = 2,
                   .rank = 6,
                   .has_row_starts = true,
                   .topk = 2048,
                   .rows = 5,
                   .columns = 9000,
                   .layout = PackedLayout::pair_major,
                   .seed = seed++});
  return cases;
}

TEST_F(Dsv4Gpu, DcpPackMatchesTheReferenceBitExactly) {
  std::vector<DcpPackKey> keys;
  for (const DcpCase& c : dcp_cases()) keys.push_back(dcp_key(c));
  precompile(DcpPackKernel::instance(), keys);
  for (const DcpCase& c : dcp_cases()) EXPECT_NO_FAILURE(check_dcp_pack(c));
}

// Programmatic dependent launch: behind a kernel that writes the logits and the top-k indices
// (poison until then), launched with and without PDL, the pack writes the reference's bytes.
// Every third case under 1000 rows (decode and prefill keys, every layout).
TEST_F(Dsv4Gpu, DcpPackMatchesTheReferenceBehindAProducerWithAndWithoutPdl) {
  for (const DcpCase& c : dcp_cases()) {
    if (c.rows >= 1000 || c.seed % 3 != 0) continue;  // every third case (by seed)
    for (const LaunchOrder order : kLaunchOrders) EXPECT_NO_FAILURE(check_dcp_pack(c, order));
  }
}

}  // namespace
}  // namespace zerojit::dsv4
