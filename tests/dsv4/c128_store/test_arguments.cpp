// Bad inputs to the C128 store owners (fp8_ds_mla and full rows): every mutation of a valid call
// is refused by plan() and by the call with InvalidArgument naming the kernel and the argument,
// and launches, loads and compiles nothing.
// The harness (fake addresses, the recording backend, Mutation) is dsv4/support/arguments.hpp.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "dsv4/support/arguments.hpp"

namespace zerojit::dsv4 {
namespace {

using namespace zerojit::dsv4::testing;

C128StoreArgs c128_store_args() {
  C128StoreArgs a;
  a.compressed_kv = contiguous(0, DType::f32, {kTokens, 512});
  a.positions = contiguous(1, DType::i64, {kTokens});
  a.slot_mapping = contiguous(2, DType::i64, {kTokens});
  a.rms_norm_weight = contiguous(3, DType::bf16, {512});
  a.eps = 1e-6f;
  a.cos_sin_cache = contiguous(4, DType::f32, {4096, 64});
  a.k_cache = strided(5, DType::u8, {16, 2, 584}, {1728, 584, 1});
  a.kv_slot_mapping = contiguous(6, DType::i64, {kTokens});
  return a;
}

C128StoreArgs c128_full_args(bool fp8) {
  C128StoreArgs a = c128_store_args();
  a.k_cache = contiguous(5, fp8 ? DType::e4m3 : DType::bf16, {16, 64, 512});
  if (fp8) a.fp8_scale = contiguous(7, DType::f32, {1});
  return a;
}

std::vector<Mutation<C128StoreArgs>> c128_input_mutations() {
  using A = C128StoreArgs;
  std::vector<Mutation<A>> mutations = {
      {"compressed_kv is bf16",
       [](A& a) { a.compressed_kv = with_dtype(a.compressed_kv, DType::bf16); },
       "compressed_kv",
       {kDtype, "f32"}},
      {"compressed_kv rows are 448 wide",
       [](A& a) {
         a.compressed_kv = with_shape(a.compressed_kv, {kTokens, 448});
       },
       "compressed_kv",
       {"size of dim 1 must be 512"}},
      {"compressed_kv has padded rows",
       [](A& a) {
         a.compressed_kv = strided(0, DType::f32, {kTokens, 512}, {528, 1});
       },
       "compressed_kv",
       {kContiguous}},
      {"compressed_kv base is 8-byte aligned",
       [](A& a) { a.compressed_kv = misaligned(a.compressed_kv, 8); },
       "compressed_kv",
       {"16-byte aligned"}},
      {"compressed_kv is on the CPU",
       [](A& a) { a.compressed_kv = on_device(a.compressed_kv, Device::cpu()); },
       "compressed_kv",
       {kCuda}},
      {"compressed_kv has fewer rows than slot_mapping",
       [](A& a) {
         a.compressed_kv = with_shape(a.compressed_kv, {kTokens - 1, 512});
       },
       "compressed_kv",
       {"size of dim 0 must be 16"}},
      {"slot_mapping is i32",
       [](A& a) { a.slot_mapping = with_dtype(a.slot_mapping, DType::i32); },
       "slot_mapping",
       {kDtype, "i64"}},
      {"positions is strided",
       [](A& a) { a.positions = strided(1, DType::i64, {kTokens}, {2}); },
       "positions",
       {kContiguous}},
      {"kv_slot_mapping is on another GPU",
       [](A& a) { a.kv_slot_mapping = on_device(a.kv_slot_mapping, Device::cuda(1)); },
       "kv_slot_mapping",
       {kSameDevice}},
      {"rms_norm_weight has 1024 entries",
       [](A& a) { a.rms_norm_weight = with_shape(a.rms_norm_weight, {1024}); },
       "rms_norm_weight",
       {"size of dim 0 must be 512"}},
      {"rms_norm_weight is i32",
       [](A& a) { a.rms_norm_weight = with_dtype(a.rms_norm_weight, DType::i32); },
       "rms_norm_weight",
       {kDtype, "bf16 or f32"}},
      {"cos_sin_cache is bf16",
       [](A& a) { a.cos_sin_cache = with_dtype(a.cos_sin_cache, DType::bf16); },
       "cos_sin_cache",
       {kDtype, "f32"}},
      {"cos_sin_cache columns are strided",
       [](A& a) {
         a.cos_sin_cache = strided(4, DType::f32, {4096, 64}, {128, 2});
       },
       "cos_sin_cache",
       {kInnermost}},
      {"eps is 0", [](A& a) { a.eps = 0.0f; }, "rms_norm_eps", {"must be positive"}},
      {"eps is -inf", [](A& a) { a.eps = -INFINITY; }, "rms_norm_eps", {"must be positive"}},
  };
  const auto placement = k_cache_placement_mutations<A>();
  mutations.insert(mutations.end(), placement.begin(), placement.end());
  return mutations;
}

TEST_F(Dsv4Arguments, C128DsMlaStore) {
  auto& kernel = C128StoreKernel::instance();
  using A = C128StoreArgs;
  auto mutations = c128_input_mutations();
  const std::vector<Mutation<A>> cache = {
      {"k_cache is bf16",
       [](A& a) { a.k_cache = with_dtype(a.k_cache, DType::bf16); },
       "k_cache",
       {kDtype, "u8"}},
      {"k_cache rows are 576 bytes",
       [](A& a) {
         a.k_cache = strided(5, DType::u8, {16, 2, 576}, {1728, 576, 1});
       },
       "k_cache",
       {"size of dim 2 must be 584"}},
      {"k_cache page stride 1736 is not a multiple of 16",
       [](A& a) { a.k_cache = with_stride(a.k_cache, 0, 1736); },
       "k_cache",
       {"page stride", "multiple of 16"}},
      {"k_cache page stride 1152 cannot hold 2 rows",
       [](A& a) { a.k_cache = with_stride(a.k_cache, 0, 1152); },
       "k_cache",
       {"page stride", "B * 584"}},
      {"k_cache has block size 0",
       [](A& a) {
         a.k_cache = strided(5, DType::u8, {16, 0, 584}, {1728, 584, 1});
       },
       "k_cache.shape[1] (block size)",
       {"must be positive"}},
      {"k_cache bytes are strided",
       [](A& a) { a.k_cache = with_stride(a.k_cache, 2, 2); },
       "k_cache",
       {kInnermost}},
  };
  mutations.insert(mutations.end(), cache.begin(), cache.end());
  expect_all_refused<A>(
      kernel, c128_store_args(), [&](const A& a) { (void)kernel.launch_spec(a); },
      [&](const A& a) { kernel(a); }, mutations);
}

TEST_F(Dsv4Arguments, C128FullStore) {
  auto& kernel = C128StoreFullKernel::instance();
  using A = C128StoreArgs;
  auto mutations = c128_input_mutations();
  const auto cache = full_cache_mutations<A>(5, 7);
  mutations.insert(mutations.end(), cache.begin(), cache.end());
  for (const bool fp8 : {false, true}) {
    SCOPED_TRACE(fp8 ? "e4m3 cache" : "bf16 cache");
    expect_all_refused<A>(
        kernel, c128_full_args(fp8), [&](const A& a) { (void)kernel.launch_spec(a); },
        [&](const A& a) { kernel(a); }, mutations);
  }
}

}  // namespace
}  // namespace zerojit::dsv4
