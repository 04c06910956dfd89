// The whole inputs of one DSv4 kernel call, built from the pieces of inputs.hpp: a
// dequant-gather call (cache, block table, lengths, output workspace), the per-token metadata
// of a compressor call, and the compressed K cache a compressor store writes. The GPU tests
// build their cases from these, and the kernel benchmarks time the kernels on the same inputs.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "dsv4/support/inputs.hpp"

namespace zerojit::dsv4::testing {

// --- Dequantize + gather (spec section 2) ----------------------------------------------------

// One gather call: what it reads (block_size .. exponent_high) and how its output workspace is
// laid out (offset .. out_request_padding). `name` and `seed` identify a test case.
struct GatherCase {
  std::string name;
  int block_size = 64;
  bool has_gather_lens = false;
  std::vector<std::int32_t> seq_lens;
  std::vector<std::int32_t> gather_lens;  // when has_gather_lens
  std::int64_t offset = 0;
  std::int64_t rows_out = -1;            // M; -1: offset + the largest gather length
  std::int64_t out_row_stride = 512;     // elements
  std::int64_t out_request_padding = 0;  // elements between requests past M rows
  std::int64_t page_stride = 0;          // bytes; 0: round_up(B * 584, 576)
  std::int64_t extra_pages = 3;          // pages no request uses
  int holes = 0;                         // block-table entries in use set to -1 (skipped rows)
  int exponent_low = 100;                // UE8M0 exponents of the cache
  int exponent_high = 140;
  std::uint64_t seed = 1;
};

struct GatherInputs {
  HostTensor cache;  // [pages, B, 584]
  HostTensor block_table;
  HostTensor seq_lens;
  HostTensor gather_lens;  // empty desc when the call has none
  std::int64_t page_stride = 0;
  std::int64_t width = 0;
};

// The cache, block table and lengths of one gather call: the pages each request reads are
// distinct, permuted, and filled with valid fp8_ds_mla rows.
GatherInputs make_gather_inputs(Random& random, const GatherCase& c);

// The output workspace [R, M, 512] bf16 of a case, poisoned.
HostTensor make_gather_out(const GatherCase& c);

// --- Compressor calls (spec sections 3-7) -----------------------------------------------------

// The per-token tensors of a compressor call (C4 and C128 alike) and its cos/sin cache.
struct TokenTensors {
  HostTensor token_to_req;
  HostTensor positions;
  HostTensor slot_mapping;
  HostTensor kv_slot_mapping;
  HostTensor cos_sin;
  std::int64_t tokens = 0;
};

// The tensors of `tokens`: positions and token_to_req longer than T by `extra_metadata`
// entries, kv_slot_mapping shorter than T by `short_kv_slots` (its last tokens are inactive),
// f32 cos/sin rows of 64 values `cos_sin_row_stride` floats apart up to the largest position.
TokenTensors make_token_tensors(Random& random, const CompressorTokens& tokens,
                                std::int64_t extra_metadata, std::int64_t short_kv_slots,
                                std::int64_t cos_sin_row_stride);

// The compressed K caches a store writes: fp8_ds_mla pages, or full rows of bf16 or e4m3.
enum class CacheKind { ds_mla, full_bf16, full_e4m3 };
std::string_view cache_name(CacheKind kind);

// A compressed K cache, poisoned, with what the comparisons need.
struct KCache {
  HostTensor tensor;
  std::int64_t block_size = 0;  // B
  std::int64_t page_stride_bytes = 0;
  std::int64_t row_stride_bytes = 0;  // full caches
  std::int64_t pages = 0;
};

// `pages` pages of `block_size` rows: fp8_ds_mla pages `page_stride` bytes apart (0: the
// default stride), or full rows of 512 + `full_row_padding` elements.
KCache make_k_cache(CacheKind kind, std::int64_t block_size, std::int64_t pages,
                    std::int64_t page_stride, std::int64_t full_row_padding);

}  // namespace zerojit::dsv4::testing
