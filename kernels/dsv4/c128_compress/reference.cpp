// The C128 compress's CPU reference (spec section 5): which tokens write and the softmax pooling
// of their 128 state rows (the pooling itself is compressor/reference.cpp's, shared with C4).
#include "dsv4/c128_compress/reference.hpp"

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

namespace zerojit::dsv4::reference {

std::vector<long long> c128_compress(const C128CompressKey& key,
                                     const zj::dsv4::C128CompressParams& params) {
  constexpr const char* kKernel = "c128_compress";
  const int head = key.head_size;
  if (head <= 0 || head % zj::dsv4::kC128CompressColumns != 0) {
    throw_invalid_argument(kKernel, "head_size must be a positive multiple of 64");
  }
  if (params.state_block_size != zj::dsv4::kC128StateBlockSize) {
    throw_invalid_argument(
        kKernel, "state_block_size must be 8, got " + std::to_string(params.state_block_size));
  }
  constexpr int kRows = zj::dsv4::kC128Ratio;
  constexpr long long kBs = zj::dsv4::kC128StateBlockSize;
  std::vector<long long> written;
  std::vector<PoolTerm> terms(kRows);
  std::vector<const float*> rows(kRows);
  for (long long t = 0; t < params.num_tokens; ++t) {
    if (t >= params.num_token_to_req || t >= params.num_positions) continue;
    const long long slot = params.slot_mapping[t];
    const long long position = params.positions[t];
    const int request = params.token_to_req[t];
    if (slot < 0 || position < 0 || (position + 1) % kRows != 0) continue;
    if (request < 0 || request >= params.block_table_rows) continue;
    if (position / kBs >= params.block_table_width) continue;
    const long long start = position - (kRows - 1);
    for (int r = 0; r < kRows; ++r) {
      const long long pos = start + r;
      const long long block =
          std::max(0, params.block_table[request * params.block_table_stride + pos / kBs]);
      rows[static_cast<std::size_t>(r)] = params.state_cache + block * params.state_block_stride +
                                          (pos % kBs) * params.state_row_stride;
    }
    float* out = params.compressed_kv + t * head;
    for (int e = 0; e < head; ++e) {
      for (int r = 0; r < kRows; ++r) {
        const float* row = rows[static_cast<std::size_t>(r)];
        terms[static_cast<std::size_t>(r)] = {row[e], row[head + e]};
      }
      out[e] = softmax_pool(terms.data(), kRows);
    }
    written.push_back(t);
  }
  return written;
}

}  // namespace zerojit::dsv4::reference

namespace zerojit::dsv4 {

std::vector<long long> C128CompressKernel::reference(const C128CompressKey& key,
                                                     const zj::dsv4::C128CompressParams& params) {
  return reference::c128_compress(key, params);
}

}  // namespace zerojit::dsv4
