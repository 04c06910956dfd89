// Bandwidth cases of the C128 stores (spec 6, 7), fp8_ds_mla and full rows: decode steps,
// prefill chunks, and two sizes of their own where every token is a boundary.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "compressor_batches.hpp"
#include "dsv4/c128_store/c128_store.hpp"
#include "dsv4/c128_store/reference.hpp"
#include "kernels/cases.hpp"

namespace zerojit::bench {
namespace {

// Compressed cache B_k = 2 (block 256 / 128), page stride 1728. A token is active iff
// slot >= 0, kv_slot >= 0 and (p + 1) % 128 == 0; only active rows of compressed_kv are read
// (the others are never touched and hold the sentinel).
// bytes = T*24 [slot 8, position 8, kv_slot 8] + 1024 [norm weight bf16]
//         + active*(2048 [compressed_kv row] + 256 [cos/sin row] + row_out)
//   row_out = 584 (fp8_ds_mla) or 1024 (full bf16)

TokenSize c128_store_size(std::string_view size) {
  if (size == "small") return {64, 0};
  if (size == "serving") return {8192, 2048};
  // Prefill batches of 4 requests of T/4 tokens: the mid sizes of real batches.
  if (size == "p4096") return {4096, 1024};
  if (size == "p16384") return {16384, 4096};
  return {262144, 4096};
}

Case c128_store_case(bool full, const std::string& size, const Context& context) {
  Case c;
  c.kernel = full ? "c128_store_full" : "c128_store";
  c.size = size;
  const TokenSize shape = c128_store_size(size);
  in::Random random(seed_of(c.kernel, size));
  // "dense" and "dense_large": every token a boundary (one-token chunks at positions
  // 128k - 1), 65536 and 262144 tokens (189 and 755 MB, the latter the byte volume of the
  // other kernels' large sizes). Real batches hold one boundary per 128 tokens, which leaves
  // the stores a few MB even at 262144 tokens; these sizes show the kernel's own bandwidth.
  std::vector<in::RequestChunk> requests;
  if (size.starts_with("dense")) {
    const std::int64_t boundaries = size == "dense" ? 65536 : 262144;
    for (std::int64_t i = 0; i < boundaries; ++i) requests.push_back({128 * (i + 1) - 1, 1});
  } else {
    requests = compressor_requests(random, shape.tokens, shape.chunk, 128);
  }
  constexpr std::int64_t kCacheBlock = 2;
  const std::int64_t pages =
      (in::count_boundaries(requests, 128) + kCacheBlock - 1) / kCacheBlock + 2;
  const CompressorMetadata m = compressor_metadata(random, requests, 128, pages * kCacheBlock);
  const auto tokens = static_cast<std::int64_t>(m.tokens.positions.size());
  in::HostTensor compressed = in::make_tensor(DType::f32, {tokens, kHeadSize});
  std::int64_t active = 0;
  for (std::size_t t = 0; t < m.tokens.positions.size(); ++t) {
    const std::int64_t p = m.tokens.positions[t];
    if (m.tokens.slot_mapping[t] < 0 || m.tokens.kv_slot_mapping[t] < 0 || p < 0 ||
        (p + 1) % 128 != 0) {
      continue;
    }
    ++active;
    // Pooled rows of many magnitudes, so that the scale exponents vary.
    const float magnitude = std::ldexp(1.0f, static_cast<int>(random.uniform_int(-8, 8)));
    for (std::int64_t e = 0; e < kHeadSize; ++e) {
      compressed.set<float>(static_cast<std::int64_t>(t) * kHeadSize + e,
                            random.uniform(-2.0f, 2.0f) * magnitude);
    }
  }
  const in::HostTensor weight = in::random_norm_weight(random, DType::bf16);
  const in::HostTensor cache = k_cache(full, pages, kCacheBlock);

  const std::int64_t row_out = full ? kFullBf16RowBytes : kDsMlaRowBytes;
  c.tokens = tokens;
  c.active_tokens = active;
  c.bytes = tokens * 24 + kNormWeightBytes + active * (kHeadSize * 4 + kCosSinRowBytes + row_out);
  c.written_bytes = active * row_out;
  c.formula = std::string(
                  "T*24 metadata + 1024 norm weight + active*(2048 compressed_kv + 256 "
                  "cos/sin + ") +
              (full ? "1024 bf16 row)" : "584 ds_mla row)");
  add_input_sets(
      c, context,
      [&](DeviceSet& set) {
        dsv4::C128StoreArgs a;
        a.compressed_kv = set.put(compressed);
        a.positions = set.put(m.tensors.positions);
        a.slot_mapping = set.put(m.tensors.slot_mapping);
        a.rms_norm_weight = set.put(weight);
        a.eps = 1e-6f;
        a.cos_sin_cache = set.put(m.tensors.cos_sin);
        a.k_cache = set.put(cache, true);
        a.kv_slot_mapping = set.put(m.tensors.kv_slot_mapping);
        return a;
      },
      run_plain_or_full<dsv4::C128StoreKernel, dsv4::C128StoreFullKernel, dsv4::C128StoreArgs>(
          full),
      [full](const dsv4::C128StoreArgs& args, const Emulation& e) {
        if (full) {
          auto& kernel = dsv4::C128StoreFullKernel::instance();
          emulate_planned<params::C128StoreFullParams>(
              kernel, kernel.launch_spec(args), e,
              [](const auto& block, const auto& key) { ref::c128_store_full(key, block); });
        } else {
          auto& kernel = dsv4::C128StoreKernel::instance();
          emulate_planned<params::C128StoreParams>(
              kernel, kernel.launch_spec(args), e,
              [](const auto& block, const auto& key) { ref::c128_store(key, block); });
        }
      });
  return c;
}

// "dense" and "dense_large" (see c128_store_case) are this kernel's own sizes.
const std::vector<std::string> kSizes = {"small",       "serving", "large", "dense",
                                         "dense_large", "p4096",   "p16384"};
const CaseRegistrar kDsMla{{.kernel = "c128_store",
                            .sizes = kSizes,
                            .make = [](const std::string& size, const Context& context) {
                              return c128_store_case(false, size, context);
                            }}};
const CaseRegistrar kFull{{.kernel = "c128_store_full",
                           .sizes = kSizes,
                           .make = [](const std::string& size, const Context& context) {
                             return c128_store_case(true, size, context);
                           }}};

}  // namespace
}  // namespace zerojit::bench
