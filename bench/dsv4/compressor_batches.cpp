#include "compressor_batches.hpp"

#include <algorithm>

#include "kernels/cases.hpp"

namespace zerojit::bench {

std::vector<in::RequestChunk> compressor_requests(in::Random& random, std::int64_t tokens,
                                                  std::int64_t chunk, int ratio) {
  std::vector<in::RequestChunk> requests;
  constexpr std::int64_t kMaxFirstPosition = 60000;
  if (chunk == 0) {
    const std::int64_t boundaries = std::max<std::int64_t>(1, tokens / ratio);
    for (std::int64_t r = 0; r < tokens; ++r) {
      std::int64_t position = random.uniform_int(ratio * 2, kMaxFirstPosition);
      if (r < boundaries) position = position / ratio * ratio + ratio - 1;
      requests.push_back({position, 1});
    }
    return requests;
  }
  for (std::int64_t first = 0; first < tokens; first += chunk) {
    requests.push_back({random.uniform_int(0, kMaxFirstPosition), std::min(chunk, tokens - first)});
  }
  return requests;
}

CompressorMetadata compressor_metadata(in::Random& random,
                                       const std::vector<in::RequestChunk>& requests, int ratio,
                                       std::int64_t kv_slots) {
  CompressorMetadata m;
  m.boundaries = in::count_boundaries(requests, ratio);
  m.tokens = in::make_compressor_tokens(random, requests, ratio, kv_slots, 0.01);
  m.tensors = in::make_token_tensors(random, m.tokens, 0, 0, kRopeDim);
  return m;
}

in::HostTensor k_cache(bool full, std::int64_t pages, std::int64_t block_size) {
  const auto kind = full ? in::CacheKind::full_bf16 : in::CacheKind::ds_mla;
  return in::make_k_cache(kind, block_size, pages, 0, 0).tensor;
}

dsv4::C128CompressArgs put_c128_compress_args(DeviceSet& set, const CompressorMetadata& m,
                                              const dsv4::testing::CompressorState& state,
                                              const dsv4::testing::HostTensor& compressed) {
  dsv4::C128CompressArgs a;
  a.state_cache = set.put(state.state);
  a.token_to_req = set.put(m.tensors.token_to_req);
  a.positions = set.put(m.tensors.positions);
  a.slot_mapping = set.put(m.tensors.slot_mapping);
  a.block_table = set.put(state.block_table);
  a.compressed_kv = set.put(compressed, true);
  return a;
}

}  // namespace zerojit::bench
