// The dequantize-and-gather kernel on a GPU (spec section 2) against its CPU reference: every
// byte of `out` bit-exact (spec sections 10 and 11), for the three caches prefill reads (window
// B=256 with gather_lens, C4 B=64, C128 B=2), padded and strided workspaces, block-table holes,
// every exponent, >= 16k rows, and the prefill workspace filled by two calls. A mismatch names
// the source page, code and exponent. The harness is dsv4/support/gpu_harness.hpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "dsv4/dequant_gather/reference.hpp"
#include "dsv4/support/gpu_harness.hpp"

namespace zerojit::dsv4 {
namespace {

using namespace zerojit::dsv4::gpu_test;

// Runs the reference for one call into `expected_out`.
void gather_reference(const GatherCase& c, const GatherInputs& inputs,
                      in::HostTensor& expected_out) {
  params::DequantGatherParams p{};
  p.out = expected_out.as<unsigned short>();
  p.out_req_stride = expected_out.desc.stride(0);
  p.out_row_stride = expected_out.desc.stride(1);
  p.num_rows_out = expected_out.desc.size(1);
  p.k_cache = inputs.cache.as<unsigned char>();
  p.page_stride_bytes = inputs.page_stride;
  p.seq_lens = inputs.seq_lens.as<int>();
  p.gather_lens = c.has_gather_lens ? inputs.gather_lens.as<int>() : nullptr;
  p.block_table = inputs.block_table.as<int>();
  p.block_table_row_stride = inputs.width;
  p.max_blocks = inputs.width;
  p.offset = c.offset;
  p.num_reqs = static_cast<long long>(c.seq_lens.size());
  ref::dequant_gather(DequantGatherKey{c.block_size, c.has_gather_lens}, p);
}

// With a producer (the PDL test), the K cache is what it writes.
DequantGatherArgs gather_args(Placement& device, const GatherCase& c, const GatherInputs& inputs,
                              TensorRef out, Producer* producer = nullptr,
                              LaunchOrder order = LaunchOrder::alone) {
  DequantGatherArgs args;
  args.out = out;
  args.k_cache = producer != nullptr ? device.put_produced(inputs.cache, *producer, order)
                                     : device.put(inputs.cache);
  args.seq_lens = device.put(inputs.seq_lens);
  if (c.has_gather_lens) args.gather_lens = device.put(inputs.gather_lens);
  args.block_table = device.put(inputs.block_table);
  args.offset = c.offset;
  return args;
}

// For a mismatching byte of `out`: where the row came from (position, page, source code and
// exponent), or that the row should not have been written at all.
in::ByteLocator gather_source_locator(const GatherCase& c, const GatherInputs& inputs,
                                      const in::HostTensor& out, in::ByteLocator element) {
  return [&c, &inputs, &out, element = std::move(element)](std::int64_t offset) {
    std::string text = element(offset);
    const std::int64_t relative = offset - out.offset_bytes;
    if (relative < 0) return text;
    const std::int64_t index = relative / 2;
    const std::int64_t r = index / out.desc.stride(0);
    const std::int64_t row = index % out.desc.stride(0) / out.desc.stride(1);
    const std::int64_t dim = index % out.desc.stride(0) % out.desc.stride(1);
    if (r >= out.desc.size(0) || row >= out.desc.size(1) || dim >= 512) return text;
    const std::int64_t length = c.seq_lens[static_cast<std::size_t>(r)];
    const std::int64_t gathered =
        c.has_gather_lens ? c.gather_lens[static_cast<std::size_t>(r)] : length;
    const std::int64_t i = row - c.offset;
    if (i < 0 || i >= gathered) {
      return text + "; this row is outside [offset, offset + G) = [" + std::to_string(c.offset) +
             ", " + std::to_string(c.offset + gathered) + ") and must stay untouched";
    }
    const std::int64_t position = length - gathered + i;
    if (position < 0) return text + "; position " + std::to_string(position) + " < 0 is skipped";
    const std::int64_t page =
        inputs.block_table.get<std::int32_t>(r * inputs.width + position / c.block_size);
    text += "; source: position " + std::to_string(position) + ", page " + std::to_string(page) +
            ", row " + std::to_string(position % c.block_size);
    if (page < 0) return text + " (a -1 page: the row must be skipped)";
    const std::uint8_t* base = inputs.cache.base() + page * inputs.page_stride;
    const std::int64_t row_in_page = position % c.block_size;
    if (dim < 448) {
      text += ", e4m3 code " + in::hex(base[row_in_page * 576 + dim]) + ", exponent " +
              std::to_string(base[c.block_size * 576 + row_in_page * 8 + dim / 64]);
    } else {
      text += ", bf16 tail bytes at " + std::to_string(448 + 2 * (dim - 448));
    }
    return text;
  };
}

std::string check_dequant_gather(const GatherCase& c, LaunchOrder order = LaunchOrder::alone) {
  const std::string label =
      case_label("dsv4.dequant_gather", c.name + " (" + std::string(to_string(order)) + ")");
  in::Random random(c.seed);
  const GatherInputs inputs = make_gather_inputs(random, c);
  const in::HostTensor out = make_gather_out(c);
  in::HostTensor expected = out;
  gather_reference(c, inputs, expected);
  Placement device;
  Producer producer;
  try {
    DequantGatherArgs args = gather_args(device, c, inputs, device.put(out), &producer, order);
    producer.run(order, [&](cuda::Stream stream, bool pdl) {
      args.pdl = pdl;
      DequantGatherKernel::instance()(args, stream);
    });
    finish();
  } catch (const std::exception& error) {
    return label + ": the call failed: " + error.what();
  }
  const std::vector<std::uint8_t> actual = device.get(out);
  std::string failures;
  append_failure(failures, label, "out",
                 in::compare_bytes(
                     expected.bytes, actual,
                     gather_source_locator(c, inputs, expected,
                                           in::element_locator(expected, {"request", "row", "dim"},
                                                               expected.bytes, actual))));
  return failures;
}

std::vector<GatherCase> gather_cases() {
  std::vector<GatherCase> cases;
  {
    GatherCase c{.name = "one token, sliding-window cache (B=256, gather_lens)",
                 .block_size = 256,
                 .has_gather_lens = true,
                 .seq_lens = {1},
                 .gather_lens = {1},
                 .seed = 21};
    cases.push_back(c);
  }
  {
    GatherCase c{.name = "windows of 128 at offset 37, lengths off the block, an empty request",
                 .block_size = 256,
                 .has_gather_lens = true,
                 .seq_lens = {1000, 300, 0, 129, 77},
                 .gather_lens = {128, 128, 0, 128, 77},
                 .offset = 37,
                 .rows_out = 37 + 128 + 3,
                 .seed = 22};
    cases.push_back(c);
  }
  {
    GatherCase c{.name = "C4 cache (B=64), padded out rows and requests, wider page stride",
                 .block_size = 64,
                 .seq_lens = {700, 64, 1, 129},
                 .out_row_stride = 520,
                 .out_request_padding = 64,
                 .page_stride = in::default_page_stride(64) + 64,
                 .seed = 23};
    cases.push_back(c);
  }
  {
    GatherCase c{.name = "C128 cache (B=2), block-table holes",
                 .block_size = 2,
                 .seq_lens = {1, 2, 3, 255},
                 .holes = 3,
                 .seed = 24};
    cases.push_back(c);
  }
  {
    GatherCase c{.name =
                     "B=16 (block 64's C4 cache), exponents 0..254 (zero factor, bf16 "
                     "subnormals, overflow to inf)",
                 .block_size = 16,
                 .seq_lens = {100, 33},
                 .exponent_low = 0,
                 .exponent_high = 254,
                 .seed = 25};
    cases.push_back(c);
  }
  {
    GatherCase c{.name = "out rows end before the gather does (rows past M are skipped)",
                 .block_size = 64,
                 .seq_lens = {300, 90},
                 .offset = 5,
                 .rows_out = 200,
                 .seed = 26};
    cases.push_back(c);
  }
  {
    GatherCase c{.name = "gather_lens longer than seq_lens (positions < 0 are skipped)",
                 .block_size = 256,
                 .has_gather_lens = true,
                 .seq_lens = {5, 300},
                 .gather_lens = {9, 128},
                 .seed = 27};
    cases.push_back(c);
  }
  {
    GatherCase c{.name = "16596 rows from 4 requests (B=64)",
                 .block_size = 64,
                 .seq_lens = {4500, 4096, 5000, 3000},
                 .extra_pages = 17,
                 .seed = 28};
    cases.push_back(c);
  }
  {
    GatherCase c{.name = "16391 rows with gather_lens (B=256)",
                 .block_size = 256,
                 .has_gather_lens = true,
                 .seq_lens = {8200, 9000},
                 .gather_lens = {8200, 8191},
                 .seed = 29};
    cases.push_back(c);
  }
  return cases;
}

TEST_F(Dsv4Gpu, DequantGatherMatchesTheReferenceBitExactly) {
  std::vector<DequantGatherKey> keys;
  for (const GatherCase& c : gather_cases()) keys.push_back({c.block_size, c.has_gather_lens});
  precompile(DequantGatherKernel::instance(), keys);
  for (const GatherCase& c : gather_cases()) EXPECT_NO_FAILURE(check_dequant_gather(c));
}

// Programmatic dependent launch: behind a kernel that writes the K cache (poison until then),
// launched with and without PDL, the gathers write the reference's bytes. The cases under
// 4096 rows.
TEST_F(Dsv4Gpu, DequantGatherMatchesTheReferenceBehindAProducerWithAndWithoutPdl) {
  for (const GatherCase& c : gather_cases()) {
    std::int64_t rows = 0;
    for (std::size_t r = 0; r < c.seq_lens.size(); ++r) {
      rows += c.has_gather_lens ? c.gather_lens[r] : c.seq_lens[r];
    }
    if (rows >= 4096) continue;
    for (const LaunchOrder order : kLaunchOrders) EXPECT_NO_FAILURE(check_dequant_gather(c, order));
  }
}

TEST_F(Dsv4Gpu, DequantGatherBuildsThePrefillWorkspaceInTwoCalls) {
  // As sparse prefill does: the compressed cache (B=64, seq_lens // 4, no gather_lens) fills
  // rows [0, N), then the sliding-window cache (B=256, the last 128 positions) rows [N, N + 128).
  precompile(DequantGatherKernel::instance(), {{64, false}, {256, true}});
  const std::vector<std::int32_t> lengths = {5000, 130, 1, 2048};
  GatherCase compressed{.name = "compressed part", .block_size = 64, .seed = 31};
  GatherCase window{.name = "window part", .block_size = 256, .has_gather_lens = true, .seed = 32};
  std::int64_t compressed_rows = 0;
  for (std::int32_t length : lengths) {
    compressed.seq_lens.push_back(length / 4);
    window.seq_lens.push_back(length);
    window.gather_lens.push_back(std::min(length, 128));
    compressed_rows = std::max<std::int64_t>(compressed_rows, length / 4);
  }
  window.offset = compressed_rows;
  compressed.rows_out = window.rows_out = compressed_rows + 128;
  in::Random random(33);
  const GatherInputs compressed_inputs = make_gather_inputs(random, compressed);
  const GatherInputs window_inputs = make_gather_inputs(random, window);
  const in::HostTensor out = make_gather_out(compressed);
  in::HostTensor expected = out;
  gather_reference(compressed, compressed_inputs, expected);
  gather_reference(window, window_inputs, expected);
  Placement device;
  const TensorRef out_ref = device.put(out);
  DequantGatherKernel::instance()(gather_args(device, compressed, compressed_inputs, out_ref));
  DequantGatherKernel::instance()(gather_args(device, window, window_inputs, out_ref));
  finish();
  const std::vector<std::uint8_t> actual = device.get(out);
  std::string failures;
  append_failure(failures,
                 case_label("dsv4.dequant_gather", "prefill workspace in two calls (rows [0, " +
                                                       std::to_string(compressed_rows) +
                                                       ") compressed, then the window)"),
                 "out", compare_tensor(expected, actual, {"request", "row", "dim"}));
  EXPECT_NO_FAILURE(failures);
}

}  // namespace
}  // namespace zerojit::dsv4
