// The C128 compress kernel on a GPU (spec section 5) against its CPU reference: compressed_kv
// rows within the reference's tolerance, every other byte (inactive tokens, guards) untouched.
// The harness is dsv4/support/gpu_harness.hpp.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dsv4/c128_compress/reference.hpp"
#include "dsv4/support/gpu_harness.hpp"

namespace zerojit::dsv4 {
namespace {

using namespace zerojit::dsv4::gpu_test;

struct C128CompressCase {
  std::string name;
  std::vector<in::RequestChunk> requests;
  std::int64_t state_row_padding = 0;
  std::int64_t state_block_padding = 0;
  double drop = 0.03;
  std::uint64_t seed = 1;
  LaunchOrder order = LaunchOrder::alone;  // the PDL test: behind a producer of the state cache
};

std::string check_c128_compress(const C128CompressCase& c) {
  std::int64_t total = 0;
  for (const auto& r : c.requests) total += r.tokens;
  const std::string label =
      case_label("dsv4.c128_compress", c.name + " (T=" + std::to_string(total) + ", " +
                                           std::string(to_string(c.order)) + ")");
  in::Random random(c.seed);
  const in::CompressorTokens tokens =
      in::make_compressor_tokens(random, c.requests, 128, total + 1, c.drop);
  const TokenTensors meta = make_token_tensors(random, tokens, 0, 0, 64);
  const in::CompressorState state = in::make_compressor_state(
      random, c.requests, 8, 512, 128, c.state_row_padding, c.state_block_padding, 2);
  const in::HostTensor compressed = in::make_tensor(DType::f32, {total, 512});
  in::HostTensor expected = compressed;

  params::C128CompressParams p{};
  p.state_cache = state.state.as<float>();
  p.state_block_stride = state.state.desc.stride(0);
  p.state_row_stride = state.state.desc.stride(1);
  p.state_block_size = 8;
  p.token_to_req = meta.token_to_req.as<int>();
  p.num_token_to_req = meta.token_to_req.desc.size(0);
  p.positions = meta.positions.as<long long>();
  p.num_positions = meta.positions.desc.size(0);
  p.slot_mapping = meta.slot_mapping.as<long long>();
  p.num_tokens = total;
  p.block_table = state.block_table.as<int>();
  p.block_table_stride = state.block_table.desc.stride(0);
  p.block_table_rows = state.block_table.desc.size(0);
  p.block_table_width = state.block_table.desc.size(1);
  p.compressed_kv = expected.as<float>();
  const std::vector<long long> written = ref::c128_compress(C128CompressKey{.head_size = 512}, p);
  if (written.empty()) return label + ": the case writes no row; it tests nothing (fix the case)";

  Placement device;
  Producer producer;
  C128CompressArgs args;
  args.state_cache = device.put_produced(state.state, producer, c.order);
  args.token_to_req = device.put(meta.token_to_req);
  args.positions = device.put(meta.positions);
  args.slot_mapping = device.put(meta.slot_mapping);
  args.block_table = device.put(state.block_table);
  args.compressed_kv = device.put(compressed);
  try {
    producer.run(c.order, [&](cuda::Stream stream, bool pdl) {
      args.pdl = pdl;
      C128CompressKernel::instance()(args, stream);
    });
    finish();
  } catch (const std::exception& error) {
    return label + ": the call failed: " + error.what();
  }
  const std::vector<std::uint8_t> actual = device.get(compressed);
  const std::int64_t begin = compressed.offset_bytes;
  const std::int64_t end = begin + total * 512 * 4;
  std::string failures;
  append_failure(failures, label,
                 "compressed_kv (" + std::to_string(written.size()) + " rows written)",
                 ref::compare_compressed_kv(float_view(expected.bytes, begin, total * 512),
                                            float_view(actual, begin, total * 512), 512, written));
  append_failure(failures, label, "compressed_kv guards",
                 in::compare_bytes(expected.bytes, in::splice(expected.bytes, actual, begin, end),
                                   in::element_locator(expected)));
  return failures;
}

std::vector<C128CompressCase> c128_compress_cases() {
  using R = in::RequestChunk;
  return {
      {.name = "one token at position 127", .requests = {R{127, 1}}, .drop = 0.0, .seed = 51},
      {.name = "chunks straddling boundaries, padded state rows and blocks",
       .requests = {R{0, 300}, R{1000, 200}, R{130, 1}, R{255, 3}},
       .state_row_padding = 16,
       .state_block_padding = 32,
       .seed = 52},
      {.name = "16492 tokens in 2 chunks", .requests = {R{0, 8192}, R{512, 8300}}, .seed = 53},
  };
}

TEST_F(Dsv4Gpu, C128CompressMatchesTheReferenceWithinTolerance) {
  precompile(C128CompressKernel::instance(), {C128CompressKey{.head_size = 512}});
  for (const C128CompressCase& c : c128_compress_cases()) {
    EXPECT_NO_FAILURE(check_c128_compress(c));
  }
}

// Serving through a miss: a prefill call whose key (cta_scan) was never warmed is served at once
// by the decode kernel, its fallback, within the reference's tolerance; once the key has
// compiled in the background it serves itself, within the same tolerance.
TEST_F(Dsv4Gpu, C128CompressMissedPrefillKeyIsServedByItsFallbackWithinTolerance) {
  C128CompressKernel& kernel = C128CompressKernel::instance();
  kernel.reset_for_testing();
  const C128CompressKey prefill{.head_size = 512, .cta_scan = true};
  const std::optional<C128CompressKey> fallback = kernel.fallback(prefill);
  ASSERT_TRUE(fallback.has_value());
  kernel.warm(*fallback, Runtime::instance().target_arch(0), std::vector<int>{0});
  Monitor::instance().set_mode(MonitorMode::fallback);
  Monitor::instance().arm();
  const C128CompressCase c = c128_compress_cases().back();  // 16492 tokens: the prefill key
  EXPECT_NO_FAILURE(check_c128_compress(c));
  EXPECT_EQ(kernel.counters().fallback_launches, 1u);
  ASSERT_TRUE(BackgroundCompiles::instance().wait_idle(std::chrono::minutes(2)));
  EXPECT_EQ(kernel.counters().background_compiles, 1u);
  EXPECT_NO_FAILURE(check_c128_compress(c));
  EXPECT_EQ(kernel.counters().fallback_launches, 1u);
}

// Programmatic dependent launch: behind a kernel that writes the state cache (poison until
// then), launched with and without PDL, every case (the decode and the prefill key) writes what
// the reference writes.
TEST_F(Dsv4Gpu, C128CompressMatchesTheReferenceBehindAProducerWithAndWithoutPdl) {
  for (const C128CompressCase& base : c128_compress_cases()) {
    for (const LaunchOrder order : kLaunchOrders) {
      C128CompressCase c = base;
      c.order = order;
      EXPECT_NO_FAILURE(check_c128_compress(c));
    }
  }
}

}  // namespace
}  // namespace zerojit::dsv4
