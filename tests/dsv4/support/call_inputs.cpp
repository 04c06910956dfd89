#include "dsv4/support/call_inputs.hpp"

#include <algorithm>
#include <span>

namespace zerojit::dsv4::testing {

// --- Dequantize + gather -----------------------------------------------------------------------

GatherInputs make_gather_inputs(Random& random, const GatherCase& c) {
  GatherInputs result;
  const auto requests = static_cast<std::int64_t>(c.seq_lens.size());
  std::vector<std::int64_t> first_column, last_column;
  std::int64_t used = 0;
  for (std::int64_t r = 0; r < requests; ++r) {
    const std::int64_t length = c.seq_lens[static_cast<std::size_t>(r)];
    const std::int64_t gathered =
        c.has_gather_lens ? c.gather_lens[static_cast<std::size_t>(r)] : length;
    const std::int64_t first = std::max<std::int64_t>(0, length - gathered);
    if (gathered <= 0 || length <= 0) {
      first_column.push_back(0);
      last_column.push_back(-1);
      continue;
    }
    first_column.push_back(first / c.block_size);
    last_column.push_back((length - 1) / c.block_size);
    used += last_column.back() - first_column.back() + 1;
  }
  result.width = 2;
  for (std::int64_t last : last_column) result.width = std::max(result.width, last + 3);
  const std::int64_t pages = used + c.extra_pages;
  result.block_table = permuted_block_table(random, result.width, first_column, last_column, pages);
  for (std::int64_t hole = 0; hole < std::min<std::int64_t>(c.holes, used); ++hole) {
    // A used entry, found by walking the table from a random start.
    std::int64_t index = random.uniform_int(0, requests * result.width - 1);
    while (result.block_table.get<std::int32_t>(index) < 0)
      index = (index + 1) % (requests * result.width);
    result.block_table.set<std::int32_t>(index, -1);
  }
  result.page_stride = c.page_stride > 0 ? c.page_stride : default_page_stride(c.block_size);
  result.cache = make_ds_mla_cache(pages, c.block_size, result.page_stride);
  fill_ds_mla_cache(random, result.cache, c.exponent_low, c.exponent_high);
  result.seq_lens = tensor_of(std::span<const std::int32_t>(c.seq_lens));
  if (c.has_gather_lens)
    result.gather_lens = tensor_of(std::span<const std::int32_t>(c.gather_lens));
  return result;
}

HostTensor make_gather_out(const GatherCase& c) {
  std::int64_t rows = c.rows_out;
  if (rows < 0) {
    std::int64_t longest = 0;
    for (std::size_t r = 0; r < c.seq_lens.size(); ++r) {
      longest =
          std::max<std::int64_t>(longest, c.has_gather_lens ? c.gather_lens[r] : c.seq_lens[r]);
    }
    rows = c.offset + longest;
  }
  const auto requests = static_cast<std::int64_t>(c.seq_lens.size());
  return make_tensor(DType::bf16, {requests, rows, 512},
                     {rows * c.out_row_stride + c.out_request_padding, c.out_row_stride, 1});
}

// --- Compressor calls --------------------------------------------------------------------------

TokenTensors make_token_tensors(Random& random, const CompressorTokens& tokens,
                                std::int64_t extra_metadata, std::int64_t short_kv_slots,
                                std::int64_t cos_sin_row_stride) {
  TokenTensors result;
  result.tokens = static_cast<std::int64_t>(tokens.positions.size());
  std::vector<std::int32_t> token_to_req = tokens.token_to_req;
  std::vector<std::int64_t> positions = tokens.positions;
  std::int64_t max_position = 0;
  for (std::int64_t p : positions) max_position = std::max(max_position, p);
  for (std::int64_t i = 0; i < extra_metadata; ++i) {
    token_to_req.push_back(0);
    positions.push_back(random.uniform_int(0, max_position));
  }
  std::vector<std::int64_t> kv_slots = tokens.kv_slot_mapping;
  kv_slots.resize(
      static_cast<std::size_t>(std::max<std::int64_t>(0, result.tokens - short_kv_slots)));
  result.token_to_req = tensor_of(std::span<const std::int32_t>(token_to_req));
  result.positions = tensor_of(std::span<const std::int64_t>(positions));
  result.slot_mapping = tensor_of(std::span<const std::int64_t>(tokens.slot_mapping));
  result.kv_slot_mapping = tensor_of(std::span<const std::int64_t>(kv_slots));
  result.cos_sin = random_cos_sin(random, max_position + 1, 64, cos_sin_row_stride, DType::f32);
  return result;
}

std::string_view cache_name(CacheKind kind) {
  switch (kind) {
    case CacheKind::ds_mla:
      return "fp8_ds_mla";
    case CacheKind::full_bf16:
      return "full bf16";
    case CacheKind::full_e4m3:
      return "full e4m3";
  }
  return "?";
}

KCache make_k_cache(CacheKind kind, std::int64_t block_size, std::int64_t pages,
                    std::int64_t page_stride, std::int64_t full_row_padding) {
  KCache cache;
  cache.block_size = block_size;
  cache.pages = pages;
  if (kind == CacheKind::ds_mla) {
    cache.page_stride_bytes = page_stride > 0 ? page_stride : default_page_stride(block_size);
    cache.tensor = make_ds_mla_cache(pages, block_size, cache.page_stride_bytes);
  } else {
    const DType dtype = kind == CacheKind::full_bf16 ? DType::bf16 : DType::e4m3;
    const std::int64_t row = 512 + full_row_padding;
    cache.tensor = make_tensor(dtype, {pages, block_size, 512}, {block_size * row, row, 1}, 0);
    cache.row_stride_bytes = row * dtype_size_bytes(dtype);
    cache.page_stride_bytes = block_size * cache.row_stride_bytes;
  }
  return cache;
}

}  // namespace zerojit::dsv4::testing
