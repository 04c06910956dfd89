// Bandwidth cases of the indexer-Q kernels (spec 1), FP8 and MXFP4: decode steps and prefill
// chunks of consecutive positions, on the inputs of the GPU tests.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "dsv4/indexer_q/indexer_q.hpp"
#include "dsv4/indexer_q/reference.hpp"
#include "kernels/cases.hpp"

namespace zerojit::bench {
namespace {

// bytes = T * (H*D*2 [q bf16] + H*2 [weights bf16] + 8 [position] + R*4 [its f32 cos/sin row]
//              + outputs)
//   FP8:   outputs = H*D [q_fp8] + H*4 [weights_out f32]                      -> T * 25224
//   MXFP4: outputs = H*D/2 [q_packed] + H*D/32 [q_scale] + H*4 [weights_out]  -> T * 21384

constexpr std::int64_t kIndexerMaxPosition = 65536;

TokenSize indexer_size(std::string_view size) {
  if (size == "small") return {32, 0};
  if (size == "serving") return {8192, 2048};
  // The token counts vLLM's CuTeDSL kernel was measured at: a decode batch, then prefills.
  if (size == "t64") return {64, 0};
  if (size == "t512") return {512, 512};
  if (size == "t4096") return {4096, 2048};
  if (size == "t16384") return {16384, 2048};
  return {65536, 2048};
}

const std::vector<std::string> kIndexerSizes = {"small", "serving", "large", "t64",
                                                "t512",  "t4096",   "t16384"};

dsv4::IndexerQKey indexer_shape() {
  return {static_cast<int>(kIndexHeadDim), static_cast<int>(kRopeDim),
          static_cast<int>(kIndexHeads), DType::f32};
}

Case indexer_case(bool mxfp4, const std::string& size, const Context& context) {
  Case c;
  c.kernel = mxfp4 ? "indexer_q_mxfp4" : "indexer_q_fp8";
  c.size = size;
  const TokenSize shape = indexer_size(size);
  const std::int64_t tokens = shape.tokens;
  in::Random random(seed_of(c.kernel, size));
  in::IndexerQInputsHost host =
      in::make_indexer_q_inputs(random, tokens, kIndexHeads, kIndexHeadDim, kRopeDim, DType::f32,
                                kRopeDim, kIndexerMaxPosition);
  if (shape.chunk > 0) {  // prefill: consecutive positions per request
    for (std::int64_t first = 0; first < tokens; first += shape.chunk) {
      const std::int64_t start = random.uniform_int(0, kIndexerMaxPosition - shape.chunk);
      for (std::int64_t i = 0; i < shape.chunk && first + i < tokens; ++i) {
        host.positions.set<std::int64_t>(first + i, start + i);
      }
    }
  }
  const std::int64_t input_bytes =
      kIndexHeads * kIndexHeadDim * 2 + kIndexHeads * 2 + 8 + kCosSinRowBytes;
  const std::int64_t output_bytes =
      mxfp4 ? kIndexHeads * kIndexHeadDim / 2 + kIndexHeads * kIndexHeadDim / 32 + kIndexHeads * 4
            : kIndexHeads * kIndexHeadDim + kIndexHeads * 4;
  c.tokens = tokens;
  c.bytes = tokens * (input_bytes + output_bytes);
  c.written_bytes = tokens * output_bytes;
  c.formula = mxfp4 ? "T*(H*D*2 q + H*2 weights + 8 position + R*4 cos/sin + H*D/2 q_packed + "
                      "H*D/32 q_scale + H*4 weights_out) = T*21384"
                    : "T*(H*D*2 q + H*2 weights + 8 position + R*4 cos/sin + H*D q_fp8 + "
                      "H*4 weights_out) = T*25224";

  const in::HostTensor weights_out = in::make_tensor(DType::f32, {tokens, kIndexHeads});
  if (mxfp4) {
    const in::HostTensor packed =
        in::make_tensor(DType::u8, {tokens, kIndexHeads, kIndexHeadDim / 2});
    const in::HostTensor scales =
        in::make_tensor(DType::u8, {tokens, kIndexHeads, kIndexHeadDim / 32});
    add_input_sets(
        c, context,
        [&](DeviceSet& set) {
          dsv4::IndexerQMxFp4Args a;
          put_indexer_q_inputs(set, host, a);  // before its outputs
          a.q_packed = set.put(packed, true);
          a.q_scale = set.put(scales, true);
          a.weights_out = set.put(weights_out, true);
          return a;
        },
        [](const dsv4::IndexerQMxFp4Args& args, cuda::Stream stream) {
          dsv4::IndexerQMxFp4Kernel::instance()(args, stream);
        },
        [](const dsv4::IndexerQMxFp4Args& args, const Emulation& e) {
          auto& kernel = dsv4::IndexerQMxFp4Kernel::instance();
          emulate_planned<params::IndexerQParams>(
              kernel, kernel.launch_spec(args), e,
              [](const auto& block, const auto&) { ref::indexer_q_mxfp4(indexer_shape(), block); });
        });
  } else {
    const in::HostTensor q_fp8 = in::make_tensor(DType::u8, {tokens, kIndexHeads, kIndexHeadDim});
    add_input_sets(
        c, context,
        [&](DeviceSet& set) {
          dsv4::IndexerQFp8Args a;
          put_indexer_q_inputs(set, host, a);  // before its outputs
          a.q_fp8 = set.put(q_fp8, true);
          a.weights_out = set.put(weights_out, true);
          return a;
        },
        [](const dsv4::IndexerQFp8Args& args, cuda::Stream stream) {
          dsv4::IndexerQFp8Kernel::instance()(args, stream);
        },
        [](const dsv4::IndexerQFp8Args& args, const Emulation& e) {
          auto& kernel = dsv4::IndexerQFp8Kernel::instance();
          emulate_planned<params::IndexerQParams>(
              kernel, kernel.launch_spec(args), e,
              [](const auto& block, const auto&) { ref::indexer_q_fp8(indexer_shape(), block); });
        });
  }
  return c;
}

const CaseRegistrar kFp8{{.kernel = "indexer_q_fp8",
                          .sizes = kIndexerSizes,
                          .make = [](const std::string& size, const Context& context) {
                            return indexer_case(false, size, context);
                          }}};
const CaseRegistrar kMxFp4{{.kernel = "indexer_q_mxfp4",
                            .sizes = kIndexerSizes,
                            .make = [](const std::string& size, const Context& context) {
                              return indexer_case(true, size, context);
                            }}};

}  // namespace
}  // namespace zerojit::bench
