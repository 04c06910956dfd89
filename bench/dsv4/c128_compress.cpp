// Bandwidth cases of the C128 compress kernel (spec 5): decode steps with a share of boundary
// tokens and prefill chunks, on the inputs of the GPU tests.
#include <cstdint>
#include <string>
#include <vector>

#include "compressor_batches.hpp"
#include "dsv4/c128_compress/c128_compress.hpp"
#include "dsv4/c128_compress/reference.hpp"
#include "kernels/cases.hpp"

namespace zerojit::bench {
namespace {

// State Bs = 8. A token is active iff slot >= 0 and (p + 1) % 128 == 0; it pools rows
// p-127..p (512 kv + 512 score floats each; boundaries never share rows).
// bytes = T*20 [slot 8, position 8, token_to_req 4]
//         + active*(128*4096 [state rows] + 16*4 [block table] + 2048 [compressed_kv row f32])

TokenSize c128_compress_size(std::string_view size) {
  if (size == "small") return {64, 0};
  if (size == "serving") return {8192, 2048};
  // Prefill batches of 4 requests of T/4 tokens: the mid sizes of real batches.
  if (size == "p4096") return {4096, 1024};
  if (size == "p16384") return {16384, 4096};
  return {131072, 4096};
}

Case c128_compress_case(const std::string& size, const Context& context) {
  Case c;
  c.kernel = "c128_compress";
  c.size = size;
  const TokenSize shape = c128_compress_size(size);
  in::Random random(seed_of(c.kernel, size));
  const std::vector<in::RequestChunk> requests =
      compressor_requests(random, shape.tokens, shape.chunk, 128);
  const CompressorMetadata m =
      compressor_metadata(random, requests, 128, in::count_boundaries(requests, 128) + 1);
  const in::CompressorState state =
      in::make_compressor_state(random, requests, 8, 512, 128, 0, 0, 1);
  const auto tokens = static_cast<std::int64_t>(m.tokens.positions.size());
  const in::HostTensor compressed = in::make_tensor(DType::f32, {tokens, kHeadSize});

  std::int64_t active = 0;
  for (std::size_t t = 0; t < m.tokens.positions.size(); ++t) {
    const std::int64_t p = m.tokens.positions[t];
    if (m.tokens.slot_mapping[t] >= 0 && p >= 0 && (p + 1) % 128 == 0) ++active;
  }
  c.tokens = tokens;
  c.active_tokens = active;
  c.bytes = tokens * 20 + active * (128 * 4096 + 16 * 4 + kHeadSize * 4);
  c.written_bytes = active * kHeadSize * 4;
  c.formula = "T*20 metadata + active*(128*4096 state + 16*4 block_table + 2048 compressed_kv)";
  add_input_sets(
      c, context, [&](DeviceSet& set) { return put_c128_compress_args(set, m, state, compressed); },
      [grid_x = context.grid_x](const dsv4::C128CompressArgs& args, cuda::Stream stream) {
        launch_with_grid<dsv4::C128CompressKernel>(args, stream, grid_x);
      },
      [](const dsv4::C128CompressArgs& args, const Emulation& e) {
        auto& kernel = dsv4::C128CompressKernel::instance();
        emulate_planned<params::C128CompressParams>(
            kernel, kernel.launch_spec(args), e,
            [](const auto& block, const auto& key) { ref::c128_compress(key, block); });
      });
  return c;
}

const CaseRegistrar kRegistrar{{.kernel = "c128_compress",
                                .sizes = {"small", "serving", "large", "p4096", "p16384"},
                                .make = c128_compress_case}};

}  // namespace
}  // namespace zerojit::bench
