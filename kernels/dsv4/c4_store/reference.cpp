// The C4 stores' CPU references (spec sections 3 and 4): which tokens write, the pooling of the
// 8 overlapping state rows, then the shared norm and row stores (compressor/reference.cpp).
#include "dsv4/c4_store/reference.hpp"

#include <algorithm>
#include <array>
#include <cstddef>
#include <vector>

namespace zerojit::dsv4::reference {
namespace {

constexpr int kHead = zj::dsv4::kCompressorHeadSize;
constexpr long long kRowBytes = zj::dsv4::kDsMlaRowBytes;

struct C4Token {
  long long position;
  long long kv_slot;
  int request;
};

template <typename Params>
void validate_c4(const char* kernel, const Params& params) {
  if (params.state_block_size <= 0)
    throw_invalid_argument(kernel, "state_block_size must be positive");
  if (params.kv_cache_block_size <= 0)
    throw_invalid_argument(kernel, "kv_cache_block_size must be positive");
}

// Mirrors compressor_common.cuh's c4_load_token.
template <typename Params>
bool c4_token(const Params& params, long long token, C4Token& out) {
  if (token >= params.num_tokens || token >= params.num_token_to_req ||
      token >= params.num_positions || token >= params.num_kv_slots) {
    return false;
  }
  const long long slot = params.slot_mapping[token];
  const long long position = params.positions[token];
  const long long kv_slot = params.kv_slot_mapping[token];
  const int request = params.token_to_req[token];
  if (slot < 0 || position < 0 || (position + 1) % zj::dsv4::kC4Ratio != 0 || kv_slot < 0) {
    return false;
  }
  if (request < 0 || request >= params.block_table_rows) return false;
  if (position / params.state_block_size >= params.block_table_width) return false;
  out = {position, kv_slot, request};
  return true;
}

// Spec 3's pooling and norm for one active token: y[512].
template <typename Params>
void c4_pool_and_norm(const Params& params, const C4Token& token, NormWeightType weight_type,
                      float* y) {
  constexpr int kRows = zj::dsv4::kC4PooledRows;
  std::array<long long, kRows> row_offset{};
  for (int r = 0; r < kRows; ++r) {
    const long long pos = token.position - (kRows - 1) + r;
    if (pos < 0) {
      row_offset[static_cast<std::size_t>(r)] = -1;
      continue;
    }
    const long long column = pos / params.state_block_size;
    const long long row_in_block = pos % params.state_block_size;
    const long long block =
        std::max(0, params.block_table[token.request * params.block_table_stride + column]);
    row_offset[static_cast<std::size_t>(r)] = block * params.state_block_stride +
                                              row_in_block * params.state_row_stride +
                                              (r / 4) * kHead;
  }
  std::array<float, kHead> x{};
  std::array<PoolTerm, kRows> terms{};
  for (int e = 0; e < kHead; ++e) {
    int count = 0;
    for (int r = 0; r < kRows; ++r) {
      const long long offset = row_offset[static_cast<std::size_t>(r)];
      if (offset < 0) continue;
      const float* row = params.state_cache + offset;
      terms[static_cast<std::size_t>(count++)] = {row[e], row[zj::dsv4::kC4StateWidth + e]};
    }
    x[static_cast<std::size_t>(e)] = softmax_pool(terms.data(), count);
  }
  rms_norm_row(x.data(), params.rms_norm_weight, weight_type, params.eps, y);
}

const float* c4_cos_sin_row(const float* cos_sin_cache, long long stride, long long position) {
  return cos_sin_cache + (position / zj::dsv4::kC4Ratio) * zj::dsv4::kC4Ratio * stride;
}

}  // namespace

std::vector<long long> c4_store(const C4StoreKey& key, const zj::dsv4::C4StoreParams& params) {
  constexpr const char* kKernel = "c4_store";
  validate_c4(kKernel, params);
  if (params.kv_block_stride_bytes < params.kv_cache_block_size * kRowBytes) {
    throw_invalid_argument(kKernel, "kv_block_stride_bytes is below kv_cache_block_size * 584");
  }
  std::vector<long long> written;
  std::array<float, kHead> y{};
  for (long long t = 0; t < params.num_tokens; ++t) {
    C4Token token{};
    if (!c4_token(params, t, token)) continue;
    c4_pool_and_norm(params, token, norm_weight_type(key.norm_weight_dtype), y.data());
    store_ds_mla_row(
        y.data(), c4_cos_sin_row(params.cos_sin_cache, params.cos_sin_stride, token.position),
        params.k_cache, params.kv_block_stride_bytes, params.kv_cache_block_size, token.kv_slot);
    written.push_back(token.kv_slot);
  }
  return written;
}

std::vector<long long> c4_store_full(const C4StoreFullKey& key,
                                     const zj::dsv4::C4StoreFullParams& params) {
  constexpr const char* kKernel = "c4_store_full";
  validate_c4(kKernel, params);
  std::vector<long long> written;
  std::array<float, kHead> y{};
  const float fp8_scale = key.store_full_fp8 ? params.fp8_scale[0] : 1.0f;
  for (long long t = 0; t < params.num_tokens; ++t) {
    C4Token token{};
    if (!c4_token(params, t, token)) continue;
    c4_pool_and_norm(params, token, norm_weight_type(key.norm_weight_dtype), y.data());
    store_full_row(y.data(),
                   c4_cos_sin_row(params.cos_sin_cache, params.cos_sin_stride, token.position),
                   params.k_cache, params.kv_block_stride_bytes, params.kv_row_stride_bytes,
                   params.kv_cache_block_size, token.kv_slot, key.store_full_fp8, fp8_scale);
    written.push_back(token.kv_slot);
  }
  return written;
}

}  // namespace zerojit::dsv4::reference

namespace zerojit::dsv4 {

std::vector<long long> C4StoreKernel::reference(const C4StoreKey& key,
                                                const zj::dsv4::C4StoreParams& params) {
  return reference::c4_store(key, params);
}

std::vector<long long> C4StoreFullKernel::reference(const C4StoreFullKey& key,
                                                    const zj::dsv4::C4StoreFullParams& params) {
  return reference::c4_store_full(key, params);
}

}  // namespace zerojit::dsv4
