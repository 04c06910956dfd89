// The C4 compressor stores on a GPU (spec sections 3 and 4) against their CPU reference, within
// the spec's tolerances (the reference's comparison helpers; scale bytes and the pad byte still
// compare exactly): the fp8_ds_mla store and the full-row store (bf16, per-tensor e4m3), from
// one token at position 3 to 16k tokens in prefill chunks that straddle boundaries. The harness
// is dsv4/support/gpu_harness.hpp.
#include <gtest/gtest.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "dsv4/c4_store/reference.hpp"
#include "dsv4/support/gpu_harness.hpp"

namespace zerojit::dsv4 {
namespace {

using namespace zerojit::dsv4::gpu_test;

struct C4Case {
  std::string name;
  std::vector<in::RequestChunk> requests;
  CacheKind cache = CacheKind::ds_mla;
  std::int64_t kv_block_size = 64;    // B of the compressed cache (block 256 / 4)
  std::int64_t page_stride = 0;       // ds_mla: 0 = round_up(B * 584, 576)
  std::int64_t full_row_padding = 0;  // full caches: elements past 512 in each row
  DType norm_dtype = DType::bf16;
  std::int64_t state_row_padding = 0;  // elements (multiples of 16)
  std::int64_t state_block_padding = 0;
  std::int64_t cos_sin_row_stride = 64;
  std::int64_t extra_metadata = 0;  // positions / token_to_req longer than T
  std::int64_t short_kv_slots = 0;  // kv_slot_mapping shorter than T (the last are inactive)
  double drop = 0.03;               // boundary tokens losing a slot
  float fp8_scale = 0.02f;          // full e4m3 cache
  std::uint64_t seed = 1;
  LaunchOrder order = LaunchOrder::alone;  // the PDL test: behind a producer of the state cache
};

std::string check_c4(const C4Case& c) {
  const bool full = c.cache != CacheKind::ds_mla;
  std::int64_t total = 0;
  for (const auto& r : c.requests) total += r.tokens;
  const std::string label =
      case_label(full ? "dsv4.c4_store_full" : "dsv4.c4_store",
                 c.name + " (" + std::string(cache_name(c.cache)) + ", T=" + std::to_string(total) +
                     ", " + std::string(to_string(c.order)) + ")");
  in::Random random(c.seed);
  const std::int64_t boundaries = in::count_boundaries(c.requests, 4);
  const std::int64_t pages = (boundaries + c.kv_block_size - 1) / c.kv_block_size + 2;
  const in::CompressorTokens tokens =
      in::make_compressor_tokens(random, c.requests, 4, pages * c.kv_block_size, c.drop);
  const TokenTensors meta =
      make_token_tensors(random, tokens, c.extra_metadata, c.short_kv_slots, c.cos_sin_row_stride);
  const in::CompressorState state = in::make_compressor_state(
      random, c.requests, 4, 1024, 8, c.state_row_padding, c.state_block_padding, 3);
  const in::HostTensor weight = in::random_norm_weight(random, c.norm_dtype);
  const std::vector<float> scale_value = {c.fp8_scale};
  const in::HostTensor fp8_scale = in::tensor_of(std::span<const float>(scale_value));
  const KCache cache =
      make_k_cache(c.cache, c.kv_block_size, pages, c.page_stride, c.full_row_padding);

  KCache expected = cache;
  auto fill_common = [&](auto& p) {
    p.state_cache = state.state.as<float>();
    p.state_block_stride = state.state.desc.stride(0);
    p.state_row_stride = state.state.desc.stride(1);
    p.state_block_size = 4;
    p.token_to_req = meta.token_to_req.as<int>();
    p.num_token_to_req = meta.token_to_req.desc.size(0);
    p.positions = meta.positions.as<long long>();
    p.num_positions = meta.positions.desc.size(0);
    p.slot_mapping = meta.slot_mapping.as<long long>();
    p.num_tokens = meta.tokens;
    p.block_table = state.block_table.as<int>();
    p.block_table_stride = state.block_table.desc.stride(0);
    p.block_table_rows = state.block_table.desc.size(0);
    p.block_table_width = state.block_table.desc.size(1);
    p.rms_norm_weight = weight.data();
    p.eps = 1e-6f;
    p.cos_sin_cache = meta.cos_sin.as<float>();
    p.cos_sin_stride = c.cos_sin_row_stride;
    p.k_cache = expected.tensor.as<unsigned char>();
    p.kv_slot_mapping = meta.kv_slot_mapping.as<long long>();
    p.num_kv_slots = meta.kv_slot_mapping.desc.size(0);
    p.kv_cache_block_size = c.kv_block_size;
  };
  std::vector<long long> written;
  if (full) {
    params::C4StoreFullParams p{};
    fill_common(p);
    p.kv_block_stride_bytes = expected.page_stride_bytes;
    p.kv_row_stride_bytes = expected.row_stride_bytes;
    p.fp8_scale = fp8_scale.as<float>();
    C4StoreFullKey key;
    key.store_full_fp8 = c.cache == CacheKind::full_e4m3;
    key.norm_weight_dtype = c.norm_dtype;
    written = ref::c4_store_full(key, p);
  } else {
    params::C4StoreParams p{};
    fill_common(p);
    p.kv_block_stride_bytes = expected.page_stride_bytes;
    C4StoreKey key;
    key.norm_weight_dtype = c.norm_dtype;
    written = ref::c4_store(key, p);
  }
  if (written.empty()) return label + ": the case writes no row; it tests nothing (fix the case)";

  Placement device;
  Producer producer;
  C4StoreArgs args;
  args.state_cache = device.put_produced(state.state, producer, c.order);
  args.token_to_req = device.put(meta.token_to_req);
  args.positions = device.put(meta.positions);
  args.slot_mapping = device.put(meta.slot_mapping);
  args.block_table = device.put(state.block_table);
  args.rms_norm_weight = device.put(weight);
  args.eps = 1e-6f;
  args.cos_sin_cache = device.put(meta.cos_sin);
  args.k_cache = device.put(cache.tensor);
  args.kv_slot_mapping = device.put(meta.kv_slot_mapping);
  if (c.cache == CacheKind::full_e4m3) args.fp8_scale = device.put(fp8_scale);
  try {
    producer.run(c.order, [&](cuda::Stream stream, bool pdl) {
      args.pdl = pdl;
      if (full) {
        C4StoreFullKernel::instance()(args, stream);
      } else {
        C4StoreKernel::instance()(args, stream);
      }
    });
    finish();
  } catch (const std::exception& error) {
    return label + ": the call failed: " + error.what();
  }
  std::string failures;
  append_failure(failures, label,
                 "k_cache (" + std::to_string(written.size()) +
                     " rows written, B=" + std::to_string(c.kv_block_size) + ", page stride " +
                     std::to_string(expected.page_stride_bytes) + ")",
                 compare_k_cache(c.cache, expected, device.get(cache.tensor), written));
  return failures;
}

std::vector<C4Case> c4_cases() {
  using R = in::RequestChunk;
  std::vector<C4Case> cases;
  cases.push_back({.name = "one token at position 3 (rows -4..-1 are skipped)",
                   .requests = {R{3, 1}},
                   .drop = 0.0,
                   .seed = 41});
  cases.push_back({.name = "one decode token at position 1003, wider page stride",
                   .requests = {R{1003, 1}},
                   .page_stride = in::default_page_stride(64) + 576,
                   .drop = 0.0,
                   .seed = 42});
  cases.push_back({.name = "chunks straddling boundaries, f32 norm weight, B=16, padded state "
                           "and cos/sin rows, longer positions, shorter kv_slot_mapping",
                   .requests = {R{0, 37}, R{5, 18}, R{1000, 61}, R{2, 1}, R{6, 2}},
                   .kv_block_size = 16,
                   .norm_dtype = DType::f32,
                   .state_row_padding = 16,
                   .state_block_padding = 16,
                   .cos_sin_row_stride = 80,
                   .extra_metadata = 3,
                   .short_kv_slots = 2,
                   .seed = 43});
  cases.push_back({.name = "16396 tokens in 4 prefill chunks",
                   .requests = {R{0, 4100}, R{7, 4096}, R{20000, 4200}, R{123, 4000}},
                   .seed = 44});
  cases.push_back({.name = "one token at position 3",
                   .requests = {R{3, 1}},
                   .cache = CacheKind::full_bf16,
                   .drop = 0.0,
                   .seed = 45});
  cases.push_back({.name = "300 tokens, padded cache rows",
                   .requests = {R{0, 150}, R{601, 150}},
                   .cache = CacheKind::full_bf16,
                   .full_row_padding = 8,
                   .seed = 46});
  cases.push_back({.name = "300 tokens, f32 norm weight, padded cache rows",
                   .requests = {R{0, 150}, R{601, 150}},
                   .cache = CacheKind::full_e4m3,
                   .full_row_padding = 16,
                   .norm_dtype = DType::f32,
                   .seed = 47});
  cases.push_back({.name = "a small fp8_scale saturates codes at 448",
                   .requests = {R{0, 2000}},
                   .cache = CacheKind::full_e4m3,
                   .fp8_scale = 0.004f,
                   .seed = 48});
  cases.push_back({.name = "16400 tokens",
                   .requests = {R{0, 8200}, R{11, 8200}},
                   .cache = CacheKind::full_e4m3,
                   .kv_block_size = 16,
                   .fp8_scale = 0.03f,
                   .seed = 49});
  return cases;
}

TEST_F(Dsv4Gpu, C4StoresMatchTheReferenceWithinTolerance) {
  std::vector<C4StoreKey> keys;
  std::vector<C4StoreFullKey> full_keys;
  for (const C4Case& c : c4_cases()) {
    if (c.cache == CacheKind::ds_mla) {
      C4StoreKey key;
      key.norm_weight_dtype = c.norm_dtype;
      keys.push_back(key);
    } else {
      C4StoreFullKey key;
      key.store_full_fp8 = c.cache == CacheKind::full_e4m3;
      key.norm_weight_dtype = c.norm_dtype;
      full_keys.push_back(key);
    }
  }
  precompile(C4StoreKernel::instance(), keys);
  precompile(C4StoreFullKernel::instance(), full_keys);
  for (const C4Case& c : c4_cases()) EXPECT_NO_FAILURE(check_c4(c));
}

// Programmatic dependent launch: behind a kernel that writes the state cache (poison until
// then), launched with and without PDL, the stores write what the reference writes. The cases
// under 4096 tokens (both caches, decode and prefill chunks).
TEST_F(Dsv4Gpu, C4StoresMatchTheReferenceBehindAProducerWithAndWithoutPdl) {
  for (const C4Case& base : c4_cases()) {
    if (in::count_tokens(base.requests) >= 4096) continue;
    for (const LaunchOrder order : kLaunchOrders) {
      C4Case c = base;
      c.order = order;
      EXPECT_NO_FAILURE(check_c4(c));
    }
  }
}

}  // namespace
}  // namespace zerojit::dsv4
