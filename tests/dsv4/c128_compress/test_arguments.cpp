// Bad inputs to the C128 compress owner: every mutation of a valid call is refused by plan() and
// by the call with InvalidArgument naming the kernel and the argument, and launches, loads and
// compiles nothing.
// The harness (fake addresses, the recording backend, Mutation) is dsv4/support/arguments.hpp.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "dsv4/compressor/compressor_params.h"
#include "dsv4/support/arguments.hpp"

namespace zerojit::dsv4 {
namespace {

using namespace zerojit::dsv4::testing;

C128CompressArgs c128_compress_args() {
  C128CompressArgs a;
  a.state_cache = contiguous(0, DType::f32, {64, 8, 1024});
  a.token_to_req = contiguous(1, DType::i32, {kTokens});
  a.positions = contiguous(2, DType::i64, {kTokens});
  a.slot_mapping = contiguous(3, DType::i64, {kTokens});
  a.block_table = contiguous(4, DType::i32, {2, 64});
  a.compressed_kv = contiguous(5, DType::f32, {kTokens, 512});
  return a;
}

TEST_F(Dsv4Arguments, C128Compress) {
  auto& kernel = C128CompressKernel::instance();
  using A = C128CompressArgs;
  const std::vector<Mutation<A>> mutations = {
      {"state_cache is bf16",
       [](A& a) { a.state_cache = with_dtype(a.state_cache, DType::bf16); },
       "state_cache",
       {kDtype, "f32"}},
      {"state_cache has rank 2",
       [](A& a) {
         a.state_cache = with_shape(a.state_cache, {512, 1024});
       },
       "state_cache",
       {"must have 3 dimensions"}},
      {"state_cache blocks hold 4 rows (the kernel pools 8 a block)",
       [](A& a) {
         a.state_cache = with_shape(a.state_cache, {64, 4, 1024});
       },
       "state_cache",
       {"size of dim 1 must be 8"}},
      {"state_cache rows are 2048 wide (C4 overlap)",
       [](A& a) {
         a.state_cache = with_shape(a.state_cache, {64, 8, 2048});
       },
       "state_cache",
       {"size of dim 2 must be 1024"}},
      {"state_cache row stride is 1028 floats",
       [](A& a) {
         a.state_cache = strided(0, DType::f32, {64, 8, 1024}, {8 * 1028, 1028, 1});
       },
       "state_cache",
       {"stride of dim 1 must be a multiple of 64 bytes"}},
      {"state_cache columns are strided",
       [](A& a) { a.state_cache = with_stride(a.state_cache, 2, 2); },
       "state_cache",
       {kInnermost}},
      {"state_cache base is 4-byte aligned",
       [](A& a) { a.state_cache = misaligned(a.state_cache, 4); },
       "state_cache",
       {"16-byte aligned"}},
      {"state_cache is on the CPU",
       [](A& a) { a.state_cache = on_device(a.state_cache, Device::cpu()); },
       "state_cache",
       {kCuda}},
      {"slot_mapping is i32",
       [](A& a) { a.slot_mapping = with_dtype(a.slot_mapping, DType::i32); },
       "slot_mapping",
       {kDtype, "i64"}},
      {"token_to_req is strided",
       [](A& a) { a.token_to_req = strided(1, DType::i32, {kTokens}, {2}); },
       "token_to_req_indices",
       {kContiguous}},
      {"positions is on another GPU",
       [](A& a) { a.positions = on_device(a.positions, Device::cuda(1)); },
       "positions",
       {kSameDevice}},
      {"block_table is i64",
       [](A& a) { a.block_table = with_dtype(a.block_table, DType::i64); },
       "block_table",
       {kDtype, "i32"}},
      {"block_table columns are strided",
       [](A& a) {
         a.block_table = strided(4, DType::i32, {2, 64}, {128, 2});
       },
       "block_table",
       {kInnermost}},
      {"compressed_kv is bf16",
       [](A& a) { a.compressed_kv = with_dtype(a.compressed_kv, DType::bf16); },
       "compressed_kv",
       {kDtype, "f32"}},
      {"compressed_kv head is 500 (not a multiple of 64)",
       [](A& a) {
         a.compressed_kv = with_shape(a.compressed_kv, {kTokens, 500});
       },
       "compressed_kv",
       {"multiple of 64"}},
      {"compressed_kv has T + 1 rows",
       [](A& a) {
         a.compressed_kv = with_shape(a.compressed_kv, {kTokens + 1, 512});
       },
       "compressed_kv",
       {"size of dim 0 must be 16"}},
      {"compressed_kv has padded rows",
       [](A& a) {
         a.compressed_kv = strided(5, DType::f32, {kTokens, 512}, {528, 1});
       },
       "compressed_kv",
       {kContiguous}},
      {"compressed_kv base is 8-byte aligned",
       [](A& a) { a.compressed_kv = misaligned(a.compressed_kv, 8); },
       "compressed_kv",
       {"16-byte aligned"}},
      {"compressed_kv is on another GPU",
       [](A& a) { a.compressed_kv = on_device(a.compressed_kv, Device::cuda(1)); },
       "compressed_kv",
       {kSameDevice}},
  };
  expect_all_refused<A>(
      kernel, c128_compress_args(), [&](const A& a) { (void)kernel.launch_spec(a); },
      [&](const A& a) { kernel(a); }, mutations);
}

// The C128 compress grid by prefill size (compressor_params.h): a chunk of tokens a CTA group.
TEST(CompressorGrids, C128CompressChunksFollowThePrefillSize) {
  using zj::dsv4::c128_compress_grid;
  static_assert(c128_compress_grid(0, 132) == 0);
  static_assert(c128_compress_grid(64, 132) == 512);       // decode: a token a chunk, 8 tiles
  static_assert(c128_compress_grid(1024, 132) == 1024);    // K = 8
  static_assert(c128_compress_grid(4096, 132) == 256);     // K = 128: 32 chunks in one wave
  static_assert(c128_compress_grid(16384, 132) == 2048);   // K = 64
  static_assert(c128_compress_grid(131072, 132) == 4096);  // K = 256
  static_assert(c128_compress_grid(4096, 16) == 512);      // 16 SMs hold 6 chunks: K = 64
  SUCCEED();
}

}  // namespace
}  // namespace zerojit::dsv4
