// The C128 stores' CPU references (spec sections 6 and 7): which tokens write, then the shared
// norm and row stores (compressor/reference.cpp) on each one's compressed_kv row.
#include "dsv4/c128_store/reference.hpp"

#include <array>
#include <vector>

namespace zerojit::dsv4::reference {
namespace {

constexpr int kHead = zj::dsv4::kCompressorHeadSize;
constexpr long long kRowBytes = zj::dsv4::kDsMlaRowBytes;

// Whether token `token` is a boundary token that writes; if so, its position and kv slot.
template <typename Params>
bool c128_store_token(const Params& params, long long token, long long& position,
                      long long& kv_slot) {
  if (token >= params.num_tokens || token >= params.num_positions || token >= params.num_kv_slots) {
    return false;
  }
  const long long slot = params.slot_mapping[token];
  position = params.positions[token];
  kv_slot = params.kv_slot_mapping[token];
  return slot >= 0 && position >= 0 && (position + 1) % zj::dsv4::kC128Ratio == 0 && kv_slot >= 0;
}

// The cos/sin row of a boundary token: its compressed position, p - 127 = (p / 128) * 128.
template <typename Params>
const float* c128_cos_sin_row(const Params& params, long long position) {
  return params.cos_sin_cache + (position - (zj::dsv4::kC128Ratio - 1)) * params.cos_sin_stride;
}

// Each boundary token's compressed_kv row RMS-normed, then stored by `store_row(normed,
// cos_sin, kv_slot)`; returns the kv slots written, in token order.
template <typename Params, typename StoreRow>
std::vector<long long> store_normed_rows(const Params& params, DType norm_weight_dtype,
                                         StoreRow store_row) {
  std::vector<long long> written;
  std::array<float, kHead> y{};
  for (long long t = 0; t < params.num_tokens; ++t) {
    long long position = 0;
    long long kv_slot = 0;
    if (!c128_store_token(params, t, position, kv_slot)) continue;
    rms_norm_row(params.compressed_kv + t * kHead, params.rms_norm_weight,
                 norm_weight_type(norm_weight_dtype), params.eps, y.data());
    store_row(y.data(), c128_cos_sin_row(params, position), kv_slot);
    written.push_back(kv_slot);
  }
  return written;
}

}  // namespace

std::vector<long long> c128_store(const C128StoreKey& key,
                                  const zj::dsv4::C128StoreParams& params) {
  constexpr const char* kKernel = "c128_store";
  if (key.kv_cache_block_size <= 0)
    throw_invalid_argument(kKernel, "kv_cache_block_size must be positive");
  if (key.kv_block_stride < key.kv_cache_block_size * kRowBytes) {
    throw_invalid_argument(kKernel, "kv_block_stride is below kv_cache_block_size * 584");
  }
  return store_normed_rows(params, key.norm_weight_dtype,
                           [&](const float* y, const float* cos_sin, long long kv_slot) {
                             store_ds_mla_row(y, cos_sin, params.k_cache, key.kv_block_stride,
                                              key.kv_cache_block_size, kv_slot);
                           });
}

std::vector<long long> c128_store_full(const C128StoreFullKey& key,
                                       const zj::dsv4::C128StoreFullParams& params) {
  constexpr const char* kKernel = "c128_store_full";
  if (params.kv_cache_block_size <= 0)
    throw_invalid_argument(kKernel, "kv_cache_block_size must be positive");
  const float fp8_scale = key.store_full_fp8 ? params.fp8_scale[0] : 1.0f;
  return store_normed_rows(
      params, key.norm_weight_dtype, [&](const float* y, const float* cos_sin, long long kv_slot) {
        store_full_row(y, cos_sin, params.k_cache, params.kv_block_stride_bytes,
                       params.kv_row_stride_bytes, params.kv_cache_block_size, kv_slot,
                       key.store_full_fp8, fp8_scale);
      });
}

}  // namespace zerojit::dsv4::reference

namespace zerojit::dsv4 {

std::vector<long long> C128StoreKernel::reference(const C128StoreKey& key,
                                                  const zj::dsv4::C128StoreParams& params) {
  return reference::c128_store(key, params);
}

std::vector<long long> C128StoreFullKernel::reference(const C128StoreFullKey& key,
                                                      const zj::dsv4::C128StoreFullParams& params) {
  return reference::c128_store_full(key, params);
}

}  // namespace zerojit::dsv4
