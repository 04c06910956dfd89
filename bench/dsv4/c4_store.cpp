// Bandwidth cases of the C4 compressor stores (spec 3, 4), fp8_ds_mla and full rows: decode
// steps with a share of boundary tokens and prefill chunks, on the inputs of the GPU tests.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "compressor_batches.hpp"
#include "dsv4/c4_store/c4_store.hpp"
#include "dsv4/c4_store/reference.hpp"
#include "kernels/cases.hpp"

namespace zerojit::bench {
namespace {

// State Bs = 4, compressed cache B = 64 (block 256 / 4). A token is active iff slot >= 0,
// kv_slot >= 0 and (p + 1) % 4 == 0. An active token pools rows p-7..p (those with pos >= 0),
// reading 512 kv + 512 score floats of each: consecutive boundaries read the other halves of
// the rows they share, so each state row's bytes are read once.
// bytes = T*28 [slot 8, position 8, token_to_req 4, kv_slot 8] + 1024 [norm weight bf16]
//         + sum_active (rows*4096 + blocks*4 [block table] + 256 [cos/sin row] + row_out)
//   row_out = 584 (fp8_ds_mla: 576 data + 8 scales) or 1024 (full bf16 row)

TokenSize c4_size(std::string_view size) {
  if (size == "small") return {32, 0};
  if (size == "serving") return {8192, 2048};
  // Prefill batches of 4 requests of T/4 tokens: the mid sizes of real batches.
  if (size == "p4096") return {4096, 1024};
  if (size == "p16384") return {16384, 4096};
  return {65536, 2048};
}

Case c4_case(bool full, const std::string& size, const Context& context) {
  Case c;
  c.kernel = full ? "c4_store_full" : "c4_store";
  c.size = size;
  const TokenSize shape = c4_size(size);
  in::Random random(seed_of(c.kernel, size));
  const std::vector<in::RequestChunk> requests =
      compressor_requests(random, shape.tokens, shape.chunk, 4);
  constexpr std::int64_t kStateBlock = 4;
  constexpr std::int64_t kCacheBlock = 64;
  const std::int64_t pages =
      (in::count_boundaries(requests, 4) + kCacheBlock - 1) / kCacheBlock + 2;
  const CompressorMetadata m = compressor_metadata(random, requests, 4, pages * kCacheBlock);
  const in::CompressorState state =
      in::make_compressor_state(random, requests, kStateBlock, 1024, 8, 0, 0, 1);
  const in::HostTensor weight = in::random_norm_weight(random, DType::bf16);
  const in::HostTensor cache = k_cache(full, pages, kCacheBlock);

  const std::int64_t row_out = full ? kFullBf16RowBytes : kDsMlaRowBytes;
  const auto tokens = static_cast<std::int64_t>(m.tokens.positions.size());
  std::int64_t active = 0, state_bytes = 0, table_bytes = 0;
  for (std::size_t t = 0; t < m.tokens.positions.size(); ++t) {
    const std::int64_t p = m.tokens.positions[t];
    if (m.tokens.slot_mapping[t] < 0 || m.tokens.kv_slot_mapping[t] < 0 || p < 0 ||
        (p + 1) % 4 != 0) {
      continue;
    }
    ++active;
    const std::int64_t first = std::max<std::int64_t>(0, p - 7);
    state_bytes += (p - first + 1) * 4096;
    table_bytes += (p / kStateBlock - first / kStateBlock + 1) * 4;
  }
  c.tokens = tokens;
  c.active_tokens = active;
  c.bytes = tokens * 28 + kNormWeightBytes + state_bytes + table_bytes +
            active * (kCosSinRowBytes + row_out);
  c.written_bytes = active * row_out;
  c.formula = std::string(
                  "T*28 metadata + 1024 norm weight + active*(rows*4096 state + blocks*4 "
                  "block_table + 256 cos/sin + ") +
              (full ? "1024 bf16 row)" : "584 ds_mla row)");
  add_input_sets(
      c, context,
      [&](DeviceSet& set) {
        dsv4::C4StoreArgs a;
        a.compress_ratio = 4;
        a.state_cache = set.put(state.state);
        a.token_to_req = set.put(m.tensors.token_to_req);
        a.positions = set.put(m.tensors.positions);
        a.slot_mapping = set.put(m.tensors.slot_mapping);
        a.block_table = set.put(state.block_table);
        a.rms_norm_weight = set.put(weight);
        a.eps = 1e-6f;
        a.cos_sin_cache = set.put(m.tensors.cos_sin);
        a.k_cache = set.put(cache, true);
        a.kv_slot_mapping = set.put(m.tensors.kv_slot_mapping);
        return a;
      },
      run_plain_or_full<dsv4::C4StoreKernel, dsv4::C4StoreFullKernel, dsv4::C4StoreArgs>(
          full, context.grid_x),
      [full](const dsv4::C4StoreArgs& args, const Emulation& e) {
        if (full) {
          auto& kernel = dsv4::C4StoreFullKernel::instance();
          emulate_planned<params::C4StoreFullParams>(
              kernel, kernel.launch_spec(args), e,
              [](const auto& block, const auto& key) { ref::c4_store_full(key, block); });
        } else {
          auto& kernel = dsv4::C4StoreKernel::instance();
          emulate_planned<params::C4StoreParams>(
              kernel, kernel.launch_spec(args), e,
              [](const auto& block, const auto& key) { ref::c4_store(key, block); });
        }
      });
  return c;
}

const CaseRegistrar kDsMla{{.kernel = "c4_store",
                            .sizes = {"small", "serving", "large", "p4096", "p16384"},
                            .make = [](const std::string& size, const Context& context) {
                              return c4_case(false, size, context);
                            }}};
const CaseRegistrar kFull{{.kernel = "c4_store_full",
                           .sizes = {"small", "serving", "large", "p4096", "p16384"},
                           .make = [](const std::string& size, const Context& context) {
                             return c4_case(true, size, context);
                           }}};

}  // namespace
}  // namespace zerojit::bench
