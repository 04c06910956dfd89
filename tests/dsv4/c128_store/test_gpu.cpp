// The C128 stores on a GPU (spec sections 6 and 7) against their CPU reference, within the
// spec's tolerances: fp8_ds_mla pages whose geometry is compile-time (B=1 and B=2, the packed
// 39168-byte page) and full rows (bf16, per-tensor e4m3), up to 16k tokens and batches where
// every token is a boundary. The harness is dsv4/support/gpu_harness.hpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "dsv4/c128_store/reference.hpp"
#include "dsv4/support/gpu_harness.hpp"

namespace zerojit::dsv4 {
namespace {

using namespace zerojit::dsv4::gpu_test;

struct C128StoreCase {
  std::string name;
  std::vector<in::RequestChunk> requests;
  CacheKind cache = CacheKind::ds_mla;
  std::int64_t kv_block_size = 2;  // B_k
  std::int64_t page_stride = 0;    // ds_mla: 0 = round_up(B_k * 584, 576)
  std::int64_t extra_pages = 2;
  std::int64_t full_row_padding = 0;
  DType norm_dtype = DType::bf16;
  std::int64_t cos_sin_row_stride = 64;
  double drop = 0.03;
  float fp8_scale = 0.02f;
  std::uint64_t seed = 1;
  LaunchOrder order = LaunchOrder::alone;  // the PDL test: behind a producer of compressed_kv
};

C128StoreKey c128_store_key(const C128StoreCase& c) {
  C128StoreKey key;
  key.kv_cache_block_size = static_cast<int>(c.kv_block_size);
  key.kv_block_stride =
      c.page_stride > 0 ? c.page_stride : in::default_page_stride(c.kv_block_size);
  key.norm_weight_dtype = c.norm_dtype;
  return key;
}

std::string check_c128_store(const C128StoreCase& c) {
  const bool full = c.cache != CacheKind::ds_mla;
  std::int64_t total = 0;
  for (const auto& r : c.requests) total += r.tokens;
  const std::string label =
      case_label(full ? "dsv4.c128_store_full" : "dsv4.c128_store",
                 c.name + " (" + std::string(cache_name(c.cache)) + ", T=" + std::to_string(total) +
                     ", " + std::string(to_string(c.order)) + ")");
  in::Random random(c.seed);
  const std::int64_t boundaries = in::count_boundaries(c.requests, 128);
  const std::int64_t pages = (boundaries + c.kv_block_size - 1) / c.kv_block_size + c.extra_pages;
  const in::CompressorTokens tokens =
      in::make_compressor_tokens(random, c.requests, 128, pages * c.kv_block_size, c.drop);
  const TokenTensors meta = make_token_tensors(random, tokens, 0, 0, c.cos_sin_row_stride);
  // Pooled rows of many magnitudes, so that the scale exponents vary.
  in::HostTensor compressed = in::make_tensor(DType::f32, {total, 512});
  for (std::int64_t t = 0; t < total; ++t) {
    const float magnitude = std::ldexp(1.0f, static_cast<int>(random.uniform_int(-8, 8)));
    for (std::int64_t e = 0; e < 512; ++e) {
      compressed.set<float>(t * 512 + e, random.uniform(-2.0f, 2.0f) * magnitude);
    }
  }
  const in::HostTensor weight = in::random_norm_weight(random, c.norm_dtype);
  const std::vector<float> scale_value = {c.fp8_scale};
  const in::HostTensor fp8_scale = in::tensor_of(std::span<const float>(scale_value));
  const KCache cache =
      make_k_cache(c.cache, c.kv_block_size, pages, c.page_stride, c.full_row_padding);
  KCache expected = cache;
  auto fill_common = [&](auto& p) {
    p.compressed_kv = compressed.as<float>();
    p.positions = meta.positions.as<long long>();
    p.num_positions = meta.positions.desc.size(0);
    p.slot_mapping = meta.slot_mapping.as<long long>();
    p.num_tokens = total;
    p.rms_norm_weight = weight.data();
    p.eps = 1e-6f;
    p.cos_sin_cache = meta.cos_sin.as<float>();
    p.cos_sin_stride = c.cos_sin_row_stride;
    p.k_cache = expected.tensor.as<unsigned char>();
    p.kv_slot_mapping = meta.kv_slot_mapping.as<long long>();
    p.num_kv_slots = meta.kv_slot_mapping.desc.size(0);
  };
  std::vector<long long> written;
  if (full) {
    params::C128StoreFullParams p{};
    fill_common(p);
    p.kv_block_stride_bytes = expected.page_stride_bytes;
    p.kv_row_stride_bytes = expected.row_stride_bytes;
    p.kv_cache_block_size = c.kv_block_size;
    p.fp8_scale = fp8_scale.as<float>();
    C128StoreFullKey key;
    key.store_full_fp8 = c.cache == CacheKind::full_e4m3;
    key.norm_weight_dtype = c.norm_dtype;
    written = ref::c128_store_full(key, p);
  } else {
    params::C128StoreParams p{};
    fill_common(p);
    // The key the launch compiles: its page geometry is the one make_k_cache gave the cache.
    written = ref::c128_store(c128_store_key(c), p);
  }
  if (written.empty()) return label + ": the case writes no row; it tests nothing (fix the case)";

  Placement device;
  Producer producer;
  C128StoreArgs args;
  args.compressed_kv = device.put_produced(compressed, producer, c.order);
  args.positions = device.put(meta.positions);
  args.slot_mapping = device.put(meta.slot_mapping);
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
        C128StoreFullKernel::instance()(args, stream);
      } else {
        C128StoreKernel::instance()(args, stream);
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

std::vector<C128StoreCase> c128_store_cases() {
  using R = in::RequestChunk;
  std::vector<C128StoreCase> cases;
  cases.push_back({.name = "one token at position 127, B=1, page stride 1152 (block 64)",
                   .requests = {R{127, 1}},
                   .kv_block_size = 1,
                   .drop = 0.0,
                   .seed = 61});
  cases.push_back({.name = "chunks straddling boundaries, B=2, page stride 1728 (block 256)",
                   .requests = {R{0, 300}, R{1000, 300}, R{255, 1}, R{127, 2}},
                   .extra_pages = 5,
                   .seed = 62});
  cases.push_back({.name = "f32 norm weight, B=2, page stride 1728",
                   .requests = {R{0, 700}},
                   .norm_dtype = DType::f32,
                   .seed = 63});
  cases.push_back({.name = "packed page stride 39168, B=2",
                   .requests = {R{0, 1000}, R{5000, 600}},
                   .page_stride = 39168,
                   .seed = 64});
  cases.push_back({.name = "16384 tokens, B=2, page stride 1728",
                   .requests = {R{0, 8192}, R{128, 8192}},
                   .seed = 65});
  // Every token a boundary: each warp then stores up to 32 rows, two in flight at a time.
  std::vector<R> boundaries;
  for (std::int64_t i = 0; i < 2500; ++i) boundaries.push_back(R{128 * (i + 1) - 1, 1});
  cases.push_back({.name = "2500 tokens, every one a boundary, B=2, page stride 1728",
                   .requests = boundaries,
                   .seed = 70});
  boundaries.resize(777);
  cases.push_back({.name = "777 tokens, every one a boundary, full e4m3, B=64",
                   .requests = boundaries,
                   .cache = CacheKind::full_e4m3,
                   .kv_block_size = 64,
                   .drop = 0.0,
                   .seed = 71});
  cases.push_back({.name = "one token at position 255, B=2",
                   .requests = {R{255, 1}},
                   .cache = CacheKind::full_bf16,
                   .drop = 0.0,
                   .seed = 66});
  cases.push_back({.name = "600 tokens, B=64, padded rows and cos/sin rows",
                   .requests = {R{0, 600}},
                   .cache = CacheKind::full_bf16,
                   .kv_block_size = 64,
                   .full_row_padding = 8,
                   .cos_sin_row_stride = 68,
                   .seed = 67});
  cases.push_back({.name = "16500 tokens, B=64",
                   .requests = {R{0, 16500}},
                   .cache = CacheKind::full_e4m3,
                   .kv_block_size = 64,
                   .fp8_scale = 0.03f,
                   .seed = 68});
  cases.push_back({.name = "f32 norm weight, a saturating fp8_scale, B=2",
                   .requests = {R{0, 1200}},
                   .cache = CacheKind::full_e4m3,
                   .norm_dtype = DType::f32,
                   .fp8_scale = 0.002f,
                   .seed = 69});
  return cases;
}

TEST_F(Dsv4Gpu, C128StoresMatchTheReferenceWithinTolerance) {
  std::vector<C128StoreKey> keys;
  std::vector<C128StoreFullKey> full_keys;
  for (const C128StoreCase& c : c128_store_cases()) {
    if (c.cache == CacheKind::ds_mla) {
      keys.push_back(c128_store_key(c));
    } else {
      C128StoreFullKey key;
      key.store_full_fp8 = c.cache == CacheKind::full_e4m3;
      key.norm_weight_dtype = c.norm_dtype;
      full_keys.push_back(key);
    }
  }
  precompile(C128StoreKernel::instance(), keys);
  precompile(C128StoreFullKernel::instance(), full_keys);
  for (const C128StoreCase& c : c128_store_cases()) EXPECT_NO_FAILURE(check_c128_store(c));
}

// Programmatic dependent launch: behind a kernel that writes compressed_kv (poison until then),
// launched with and without PDL, the stores write what the reference writes. The cases under
// 4096 tokens (both caches, sparse and dense boundaries).
TEST_F(Dsv4Gpu, C128StoresMatchTheReferenceBehindAProducerWithAndWithoutPdl) {
  for (const C128StoreCase& base : c128_store_cases()) {
    if (in::count_tokens(base.requests) >= 4096) continue;
    for (const LaunchOrder order : kLaunchOrders) {
      C128StoreCase c = base;
      c.order = order;
      EXPECT_NO_FAILURE(check_c128_store(c));
    }
  }
}

}  // namespace
}  // namespace zerojit::dsv4
