// Bandwidth cases of the DCP top-k candidate pack (spec 12): decode rows over the whole local
// width and prefill rows of 2-4 requests with row starts.
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "dsv4/dcp_pack/dcp_pack.hpp"
#include "dsv4/dcp_pack/reference.hpp"
#include "kernels/cases.hpp"

namespace zerojit::bench {
namespace {

// DSv4-Flash top-k 512, DCP world size 2, interleave 1, rank 1. Decode rows have no row starts
// and index the whole local width N; prefill rows (serving, large) belong to 2-4 requests whose
// columns start at row_starts and span N / requests. Each row holds distinct local indices in
// random order; 3 % of the rows have fewer candidates than 512 and pad with -1.
// bytes = sum_rows (K*(4 [index] + 8 [packed pair]) + valid*4 [gathered logit])
//         + R*4 [row_starts, prefill]

struct DcpSize {
  std::int64_t rows;
  std::int64_t width;     // N
  std::int64_t requests;  // 0 = decode (no row starts)
};

DcpSize dcp_size(std::string_view size) {
  if (size == "small") return {32, 16384, 0};
  if (size == "serving") return {8192, 8192, 4};
  return {65536, 2048, 2};
}

constexpr int kDcpTopK = 512;
constexpr int kDcpWorldSize = 2;
constexpr int kDcpRank = 1;

Case dcp_case(const std::string& size, const Context& context) {
  Case c;
  c.kernel = "dcp_pack";
  c.size = size;
  const DcpSize shape = dcp_size(size);
  in::Random random(seed_of(c.kernel, size));
  const std::int64_t rows = shape.rows;
  in::HostTensor logits = in::make_tensor(DType::f32, {rows, shape.width});
  in::HostTensor indices = in::make_tensor(DType::i32, {rows, kDcpTopK});
  std::vector<std::int32_t> starts(static_cast<std::size_t>(rows), 0);
  const std::int64_t span = shape.requests > 0 ? shape.width / shape.requests : shape.width;
  for (std::int64_t r = 0; r < rows; ++r) {
    if (shape.requests > 0)
      starts[static_cast<std::size_t>(r)] =
          static_cast<std::int32_t>(r * shape.requests / rows * span);
  }
  // Rows in chunks, each from its own generator, filled in parallel.
  constexpr std::int64_t kRowsPerChunk = 256;
  const std::int64_t chunks = (rows + kRowsPerChunk - 1) / kRowsPerChunk;
  std::vector<std::uint64_t> seeds(static_cast<std::size_t>(chunks));
  for (auto& seed : seeds) seed = random.next();
  std::vector<std::int64_t> valid_per_chunk(static_cast<std::size_t>(chunks), 0);
  std::vector<std::int64_t> sectors_per_chunk(static_cast<std::size_t>(chunks), 0);
  float* logit_values = logits.as<float>();
  std::int32_t* index_values = indices.as<std::int32_t>();
  zerojit::parallel_for(static_cast<std::size_t>(chunks), 0, [&](std::size_t chunk) {
    in::Random chunk_random(seeds[chunk]);
    std::vector<std::int32_t> pool(static_cast<std::size_t>(span));
    std::vector<bool> sector_touched(static_cast<std::size_t>((shape.width + 7) / 8));
    const std::int64_t first = static_cast<std::int64_t>(chunk) * kRowsPerChunk;
    for (std::int64_t r = first; r < std::min(rows, first + kRowsPerChunk); ++r) {
      for (std::int64_t col = 0; col < shape.width; ++col) {
        logit_values[r * shape.width + col] = in::random_logit(chunk_random, 0.001, 0.0005);
      }
      std::int64_t valid = std::min<std::int64_t>(kDcpTopK, span);
      if (chunk_random.chance(0.03)) valid = chunk_random.uniform_int(0, valid - 1);
      std::iota(pool.begin(), pool.end(), 0);
      for (std::int64_t k = 0; k < kDcpTopK; ++k) {
        std::int32_t value = -1;
        if (k < valid) {  // a partial shuffle: distinct local positions
          const auto j = static_cast<std::size_t>(chunk_random.uniform_int(k, span - 1));
          std::swap(pool[static_cast<std::size_t>(k)], pool[j]);
          value = pool[static_cast<std::size_t>(k)];
        }
        index_values[r * kDcpTopK + k] = value;
      }
      valid_per_chunk[chunk] += valid;
      // Rows are 8 KB or more apart and each tensor is 256-byte aligned, so the row's 32-byte
      // sectors are its columns / 8.
      std::fill(sector_touched.begin(), sector_touched.end(), false);
      for (std::int64_t k = 0; k < valid; ++k) {
        const std::int64_t column =
            starts[static_cast<std::size_t>(r)] + index_values[r * kDcpTopK + k];
        const auto sector = static_cast<std::size_t>(column / 8);
        sectors_per_chunk[chunk] += sector_touched[sector] ? 0 : 1;
        sector_touched[sector] = true;
      }
    }
  });
  const std::int64_t valid =
      std::accumulate(valid_per_chunk.begin(), valid_per_chunk.end(), std::int64_t{0});
  const in::HostTensor row_starts = in::tensor_of(std::span<const std::int32_t>(starts));
  const in::HostTensor packed = in::make_tensor(DType::f32, {rows, kDcpTopK, 2});

  const bool prefill = shape.requests > 0;
  c.tokens = rows;
  c.bytes = rows * kDcpTopK * (4 + 8) + valid * 4 + (prefill ? rows * 4 : 0);
  c.written_bytes = rows * kDcpTopK * 8;
  const std::int64_t sectors =
      std::accumulate(sectors_per_chunk.begin(), sectors_per_chunk.end(), std::int64_t{0});
  c.sector_bytes = c.bytes - valid * 4 + sectors * 32;
  c.formula = std::string("R*K*(4 index + 8 packed) + valid*4 logits") +
              (prefill ? " + R*4 row_starts" : "");
  add_input_sets(
      c, context,
      [&](DeviceSet& set) {
        dsv4::DcpPackArgs a;
        a.logits = set.put(logits);
        a.topk_indices = set.put(indices);
        if (prefill) a.row_starts = set.put(row_starts);
        a.packed = set.put(packed, true);
        a.dcp_rank = kDcpRank;
        a.dcp_world_size = kDcpWorldSize;
        a.cp_interleave = 1;
        return a;
      },
      [](const dsv4::DcpPackArgs& args, cuda::Stream stream) {
        dsv4::DcpPackKernel::instance()(args, stream);
      },
      [](const dsv4::DcpPackArgs& args, const Emulation& e) {
        auto& kernel = dsv4::DcpPackKernel::instance();
        emulate_planned<params::DcpPackParams>(
            kernel, kernel.launch_spec(args), e,
            [](const auto& block, const auto& key) { ref::dcp_pack(key, block); });
      });
  return c;
}

const CaseRegistrar kRegistrar{{.kernel = "dcp_pack", .make = dcp_case}};

}  // namespace
}  // namespace zerojit::bench
