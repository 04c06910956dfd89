// Bandwidth cases of the dequantize-and-gather kernel (spec 2): the compressed C4 cache's call
// of sparse prefill, on the inputs of the GPU tests.
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "dsv4/dequant_gather/dequant_gather.hpp"
#include "dsv4/dequant_gather/reference.hpp"
#include "dsv4/support/call_inputs.hpp"
#include "kernels/cases.hpp"

namespace zerojit::bench {
namespace {

// The compressed C4 cache's call: B = 64 rows a page (block 256 / 4), page stride
// round_up(64 * 584, 576) = 37440, no gather_lens (G = L), offset 0; each request gathers L_r
// rows (7/8 .. 1 of the size's row count) from pages in permuted order.
// bytes = sum_r L_r * (576 data + 8 scales + 512*2 out) + sum_r ceil(L_r/64)*4 [block table]
//         + R*4 [seq_lens]

constexpr std::int64_t kCompressedC4Block = 64;

// A size: `requests` requests, each gathering (7/8 .. 1 of) `rows` rows (exact when `exact`)
// from a cache of `block_size` rows a page; a sliding-window size (window > 0) gathers the last
// `window` of `rows` positions per request through gather_lens, as SWA prefill does.
struct GatherSize {
  std::int64_t requests;
  std::int64_t rows;
  int block_size = kCompressedC4Block;
  std::int64_t window = 0;
  bool exact = false;
};

GatherSize gather_size(std::string_view size) {
  if (size == "small") return {2, 32};
  if (size == "serving") return {2, 4096};
  if (size == "large") return {64, 4096};
  // The cases vLLM's CuTeDSL kernel was measured on (the compressed C4 cache of block 256,
  // R requests of L rows each; the SWA call; the C128 cache).
  if (size == "r8_l4096") return {8, 4096, kCompressedC4Block, 0, true};
  if (size == "r8_l65536") return {8, 65536, kCompressedC4Block, 0, true};
  if (size == "r64_l4096") return {64, 4096, kCompressedC4Block, 0, true};
  if (size == "r64_l16384") return {64, 16384, kCompressedC4Block, 0, true};
  if (size == "r64_l65536") return {64, 65536, kCompressedC4Block, 0, true};
  if (size == "swa_r64") return {64, 65536, 256, 128, true};
  if (size == "c128_r64_l512") return {64, 512, 2, 0, true};
  throw std::invalid_argument("dequant_gather has no size " + std::string(size));
}

Case dequant_gather_case(const std::string& size, const Context& context) {
  Case c;
  c.kernel = "dequant_gather";
  c.size = size;
  const GatherSize shape = gather_size(size);
  in::Random random(seed_of(c.kernel, size));
  in::GatherCase gather{.block_size = shape.block_size,
                        .has_gather_lens = shape.window > 0,
                        .extra_pages = 4,  // a few pages no request uses
                        .exponent_low = 105,
                        .exponent_high = 140};
  std::int64_t rows = 0, pages = 0;
  for (std::int64_t r = 0; r < shape.requests; ++r) {
    const std::int64_t length =
        shape.exact ? shape.rows : random.uniform_int(shape.rows - shape.rows / 8, shape.rows);
    gather.seq_lens.push_back(static_cast<std::int32_t>(length));
    const std::int64_t gathered = shape.window > 0 ? std::min(shape.window, length) : length;
    if (shape.window > 0) gather.gather_lens.push_back(static_cast<std::int32_t>(gathered));
    rows += gathered;
    pages += (length - 1) / shape.block_size - (length - gathered) / shape.block_size + 1;
  }
  // Each request reads its pages in permuted order (the GPU tests' builder).
  const in::GatherInputs inputs = in::make_gather_inputs(random, gather);
  const in::HostTensor out = in::make_gather_out(gather);

  c.tokens = rows;
  const std::int64_t length_bytes = shape.requests * 4 * (shape.window > 0 ? 2 : 1);
  c.bytes = rows * (576 + 8 + kHeadSize * 2) + pages * 4 + length_bytes;
  c.written_bytes = rows * kHeadSize * 2;
  c.formula =
      "rows*(576 data + 8 scales + 1024 out) + pages*4 block_table + requests*4 seq_lens "
      "(+ requests*4 gather_lens)";
  add_input_sets(
      c, context,
      [&](DeviceSet& set) {
        dsv4::DequantGatherArgs a;
        a.out = set.put(out, true);
        a.k_cache = set.put(inputs.cache);
        a.seq_lens = set.put(inputs.seq_lens);
        if (shape.window > 0) a.gather_lens = set.put(inputs.gather_lens);
        a.block_table = set.put(inputs.block_table);
        a.offset = 0;
        return a;
      },
      [grid_y = context.grid_x](const dsv4::DequantGatherArgs& args, cuda::Stream stream) {
        launch_with_grid<dsv4::DequantGatherKernel>(args, stream, grid_y, TunedAxis::y);
      },
      [](const dsv4::DequantGatherArgs& args, const Emulation& e) {
        auto& kernel = dsv4::DequantGatherKernel::instance();
        emulate_planned<params::DequantGatherParams>(
            kernel, kernel.launch_spec(args), e,
            [](const auto& block, const auto& key) { ref::dequant_gather(key, block); });
      });
  return c;
}

const CaseRegistrar kRegistrar{
    {.kernel = "dequant_gather",
     .sizes = {"small", "serving", "large", "r8_l4096", "r8_l65536", "r64_l4096", "r64_l16384",
               "r64_l65536", "swa_r64", "c128_r64_l512"},
     .make = dequant_gather_case}};

}  // namespace
}  // namespace zerojit::bench
