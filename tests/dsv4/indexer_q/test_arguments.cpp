// Bad inputs to the indexer-Q owners (FP8 and MXFP4): every mutation of a valid call is refused
// by plan() and by the call with InvalidArgument naming the kernel and the argument, and
// launches, loads and compiles nothing.
// The harness (fake addresses, the recording backend, Mutation) is dsv4/support/arguments.hpp.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "dsv4/support/arguments.hpp"

namespace zerojit::dsv4 {
namespace {

using namespace zerojit::dsv4::testing;

// A valid call's inputs, which both variants take.
template <class Args>
void set_indexer_inputs(Args& args, std::int64_t tokens = kTokens, std::int64_t heads = 64,
                        std::int64_t head_dim = 128, std::int64_t rope_dim = 64) {
  args.positions = contiguous(0, DType::i64, {tokens});
  args.q = contiguous(1, DType::bf16, {tokens, heads, head_dim});
  args.cos_sin_cache = contiguous(2, DType::f32, {4096, rope_dim});
  args.weights = contiguous(3, DType::bf16, {tokens, heads});
  args.scale = 0.011f;
}

IndexerQFp8Args indexer_fp8_call() {
  IndexerQFp8Args args;
  set_indexer_inputs(args);
  args.q_fp8 = contiguous(4, DType::u8, {kTokens, 64, 128});
  args.weights_out = contiguous(5, DType::f32, {kTokens, 64});
  return args;
}

IndexerQMxFp4Args indexer_mxfp4_call() {
  IndexerQMxFp4Args args;
  set_indexer_inputs(args);
  args.q_packed = contiguous(4, DType::u8, {kTokens, 64, 64});
  args.q_scale = contiguous(6, DType::u8, {kTokens, 64, 4});
  args.weights_out = contiguous(5, DType::f32, {kTokens, 64});
  return args;
}

// Input mutations shared by both variants (they validate their inputs in one place).
template <class Call>
std::vector<Mutation<Call>> indexer_input_mutations() {
  return {
      {"q is f32", [](Call& c) { c.q = with_dtype(c.q, DType::f32); }, "q", {kDtype, "bf16"}},
      {"q has rank 2",
       [](Call& c) {
         c.q = with_shape(c.q, {kTokens, 64 * 128});
       },
       "q",
       {"must have 3 dimensions"}},
      {"q has padded rows",
       [](Call& c) {
         c.q = strided(1, DType::bf16, {kTokens, 64, 128}, {64 * 136, 136, 1});
       },
       "q",
       {kContiguous}},
      {"q base is 2-byte aligned",
       [](Call& c) { c.q = misaligned(c.q, 2); },
       "q",
       {"16-byte aligned"}},
      {"q is on the CPU", [](Call& c) { c.q = on_device(c.q, Device::cpu()); }, "q", {kCuda}},
      {"positions is i32",
       [](Call& c) { c.positions = with_dtype(c.positions, DType::i32); },
       "positions",
       {kDtype, "i64"}},
      {"positions has T + 1 entries",
       [](Call& c) { c.positions = with_shape(c.positions, {kTokens + 1}); },
       "positions",
       {"size of dim 0 must be 16"}},
      {"positions is strided",
       [](Call& c) { c.positions = strided(0, DType::i64, {kTokens}, {2}); },
       "positions",
       {kContiguous}},
      {"positions is on another GPU",
       [](Call& c) { c.positions = on_device(c.positions, Device::cuda(1)); },
       "positions",
       {kSameDevice, "cuda:1"}},
      {"cos_sin_cache is f16",
       [](Call& c) { c.cos_sin_cache = with_dtype(c.cos_sin_cache, DType::f16); },
       "cos_sin_cache",
       {kDtype, "f32 or bf16"}},
      {"cos_sin_cache has rank 3",
       [](Call& c) {
         c.cos_sin_cache = with_shape(c.cos_sin_cache, {64, 64, 64});
       },
       "cos_sin_cache",
       {"must have 2 dimensions"}},
      {"cos_sin_cache columns are strided",
       [](Call& c) {
         c.cos_sin_cache = strided(2, DType::f32, {4096, 64}, {128, 2});
       },
       "cos_sin_cache",
       {kInnermost}},
      {"cos_sin_cache row stride is 66 floats (264 bytes)",
       [](Call& c) { c.cos_sin_cache = with_stride(c.cos_sin_cache, 0, 66); },
       "cos_sin_cache",
       {"stride of dim 0 must be a multiple of 16 bytes"}},
      {"cos_sin_cache base is 4-byte aligned",
       [](Call& c) { c.cos_sin_cache = misaligned(c.cos_sin_cache, 4); },
       "cos_sin_cache",
       {"16-byte aligned"}},
      {"cos_sin_cache is on another GPU",
       [](Call& c) { c.cos_sin_cache = on_device(c.cos_sin_cache, Device::cuda(1)); },
       "cos_sin_cache",
       {kSameDevice}},
      {"weights is f32",
       [](Call& c) { c.weights = with_dtype(c.weights, DType::f32); },
       "weights",
       {kDtype, "bf16"}},
      {"weights has 32 heads",
       [](Call& c) {
         c.weights = with_shape(c.weights, {kTokens, 32});
       },
       "weights",
       {"size of dim 1 must be 64"}},
      {"weights has T - 1 rows",
       [](Call& c) {
         c.weights = with_shape(c.weights, {kTokens - 1, 64});
       },
       "weights",
       {"size of dim 0 must be 16"}},
      {"weights is misaligned for its bf16 elements",
       [](Call& c) { c.weights = misaligned(c.weights, 1); },
       "weights",
       {"aligned to its 2-byte elements"}},
      {"positions is misaligned for its int64 elements",
       [](Call& c) { c.positions = misaligned(c.positions, 4); },
       "positions",
       {"aligned to its 8-byte elements"}},
      {"weights is transposed",
       [](Call& c) {
         c.weights = strided(3, DType::bf16, {kTokens, 64}, {1, kTokens});
       },
       "weights",
       {kContiguous}},
      // Shapes no kernel can be built for are refused by the key check.
      {"head_dim 100",
       [](Call& c) { set_indexer_inputs(c, kTokens, 64, 100, 64); },
       "key",
       {"head_dim 100"}},
      {"head_dim 1024 (64 lanes a row; a subwarp has at most 32)",
       [](Call& c) { set_indexer_inputs(c, kTokens, 64, 1024, 64); },
       "key",
       {"head_dim 1024"}},
  };
}

TEST_F(Dsv4Arguments, IndexerQFp8) {
  auto& kernel = IndexerQFp8Kernel::instance();
  auto mutations = indexer_input_mutations<IndexerQFp8Args>();
  const std::vector<Mutation<IndexerQFp8Args>> outputs = {
      {"q_fp8 is f32",
       [](auto& c) { c.q_fp8 = with_dtype(c.q_fp8, DType::f32); },
       "q_fp8",
       {kDtype, "u8 or e4m3"}},
      {"q_fp8 has rank 2",
       [](auto& c) {
         c.q_fp8 = with_shape(c.q_fp8, {kTokens, 64 * 128});
       },
       "q_fp8",
       {"must have 3 dimensions"}},
      {"q_fp8 has head_dim 64",
       [](auto& c) {
         c.q_fp8 = with_shape(c.q_fp8, {kTokens, 64, 64});
       },
       "q_fp8",
       {"size of dim 2 must be 128"}},
      {"q_fp8 has padded rows",
       [](auto& c) {
         c.q_fp8 = strided(4, DType::u8, {kTokens, 64, 128}, {64 * 144, 144, 1});
       },
       "q_fp8",
       {kContiguous}},
      {"q_fp8 base is 8-byte aligned",
       [](auto& c) { c.q_fp8 = misaligned(c.q_fp8, 8); },
       "q_fp8",
       {"16-byte aligned"}},
      {"q_fp8 is on another GPU",
       [](auto& c) { c.q_fp8 = on_device(c.q_fp8, Device::cuda(1)); },
       "q_fp8",
       {kSameDevice}},
      {"weights_out is bf16",
       [](auto& c) { c.weights_out = with_dtype(c.weights_out, DType::bf16); },
       "weights_out",
       {kDtype, "f32"}},
      {"weights_out has 63 heads",
       [](auto& c) {
         c.weights_out = with_shape(c.weights_out, {kTokens, 63});
       },
       "weights_out",
       {"size of dim 1 must be 64"}},
      {"weights_out is on the CPU",
       [](auto& c) { c.weights_out = on_device(c.weights_out, Device::cpu()); },
       "weights_out",
       {kCuda}},
  };
  mutations.insert(mutations.end(), outputs.begin(), outputs.end());
  expect_all_refused<IndexerQFp8Args>(
      kernel, indexer_fp8_call(), [&](const auto& c) { (void)kernel.launch_spec(c); },
      [&](const auto& c) { kernel(c); }, mutations);
}

TEST_F(Dsv4Arguments, IndexerQMxFp4) {
  auto& kernel = IndexerQMxFp4Kernel::instance();
  auto mutations = indexer_input_mutations<IndexerQMxFp4Args>();
  const std::vector<Mutation<IndexerQMxFp4Args>> outputs = {
      {"q_packed is bf16",
       [](auto& c) { c.q_packed = with_dtype(c.q_packed, DType::bf16); },
       "q_packed",
       {kDtype, "u8 or e2m1x2"}},
      {"q_packed holds D elements, not D / 2 bytes",
       [](auto& c) {
         c.q_packed = with_shape(c.q_packed, {kTokens, 64, 128});
       },
       "q_packed",
       {"size of dim 2 must be 64"}},
      {"q_packed base is 4-byte aligned",
       [](auto& c) { c.q_packed = misaligned(c.q_packed, 4); },
       "q_packed",
       {"8-byte aligned"}},
      {"q_packed has padded rows",
       [](auto& c) {
         c.q_packed = strided(4, DType::u8, {kTokens, 64, 64}, {64 * 80, 80, 1});
       },
       "q_packed",
       {kContiguous}},
      {"q_scale is i32 (the caller's view, not the kernel's bytes)",
       [](auto& c) { c.q_scale = with_dtype(c.q_scale, DType::i32); },
       "q_scale",
       {kDtype, "u8 or ue8m0"}},
      {"q_scale has 8 blocks per row",
       [](auto& c) {
         c.q_scale = with_shape(c.q_scale, {kTokens, 64, 8});
       },
       "q_scale",
       {"size of dim 2 must be 4"}},
      {"q_scale has rank 2",
       [](auto& c) {
         c.q_scale = with_shape(c.q_scale, {kTokens, 64 * 4});
       },
       "q_scale",
       {"must have 3 dimensions"}},
      {"q_scale is on another GPU",
       [](auto& c) { c.q_scale = on_device(c.q_scale, Device::cuda(1)); },
       "q_scale",
       {kSameDevice}},
      {"weights_out has T + 1 rows",
       [](auto& c) {
         c.weights_out = with_shape(c.weights_out, {kTokens + 1, 64});
       },
       "weights_out",
       {"size of dim 0 must be 16"}},
      // MXFP4 blocks are 32 elements: a rope part of 48 splits one.
      {"rope_dim 48",
       [](auto& c) { set_indexer_inputs(c, kTokens, 64, 128, 48); },
       "key",
       {"multiples of 32"}},
  };
  mutations.insert(mutations.end(), outputs.begin(), outputs.end());
  expect_all_refused<IndexerQMxFp4Args>(
      kernel, indexer_mxfp4_call(), [&](const auto& c) { (void)kernel.launch_spec(c); },
      [&](const auto& c) { kernel(c); }, mutations);
}

}  // namespace
}  // namespace zerojit::dsv4
