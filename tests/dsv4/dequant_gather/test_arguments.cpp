// Bad inputs to the dequantize-and-gather owner: every mutation of a valid call is refused by
// plan() and by the call with InvalidArgument naming the kernel and the argument, and launches,
// loads and compiles nothing.
// The harness (fake addresses, the recording backend, Mutation) is dsv4/support/arguments.hpp.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "dsv4/support/arguments.hpp"

namespace zerojit::dsv4 {
namespace {

using namespace zerojit::dsv4::testing;

DequantGatherArgs gather_args() {
  DequantGatherArgs a;
  a.out = contiguous(0, DType::bf16, {3, 600, 512});
  // B = 64 rows a page, default page stride round_up(64 * 584, 576) = 37440.
  a.k_cache = strided(1, DType::u8, {40, 64, 584}, {37440, 584, 1});
  a.seq_lens = contiguous(2, DType::i32, {3});
  a.gather_lens = contiguous(3, DType::i32, {3});
  a.block_table = contiguous(4, DType::i32, {3, 16});
  a.offset = 0;
  return a;
}

TEST_F(Dsv4Arguments, DequantGather) {
  auto& kernel = DequantGatherKernel::instance();
  using A = DequantGatherArgs;
  const std::vector<Mutation<A>> mutations = {
      {"k_cache is i8",
       [](A& a) { a.k_cache = with_dtype(a.k_cache, DType::i8); },
       "k_cache",
       {kDtype, "u8"}},
      {"k_cache has rank 2",
       [](A& a) {
         a.k_cache = strided(1, DType::u8, {40, 37440}, {37440, 1});
       },
       "k_cache",
       {"must have 3 dimensions"}},
      {"k_cache rows are 576 bytes",
       [](A& a) {
         a.k_cache = strided(1, DType::u8, {40, 64, 576}, {37440, 576, 1});
       },
       "k_cache",
       {"size of dim 2 must be 584"}},
      {"k_cache has block size 0",
       [](A& a) {
         a.k_cache = strided(1, DType::u8, {40, 0, 584}, {37440, 584, 1});
       },
       "k_cache.shape[1] (block size)",
       {"must be positive"}},
      {"k_cache page stride is not a multiple of 32",
       [](A& a) { a.k_cache = with_stride(a.k_cache, 0, 37440 + 16); },
       "k_cache",
       {"page stride", "multiple of 32"}},
      {"k_cache rows overlap (a broadcast row stride)",
       [](A& a) { a.k_cache = with_stride(a.k_cache, 1, 0); },
       "k_cache",
       {"row stride", "at least 584"}},
      {"out rows overlap", [](A& a) { a.out = with_stride(a.out, 1, 8); }, "out", {"overlap"}},
      {"out requests share rows (stride 0)",
       [](A& a) { a.out = with_stride(a.out, 0, 0); },
       "out",
       {"overlap"}},
      {"seq_lens is misaligned for its int32 elements",
       [](A& a) { a.seq_lens = misaligned(a.seq_lens, 2); },
       "seq_lens",
       {"aligned to its 4-byte elements"}},
      {"k_cache block size past int32",
       [](A& a) {
         a.k_cache = strided(1, DType::u8, {1, std::int64_t{1} << 32, 584}, {0, 584, 1});
       },
       "k_cache",
       {"must fit in 32 bits"}},
      {"k_cache page stride is below B * 584",
       [](A& a) { a.k_cache = with_stride(a.k_cache, 0, 64 * 584 - 32); },
       "k_cache",
       {"page stride", "at least 37376"}},
      {"k_cache bytes are strided",
       [](A& a) { a.k_cache = with_stride(a.k_cache, 2, 2); },
       "k_cache",
       {kInnermost}},
      {"k_cache base is 16-byte aligned",
       [](A& a) { a.k_cache = misaligned(a.k_cache, 16); },
       "k_cache",
       {"32-byte aligned"}},
      {"k_cache is on another GPU",
       [](A& a) { a.k_cache = on_device(a.k_cache, Device::cuda(1)); },
       "k_cache",
       {kSameDevice}},
      {"k_cache is on the CPU",
       [](A& a) { a.k_cache = on_device(a.k_cache, Device::cpu()); },
       "k_cache",
       {kCuda}},
      {"out is f32", [](A& a) { a.out = with_dtype(a.out, DType::f32); }, "out", {kDtype, "bf16"}},
      {"out has rank 2",
       [](A& a) {
         a.out = with_shape(a.out, {1800, 512});
       },
       "out",
       {"must have 3 dimensions"}},
      {"out rows are 448 wide",
       [](A& a) {
         a.out = with_shape(a.out, {3, 600, 448});
       },
       "out",
       {"size of dim 2 must be 512"}},
      {"out base is 8-byte aligned",
       [](A& a) { a.out = misaligned(a.out, 8); },
       "out",
       {"16-byte aligned"}},
      {"out row stride is 516 elements (1032 bytes)",
       [](A& a) {
         a.out = strided(0, DType::bf16, {3, 600, 512}, {600 * 516, 516, 1});
       },
       "out",
       {"stride of dim 1 must be a multiple of 16 bytes"}},
      {"out request stride is odd",
       [](A& a) {
         a.out = strided(0, DType::bf16, {3, 600, 512}, {600 * 512 + 1, 512, 1});
       },
       "out",
       {"stride of dim 0 must be a multiple of 16 bytes"}},
      {"out columns are strided",
       [](A& a) { a.out = with_stride(a.out, 2, 2); },
       "out",
       {kInnermost}},
      {"out is on the CPU", [](A& a) { a.out = on_device(a.out, Device::cpu()); }, "out", {kCuda}},
      {"seq_lens is i64",
       [](A& a) { a.seq_lens = with_dtype(a.seq_lens, DType::i64); },
       "seq_lens",
       {kDtype, "i32"}},
      {"seq_lens has 2 entries for 3 requests",
       [](A& a) { a.seq_lens = with_shape(a.seq_lens, {2}); },
       "seq_lens",
       {"size of dim 0 must be 3"}},
      {"seq_lens is strided",
       [](A& a) { a.seq_lens = strided(2, DType::i32, {3}, {2}); },
       "seq_lens",
       {kContiguous}},
      {"seq_lens is on another GPU",
       [](A& a) { a.seq_lens = on_device(a.seq_lens, Device::cuda(1)); },
       "seq_lens",
       {kSameDevice}},
      {"gather_lens is f32",
       [](A& a) { a.gather_lens = with_dtype(*a.gather_lens, DType::f32); },
       "gather_lens",
       {kDtype, "i32"}},
      {"gather_lens has 4 entries for 3 requests",
       [](A& a) { a.gather_lens = with_shape(*a.gather_lens, {4}); },
       "gather_lens",
       {"size of dim 0 must be 3"}},
      {"gather_lens is on another GPU",
       [](A& a) { a.gather_lens = on_device(*a.gather_lens, Device::cuda(1)); },
       "gather_lens",
       {kSameDevice}},
      {"block_table is i64",
       [](A& a) { a.block_table = with_dtype(a.block_table, DType::i64); },
       "block_table",
       {kDtype, "i32"}},
      {"block_table has rank 1",
       [](A& a) { a.block_table = with_shape(a.block_table, {48}); },
       "block_table",
       {"must have 2 dimensions"}},
      {"block_table has 2 rows for 3 requests",
       [](A& a) {
         a.block_table = with_shape(a.block_table, {2, 16});
       },
       "block_table",
       {"size of dim 0 must be 3"}},
      {"block_table columns are strided",
       [](A& a) {
         a.block_table = strided(4, DType::i32, {3, 16}, {32, 2});
       },
       "block_table",
       {kInnermost}},
      {"offset is negative", [](A& a) { a.offset = -1; }, "offset", {"must be in [0, 600]", "-1"}},
      {"offset is past the rows of out",
       [](A& a) { a.offset = 601; },
       "offset",
       {"must be in [0, 600]", "601"}},
  };
  expect_all_refused<A>(
      kernel, gather_args(), [&](const A& a) { (void)kernel.launch_spec(a); },
      [&](const A& a) { kernel(a); }, mutations);
}

}  // namespace
}  // namespace zerojit::dsv4
