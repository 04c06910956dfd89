// The indexer-Q kernels on a GPU (spec section 1) against their CPU reference: codes, scale
// bytes and weights bit-exact (spec sections 10 and 11; MXFP4 included, software E2M1 on
// sm_90), at 1 token, sizes that are no multiple of a CTA's tokens and 16k tokens. The harness
// (poisoned outputs, failure text, dry run) is dsv4/support/gpu_harness.hpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dsv4/indexer_q/reference.hpp"
#include "dsv4/support/gpu_harness.hpp"

namespace zerojit::dsv4 {
namespace {

using namespace zerojit::dsv4::gpu_test;

struct IndexerCase {
  std::string name;
  std::int64_t tokens = 1;
  DType cos_sin_dtype = DType::f32;
  std::int64_t cos_sin_row_stride = 64;
  std::int64_t max_position = 4096;
  std::uint64_t seed = 1;
  // DSv4 rotates 64 of the 128 dims (in the FP8 kernel's split rows, the second piece of every
  // lane; in the MXFP4 kernel's contiguous ones, lanes 4..7); with 32, half of those.
  int rope_dim = 64;
  // Other geometries: head_dim 64 and 32 change the lanes a row and the MXFP4 blocks a row
  // (head_dim 32: one block over both lanes), and cap the FP8 coarsening at the row's lanes (2 for
  // 32).
  int head_dim = 128;
  int heads = 64;
};

// The key the owner dispatches for the case, compiled (in parallel) before the checks run.
IndexerQKey indexer_key(const IndexerCase& c, bool mxfp4) {
  // Dispatch reads the inputs only: the outputs stay empty.
  const auto key = [&c](const auto& kernel, auto d) {
    d.q = TensorDesc::contiguous(DType::bf16, {c.tokens, c.heads, c.head_dim});
    d.cos_sin_cache = TensorDesc::contiguous(c.cos_sin_dtype, {c.max_position, c.rope_dim});
    return kernel.dispatch(d);
  };
  return mxfp4 ? key(IndexerQMxFp4Kernel::instance(), IndexerQMxFp4Descriptors{})
               : key(IndexerQFp8Kernel::instance(), IndexerQFp8Descriptors{});
}

// `order`: the PDL test runs the case behind a producer of Q and the weights.
std::string check_indexer_q(const IndexerCase& c, bool mxfp4,
                            LaunchOrder order = LaunchOrder::alone) {
  const std::string label =
      case_label(mxfp4 ? "dsv4.indexer_q_mxfp4" : "dsv4.indexer_q_fp8",
                 c.name + ", T=" + std::to_string(c.tokens) + ", " + std::string(to_string(order)));
  in::Random random(c.seed);
  const std::int64_t tokens = c.tokens;
  const int heads = c.heads;
  const int head_dim = c.head_dim;
  const in::IndexerQInputsHost inputs =
      in::make_indexer_q_inputs(random, tokens, heads, head_dim, c.rope_dim, c.cos_sin_dtype,
                                c.cos_sin_row_stride, c.max_position);
  // q_fp8 as e4m3 (the owner takes u8 or e4m3), so that failures print code values.
  const in::HostTensor codes = mxfp4 ? in::make_tensor(DType::u8, {tokens, heads, head_dim / 2})
                                     : in::make_tensor(DType::e4m3, {tokens, heads, head_dim});
  const in::HostTensor scales = in::make_tensor(DType::u8, {tokens, heads, head_dim / 32});
  const in::HostTensor weights_out = in::make_tensor(DType::f32, {tokens, heads});

  // The reference writes into copies of the poisoned outputs.
  in::HostTensor expected_codes = codes;
  in::HostTensor expected_scales = scales;
  in::HostTensor expected_weights = weights_out;
  params::IndexerQParams p{};
  p.positions = inputs.positions.as<long long>();
  p.q = inputs.q.as<unsigned short>();
  p.cos_sin_cache = inputs.cos_sin_cache.data();
  p.cos_sin_row_stride = c.cos_sin_row_stride;
  p.weights = inputs.weights.as<unsigned short>();
  p.weights_out = expected_weights.as<float>();
  p.num_tokens = tokens;
  p.scale = inputs.scale;
  const IndexerQKey shape{head_dim, c.rope_dim, heads, c.cos_sin_dtype};
  if (mxfp4) {
    p.q_packed = expected_codes.as<unsigned char>();
    p.q_scale = expected_scales.as<unsigned char>();
  } else {
    p.q_fp8 = expected_codes.as<unsigned char>();
  }
  // Tokens are independent: the reference runs on chunks of them in parallel.
  constexpr std::int64_t kTokensPerChunk = 512;
  const std::int64_t chunks = (tokens + kTokensPerChunk - 1) / kTokensPerChunk;
  std::vector<std::string> errors(static_cast<std::size_t>(chunks));
  parallel_for(static_cast<std::size_t>(chunks), 0, [&](std::size_t chunk) {
    const std::int64_t first = static_cast<std::int64_t>(chunk) * kTokensPerChunk;
    const std::int64_t row = first * heads;
    params::IndexerQParams part = p;
    part.positions += first;
    part.q += row * head_dim;
    part.weights += row;
    part.weights_out += row;
    part.num_tokens = std::min(kTokensPerChunk, tokens - first);
    try {
      if (mxfp4) {
        part.q_packed += row * head_dim / 2;
        part.q_scale += row * head_dim / 32;
        ref::indexer_q_mxfp4(shape, part);
      } else {
        part.q_fp8 += row * head_dim;
        ref::indexer_q_fp8(shape, part);
      }
    } catch (const std::exception& error) {
      errors[chunk] = error.what();
    }
  });
  for (const std::string& error : errors) {
    if (!error.empty()) return label + ": the reference refused the inputs: " + error;
  }

  Placement device;
  Producer producer;
  const TensorRef positions_ref = device.put(inputs.positions);
  const TensorRef q_ref = device.put_produced(inputs.q, producer, order);
  const TensorRef cos_sin_ref = device.put(inputs.cos_sin_cache);
  const TensorRef weights_ref = device.put_produced(inputs.weights, producer, order);
  try {
    const TensorRef codes_ref = device.put(codes);
    const TensorRef weights_out_ref = device.put(weights_out);
    const TensorRef scales_ref = mxfp4 ? device.put(scales) : TensorRef{};
    producer.run(order, [&](cuda::Stream stream, bool pdl) {
      if (mxfp4) {
        IndexerQMxFp4Kernel::instance()(
            IndexerQMxFp4Args{positions_ref, q_ref, cos_sin_ref, weights_ref, inputs.scale,
                              codes_ref, scales_ref, weights_out_ref, pdl},
            stream);
      } else {
        IndexerQFp8Kernel::instance()(
            IndexerQFp8Args{positions_ref, q_ref, cos_sin_ref, weights_ref, inputs.scale, codes_ref,
                            weights_out_ref, pdl},
            stream);
      }
    });
    finish();
  } catch (const std::exception& error) {
    return label + ": the call failed: " + error.what();
  }
  std::string failures;
  if (mxfp4) {
    append_failure(failures, label, "q_packed (element 2k in the low nibble)",
                   compare_tensor(expected_codes, device.get(codes), {"token", "head", "byte"}));
    append_failure(failures, label, "q_scale (UE8M0 per 32 elements)",
                   compare_tensor(expected_scales, device.get(scales), {"token", "head", "block"}));
  } else {
    append_failure(failures, label, "q_fp8 (e4m3 codes)",
                   compare_tensor(expected_codes, device.get(codes), {"token", "head", "dim"}));
  }
  append_failure(failures, label, "weights_out",
                 compare_tensor(expected_weights, device.get(weights_out), {"token", "head"}));
  return failures;
}

std::vector<IndexerCase> indexer_cases() {
  return {
      {"one token", 1, DType::f32, 64, 4096, 11},
      {"bf16 cos/sin with padded rows, 37 tokens", 37, DType::bf16, 72, 4096, 12},
      {"coarsen 4, 600 tokens (no multiple of a CTA's tokens), padded f32 cos/sin rows", 600,
       DType::f32, 80, 70000, 13},
      {"coarsen 4 with bf16 cos/sin, 513 tokens", 513, DType::bf16, 64, 4096, 14},
      {"16384 tokens", 16384, DType::f32, 64, 65536, 15},
      {"rope_dim 32, coarsen 4, 700 tokens", 700, DType::f32, 32, 4096, 16, 32},
      {"rope_dim 32, bf16 cos/sin with padded rows, 45 tokens", 45, DType::bf16, 40, 4096, 17, 32},
      {"head_dim 64, rope_dim 32, 16 heads, 515 tokens", 515, DType::f32, 32, 4096, 18, 32, 64, 16},
      {"head_dim 32, all rope, 8 heads, 600 tokens", 600, DType::bf16, 32, 4096, 19, 32, 32, 8},
      {"head_dim 32, all rope, 6 heads, 31 tokens", 31, DType::f32, 40, 4096, 20, 32, 32, 6},
  };
}

TEST_F(Dsv4Gpu, IndexerQFp8MatchesTheReferenceBitExactly) {
  std::vector<IndexerQKey> keys;
  for (const IndexerCase& c : indexer_cases()) keys.push_back(indexer_key(c, false));
  precompile(IndexerQFp8Kernel::instance(), keys);
  for (const IndexerCase& c : indexer_cases()) EXPECT_NO_FAILURE(check_indexer_q(c, false));
}

TEST_F(Dsv4Gpu, IndexerQMxFp4MatchesTheReferenceBitExactly) {
  // On sm_90 the E2M1 conversion is software (round half to even on the code); on sm_100 it is
  // the hardware instruction. Both must give the reference's bytes, ties included.
  std::vector<IndexerQKey> keys;
  for (const IndexerCase& c : indexer_cases()) keys.push_back(indexer_key(c, true));
  precompile(IndexerQMxFp4Kernel::instance(), keys);
  for (const IndexerCase& c : indexer_cases()) EXPECT_NO_FAILURE(check_indexer_q(c, true));
}

// Serving through a miss: a coarsened key that was never warmed is served at once by its
// fallback (coarsen 1), with the reference's bytes, while it compiles in the background; once it
// is ready the key serves itself, with the same bytes.
TEST_F(Dsv4Gpu, IndexerQMissedCoarsenedKeyIsServedByItsFallbackBitExactly) {
  const IndexerCase c{
      "served through a miss, coarsen 4, 600 tokens", 600, DType::f32, 64, 4096, 23};
  for (const bool mxfp4 : {false, true}) {
    KernelBase& kernel = mxfp4 ? static_cast<KernelBase&>(IndexerQMxFp4Kernel::instance())
                               : static_cast<KernelBase&>(IndexerQFp8Kernel::instance());
    kernel.reset_for_testing();  // nothing of it warmed: the coarsened key misses
    const IndexerQKey key = indexer_key(c, mxfp4);
    ASSERT_EQ(key.coarsen, 4);
    const std::optional<IndexerQKey> fallback = indexer_q_fallback(key);
    ASSERT_TRUE(fallback.has_value());
    // Warmed (compiled and loaded on device 0) as warmup warms a fallback.
    const std::string arch = Runtime::instance().target_arch(0);
    const std::vector<int> devices{0};
    if (mxfp4) {
      IndexerQMxFp4Kernel::instance().warm(*fallback, arch, devices);
    } else {
      IndexerQFp8Kernel::instance().warm(*fallback, arch, devices);
    }
    Monitor::instance().set_mode(MonitorMode::fallback);
    Monitor::instance().arm();
    EXPECT_NO_FAILURE(check_indexer_q(c, mxfp4));
    EXPECT_EQ(kernel.counters().fallback_launches, 1u);
    ASSERT_TRUE(BackgroundCompiles::instance().wait_idle(std::chrono::minutes(2)));
    EXPECT_EQ(kernel.counters().background_compiles, 1u);
    EXPECT_NO_FAILURE(check_indexer_q(c, mxfp4));  // the specialized key now
    EXPECT_EQ(kernel.counters().fallback_launches, 1u);
    Monitor::instance().disarm();
    Monitor::instance().set_mode(MonitorMode::off);
  }
}

// Programmatic dependent launch: behind a kernel that writes Q and the weights (poison until
// then), launched with and without PDL, both variants write the reference's bytes. The DSv4
// geometry at coarsen 1 and 4, and head_dim 32.
TEST_F(Dsv4Gpu, IndexerQMatchesTheReferenceBehindAProducerWithAndWithoutPdl) {
  for (const IndexerCase& c : indexer_cases()) {
    if (c.tokens > 1000 || c.name.starts_with("head_dim 64") || c.name.starts_with("rope_dim")) {
      continue;
    }
    for (const bool mxfp4 : {false, true}) {
      for (const LaunchOrder order : kLaunchOrders) {
        EXPECT_NO_FAILURE(check_indexer_q(c, mxfp4, order));
      }
    }
  }
}

}  // namespace
}  // namespace zerojit::dsv4
