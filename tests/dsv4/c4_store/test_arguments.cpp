// Bad inputs to the C4 store owners (fp8_ds_mla and full rows): every mutation of a valid call is
// refused by plan() and by the call with InvalidArgument naming the kernel and the argument, and
// launches, loads and compiles nothing.
// The harness (fake addresses, the recording backend, Mutation) is dsv4/support/arguments.hpp.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "dsv4/support/arguments.hpp"

namespace zerojit::dsv4 {
namespace {

using namespace zerojit::dsv4::testing;

C4StoreArgs c4_args() {
  C4StoreArgs a;
  a.state_cache = contiguous(0, DType::f32, {64, 4, 2048});
  a.token_to_req = contiguous(1, DType::i32, {kTokens});
  a.positions = contiguous(2, DType::i64, {kTokens});
  a.slot_mapping = contiguous(3, DType::i64, {kTokens});
  a.block_table = contiguous(4, DType::i32, {2, 64});
  a.rms_norm_weight = contiguous(5, DType::bf16, {512});
  a.eps = 1e-6f;
  a.cos_sin_cache = contiguous(6, DType::f32, {4096, 64});
  a.k_cache = strided(7, DType::u8, {16, 64, 584}, {37440, 584, 1});
  a.kv_slot_mapping = contiguous(8, DType::i64, {kTokens});
  return a;
}

C4StoreArgs c4_full_args(bool fp8) {
  C4StoreArgs a = c4_args();
  a.k_cache = contiguous(7, fp8 ? DType::e4m3 : DType::bf16, {16, 64, 512});
  if (fp8) a.fp8_scale = contiguous(9, DType::f32, {1});
  return a;
}

// The state, per-token vectors, norm weight, cos/sin and eps checks both C4 kernels share.
std::vector<Mutation<C4StoreArgs>> c4_input_mutations() {
  using A = C4StoreArgs;
  std::vector<Mutation<A>> mutations = {
      {"state_cache is bf16",
       [](A& a) { a.state_cache = with_dtype(a.state_cache, DType::bf16); },
       "state_cache",
       {kDtype, "f32"}},
      {"state_cache has rank 2",
       [](A& a) {
         a.state_cache = with_shape(a.state_cache, {256, 2048});
       },
       "state_cache",
       {"must have 3 dimensions"}},
      {"state_cache rows are 1024 wide (no overlap)",
       [](A& a) {
         a.state_cache = with_shape(a.state_cache, {64, 4, 1024});
       },
       "state_cache",
       {"size of dim 2 must be 2048"}},
      {"state_cache row stride is 2056 floats (not 64-byte granular)",
       [](A& a) {
         a.state_cache = strided(0, DType::f32, {64, 4, 2048}, {4 * 2056, 2056, 1});
       },
       "state_cache",
       {"stride of dim 1 must be a multiple of 64 bytes"}},
      {"state_cache block stride is not 64-byte granular",
       [](A& a) {
         a.state_cache = strided(0, DType::f32, {64, 4, 2048}, {4 * 2048 + 4, 2048, 1});
       },
       "state_cache",
       {"stride of dim 0 must be a multiple of 64 bytes"}},
      {"state_cache columns are strided",
       [](A& a) { a.state_cache = with_stride(a.state_cache, 2, 2); },
       "state_cache",
       {kInnermost}},
      {"state_cache base is 8-byte aligned",
       [](A& a) { a.state_cache = misaligned(a.state_cache, 8); },
       "state_cache",
       {"16-byte aligned"}},
      {"state_cache has block size 0",
       [](A& a) {
         a.state_cache = with_shape(a.state_cache, {64, 0, 2048});
       },
       "state_cache.shape[1] (state block size)",
       {"must be positive"}},
      {"state_cache is on the CPU",
       [](A& a) { a.state_cache = on_device(a.state_cache, Device::cpu()); },
       "state_cache",
       {kCuda}},
      {"slot_mapping is i32",
       [](A& a) { a.slot_mapping = with_dtype(a.slot_mapping, DType::i32); },
       "slot_mapping",
       {kDtype, "i64"}},
      {"slot_mapping is strided",
       [](A& a) { a.slot_mapping = strided(3, DType::i64, {kTokens}, {2}); },
       "slot_mapping",
       {kContiguous}},
      {"token_to_req is i64",
       [](A& a) { a.token_to_req = with_dtype(a.token_to_req, DType::i64); },
       "token_to_req_indices",
       {kDtype, "i32"}},
      {"token_to_req has rank 2",
       [](A& a) {
         a.token_to_req = with_shape(a.token_to_req, {kTokens, 1});
       },
       "token_to_req_indices",
       {"must have 1 dimensions"}},
      {"positions is i32",
       [](A& a) { a.positions = with_dtype(a.positions, DType::i32); },
       "positions",
       {kDtype, "i64"}},
      {"positions is on another GPU",
       [](A& a) { a.positions = on_device(a.positions, Device::cuda(1)); },
       "positions",
       {kSameDevice}},
      {"kv_slot_mapping is f32",
       [](A& a) { a.kv_slot_mapping = with_dtype(a.kv_slot_mapping, DType::f32); },
       "kv_slot_mapping",
       {kDtype, "i64"}},
      {"kv_slot_mapping is on another GPU",
       [](A& a) { a.kv_slot_mapping = on_device(a.kv_slot_mapping, Device::cuda(1)); },
       "kv_slot_mapping",
       {kSameDevice}},
      {"block_table is i64",
       [](A& a) { a.block_table = with_dtype(a.block_table, DType::i64); },
       "block_table",
       {kDtype, "i32"}},
      {"block_table has rank 1",
       [](A& a) { a.block_table = with_shape(a.block_table, {128}); },
       "block_table",
       {"must have 2 dimensions"}},
      {"block_table columns are strided",
       [](A& a) {
         a.block_table = strided(4, DType::i32, {2, 64}, {128, 2});
       },
       "block_table",
       {kInnermost}},
      {"rms_norm_weight is f16",
       [](A& a) { a.rms_norm_weight = with_dtype(a.rms_norm_weight, DType::f16); },
       "rms_norm_weight",
       {kDtype, "bf16 or f32"}},
      {"rms_norm_weight has 448 entries",
       [](A& a) { a.rms_norm_weight = with_shape(a.rms_norm_weight, {448}); },
       "rms_norm_weight",
       {"size of dim 0 must be 512"}},
      {"rms_norm_weight is strided",
       [](A& a) { a.rms_norm_weight = strided(5, DType::bf16, {512}, {2}); },
       "rms_norm_weight",
       {kContiguous}},
      {"rms_norm_weight base is 2-byte aligned",
       [](A& a) { a.rms_norm_weight = misaligned(a.rms_norm_weight, 2); },
       "rms_norm_weight",
       {"16-byte aligned"}},
      {"cos_sin_cache is bf16 (the compressors read f32 only)",
       [](A& a) { a.cos_sin_cache = with_dtype(a.cos_sin_cache, DType::bf16); },
       "cos_sin_cache",
       {kDtype, "f32"}},
      {"cos_sin_cache has 32 columns",
       [](A& a) {
         a.cos_sin_cache = with_shape(a.cos_sin_cache, {4096, 32});
       },
       "cos_sin_cache",
       {"size of dim 1 must be 64"}},
      {"cos_sin_cache row stride is 65 floats",
       [](A& a) { a.cos_sin_cache = with_stride(a.cos_sin_cache, 0, 65); },
       "cos_sin_cache",
       {"stride of dim 0 must be a multiple of 16 bytes"}},
      {"cos_sin_cache is on another GPU",
       [](A& a) { a.cos_sin_cache = on_device(a.cos_sin_cache, Device::cuda(1)); },
       "cos_sin_cache",
       {kSameDevice}},
      {"eps is 0", [](A& a) { a.eps = 0.0f; }, "rms_norm_eps", {"must be positive"}},
      {"eps is negative", [](A& a) { a.eps = -1e-6f; }, "rms_norm_eps", {"must be positive"}},
      {"eps is NaN", [](A& a) { a.eps = std::nanf(""); }, "rms_norm_eps", {"must be positive"}},
  };
  const auto placement = k_cache_placement_mutations<A>();
  mutations.insert(mutations.end(), placement.begin(), placement.end());
  return mutations;
}

TEST_F(Dsv4Arguments, C4DsMlaStore) {
  auto& kernel = C4StoreKernel::instance();
  using A = C4StoreArgs;
  auto mutations = c4_input_mutations();
  const std::vector<Mutation<A>> cache = {
      {"k_cache is bf16 (a full cache)",
       [](A& a) { a.k_cache = c4_full_args(false).k_cache; },
       "k_cache",
       {kDtype, "u8"}},
      {"k_cache rows are 512 bytes",
       [](A& a) {
         a.k_cache = strided(7, DType::u8, {16, 64, 512}, {37440, 512, 1});
       },
       "k_cache",
       {"size of dim 2 must be 584"}},
      {"k_cache page stride is not a multiple of 16",
       [](A& a) { a.k_cache = with_stride(a.k_cache, 0, 37440 + 8); },
       "k_cache",
       {"page stride", "multiple of 16"}},
      {"k_cache page stride is below B * 584",
       [](A& a) { a.k_cache = with_stride(a.k_cache, 0, 64 * 584 - 16); },
       "k_cache",
       {"page stride", "B * 584"}},
      {"k_cache rows overlap (row stride 16)",
       [](A& a) { a.k_cache = with_stride(a.k_cache, 1, 16); },
       "k_cache",
       {"row stride", "at least 584"}},
      {"k_cache has block size 0",
       [](A& a) {
         a.k_cache = strided(7, DType::u8, {16, 0, 584}, {37440, 584, 1});
       },
       "k_cache.shape[1] (block size)",
       {"must be positive"}},
  };
  mutations.insert(mutations.end(), cache.begin(), cache.end());
  expect_all_refused<A>(
      kernel, c4_args(), [&](const A& a) { (void)kernel.launch_spec(a); },
      [&](const A& a) { kernel(a); }, mutations);
}

TEST_F(Dsv4Arguments, C4FullStore) {
  auto& kernel = C4StoreFullKernel::instance();
  using A = C4StoreArgs;
  auto mutations = c4_input_mutations();
  const auto cache = full_cache_mutations<A>(7, 9);
  mutations.insert(mutations.end(), cache.begin(), cache.end());
  for (const bool fp8 : {false, true}) {
    SCOPED_TRACE(fp8 ? "e4m3 cache" : "bf16 cache");
    expect_all_refused<A>(
        kernel, c4_full_args(fp8), [&](const A& a) { (void)kernel.launch_spec(a); },
        [&](const A& a) { kernel(a); }, mutations);
  }
}

}  // namespace
}  // namespace zerojit::dsv4
