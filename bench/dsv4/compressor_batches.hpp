// What the compressor kernels' bandwidth cases share (bench/dsv4/c4_store.cpp,
// c128_compress.cpp, c128_store.cpp): the requests of one call, its per-token metadata, and the
// compressed K cache a store writes, all built on the GPU tests' inputs (tests/dsv4/support/).
#pragma once

#include <cstdint>
#include <vector>

#include "dsv4/c128_compress/c128_compress.hpp"
#include "dsv4/support/call_inputs.hpp"
#include "kernels/device_set.hpp"

namespace zerojit::bench {

// Requests of one compressor call: decode steps (one token each, every `ratio`-th of them on a
// boundary, at least one) or prefill chunks of `chunk` consecutive positions.
std::vector<dsv4::testing::RequestChunk> compressor_requests(dsv4::testing::Random& random,
                                                             std::int64_t tokens,
                                                             std::int64_t chunk, int ratio);

struct CompressorMetadata {
  dsv4::testing::CompressorTokens tokens;  // the values, per token
  dsv4::testing::TokenTensors tensors;     // the same as tensors, and the cos/sin cache
  std::int64_t boundaries = 0;
};

// The metadata of the requests' tokens: 1 % of the boundary tokens lose a slot, kv slots come
// from [0, kv_slots), cos/sin rows are contiguous f32.
CompressorMetadata compressor_metadata(dsv4::testing::Random& random,
                                       const std::vector<dsv4::testing::RequestChunk>& requests,
                                       int ratio, std::int64_t kv_slots);

// A compressed K cache: fp8_ds_mla pages of B rows (default page stride) or full BF16 rows.
dsv4::testing::HostTensor k_cache(bool full, std::int64_t pages, std::int64_t block_size);

// A C128 compress call's arguments on `set`: the state cache and the tokens' metadata as inputs,
// `compressed` as the output.
dsv4::C128CompressArgs put_c128_compress_args(DeviceSet& set, const CompressorMetadata& m,
                                              const dsv4::testing::CompressorState& state,
                                              const dsv4::testing::HostTensor& compressed);

}  // namespace zerojit::bench
