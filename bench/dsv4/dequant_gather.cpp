// Bandwidth cases of the dequantize-and-gather kernel (spec 2): the compressed C4 cache's call
// of sparse prefill, on the inputs of the GPU tests.
#include <cstdint>
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

constexpr std::int64_t kGatherBlockSize = 64;

struct GatherSize {
  std::int64_t requests;
  std::int64_t rows;
};

GatherSize gather_size(std::string_view size) {
  if (size == "small") return {2, 32};
  if (size == "serving") return {2, 4096};
  return {64, 4096};
}

Case dequant_gather_case(const std::string& size, const Context& context) {
  Case c;
  c.kernel = "dequant_gather";
  c.size = size;
  const GatherSize shape = gather_size(size);
  in::Random random(seed_of(c.kernel, size));
  in::GatherCase gather{.block_size = kGatherBlockSize,
                        .extra_pages = 4,  // a few pages no request uses
                        .exponent_low = 105,
                        .exponent_high = 140};
  std::int64_t rows = 0, pages = 0;
  for (std::int64_t r = 0; r < shape.requests; ++r) {
    const std::int64_t length = random.uniform_int(shape.rows - shape.rows / 8, shape.rows);
    gather.seq_lens.push_back(static_cast<std::int32_t>(length));
    rows += length;
    pages += (length + kGatherBlockSize - 1) / kGatherBlockSize;
  }
  // Each request reads its pages from column 0 on, in permuted order (the GPU tests' builder).
  const in::GatherInputs inputs = in::make_gather_inputs(random, gather);
  const in::HostTensor out = in::make_gather_out(gather);

  c.tokens = rows;
  c.bytes = rows * (576 + 8 + kHeadSize * 2) + pages * 4 + shape.requests * 4;
  c.written_bytes = rows * kHeadSize * 2;
  c.formula = "rows*(576 data + 8 scales + 1024 out) + pages*4 block_table + requests*4 seq_lens";
  add_input_sets(
      c, context,
      [&](DeviceSet& set) {
        dsv4::DequantGatherArgs a;
        a.out = set.put(out, true);
        a.k_cache = set.put(inputs.cache);
        a.seq_lens = set.put(inputs.seq_lens);
        a.block_table = set.put(inputs.block_table);
        a.offset = 0;
        return a;
      },
      [](const dsv4::DequantGatherArgs& args, cuda::Stream stream) {
        dsv4::DequantGatherKernel::instance()(args, stream);
      },
      [](const dsv4::DequantGatherArgs& args, const Emulation& e) {
        auto& kernel = dsv4::DequantGatherKernel::instance();
        emulate_planned<params::DequantGatherParams>(
            kernel, kernel.plan(args), e, [](const auto& block, const auto& key) {
              ref::dequant_gather(block, key.block_size, key.has_gather_lens);
            });
      });
  return c;
}

const CaseRegistrar kRegistrar{{.kernel = "dequant_gather", .make = dequant_gather_case}};

}  // namespace
}  // namespace zerojit::bench
