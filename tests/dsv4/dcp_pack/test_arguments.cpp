// Bad inputs to the DCP pack owner: every mutation of a valid call is refused by plan() and by
// the call with InvalidArgument naming the kernel and the argument, and launches, loads and
// compiles nothing; a valid call through the same path does launch, once.
// The harness (fake addresses, the recording backend, Mutation) is dsv4/support/arguments.hpp.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "dsv4/support/arguments.hpp"

namespace zerojit::dsv4 {
namespace {

using namespace zerojit::dsv4::testing;

DcpPackArgs dcp_args() {
  DcpPackArgs a;
  a.logits = contiguous(0, DType::f32, {4, 4096});
  a.topk_indices = contiguous(1, DType::i32, {4, 512});
  a.row_starts = contiguous(2, DType::i32, {4});
  a.packed = contiguous(3, DType::f32, {4, 512, 2});
  a.dcp_rank = 1;
  a.dcp_world_size = 2;
  a.cp_interleave = 1;
  return a;
}

TEST_F(Dsv4Arguments, DcpPack) {
  auto& kernel = DcpPackKernel::instance();
  using A = DcpPackArgs;
  const std::vector<Mutation<A>> mutations = {
      {"topk 256",
       [](A& a) {
         a.topk_indices = contiguous(1, DType::i32, {4, 256});
         a.packed = contiguous(3, DType::f32, {4, 256, 2});
       },
       "topk_indices",
       {"must be 512, 1024 or 2048", "i32[4, 256]"}},
      {"topk 4096",
       [](A& a) {
         a.topk_indices = contiguous(1, DType::i32, {4, 4096});
         a.packed = contiguous(3, DType::f32, {4, 4096, 2});
       },
       "topk_indices",
       {"must be 512, 1024 or 2048"}},
      {"topk_indices is i64",
       [](A& a) { a.topk_indices = with_dtype(a.topk_indices, DType::i64); },
       "topk_indices",
       {kDtype, "i32"}},
      {"topk_indices has rank 1",
       [](A& a) { a.topk_indices = with_shape(a.topk_indices, {2048}); },
       "topk_indices",
       {"must have 2 dimensions"}},
      {"topk_indices has 3 rows for 4 logits rows",
       [](A& a) {
         a.topk_indices = with_shape(a.topk_indices, {3, 512});
       },
       "topk_indices",
       {"size of dim 0 must be 4"}},
      {"topk_indices is on another GPU",
       [](A& a) { a.topk_indices = on_device(a.topk_indices, Device::cuda(1)); },
       "topk_indices",
       {kSameDevice}},
      {"dcp_rank equals the world size",
       [](A& a) { a.dcp_rank = 2; },
       "dcp_rank",
       {"must be in [0, 2)", "got 2"}},
      {"dcp_rank is negative",
       [](A& a) { a.dcp_rank = -1; },
       "dcp_rank",
       {"must be in [0, 2)", "got -1"}},
      {"dcp_world_size is 0",
       [](A& a) {
         a.dcp_world_size = 0;
         a.dcp_rank = 0;
       },
       "dcp_world_size",
       {"must be positive"}},
      {"cp_interleave is 0",
       [](A& a) { a.cp_interleave = 0; },
       "cp_interleave",
       {"must be positive"}},
      {"cp_interleave is negative",
       [](A& a) { a.cp_interleave = -2; },
       "cp_interleave",
       {"must be positive"}},
      {"logits is f16",
       [](A& a) { a.logits = with_dtype(a.logits, DType::f16); },
       "logits",
       {kDtype, "f32"}},
      {"logits has rank 3",
       [](A& a) {
         a.logits = with_shape(a.logits, {4, 64, 64});
       },
       "logits",
       {"must have 2 dimensions"}},
      {"logits is on the CPU",
       [](A& a) { a.logits = on_device(a.logits, Device::cpu()); },
       "logits",
       {kCuda}},
      {"row_starts is i64",
       [](A& a) { a.row_starts = with_dtype(*a.row_starts, DType::i64); },
       "row_starts",
       {kDtype, "i32"}},
      {"row_starts has 5 entries",
       [](A& a) { a.row_starts = with_shape(*a.row_starts, {5}); },
       "row_starts",
       {"size of dim 0 must be 4"}},
      {"row_starts is strided",
       [](A& a) { a.row_starts = strided(2, DType::i32, {4}, {2}); },
       "row_starts",
       {kContiguous}},
      {"row_starts is on another GPU",
       [](A& a) { a.row_starts = on_device(*a.row_starts, Device::cuda(1)); },
       "row_starts",
       {kSameDevice}},
      {"packed writes score and id to one float",
       [](A& a) { a.packed = with_stride(a.packed, 2, 0); },
       "packed",
       {"overlap"}},
      {"packed rows share their candidates",
       [](A& a) { a.packed = with_stride(a.packed, 0, 0); },
       "packed",
       {"overlap"}},
      {"topk past int32",
       [](A& a) {
         a.topk_indices = strided(1, DType::i32, {4, (std::int64_t{1} << 32) + 512}, {0, 1});
       },
       "topk_indices",
       {"must fit in 32 bits"}},
      {"packed is bf16",
       [](A& a) { a.packed = with_dtype(a.packed, DType::bf16); },
       "packed",
       {kDtype, "f32"}},
      {"packed has rank 2",
       [](A& a) {
         a.packed = with_shape(a.packed, {4, 1024});
       },
       "packed",
       {"must have 3 dimensions"}},
      {"packed pairs are triples",
       [](A& a) {
         a.packed = with_shape(a.packed, {4, 512, 3});
       },
       "packed",
       {"size of dim 2 must be 2"}},
      {"packed has 1024 columns for topk 512",
       [](A& a) {
         a.packed = with_shape(a.packed, {4, 1024, 2});
       },
       "packed",
       {"size of dim 1 must be 512"}},
      {"packed has 2 rows",
       [](A& a) {
         a.packed = with_shape(a.packed, {2, 512, 2});
       },
       "packed",
       {"size of dim 0 must be 4"}},
      {"packed is on another GPU",
       [](A& a) { a.packed = on_device(a.packed, Device::cuda(1)); },
       "packed",
       {kSameDevice}},
  };
  expect_all_refused<A>(
      kernel, dcp_args(), [&](const A& a) { (void)kernel.launch_spec(a); },
      [&](const A& a) { kernel(a); }, mutations);
  // Without row starts (decode) the same checks hold.
  DcpPackArgs decode = dcp_args();
  decode.row_starts.reset();
  ASSERT_NO_THROW((void)kernel.launch_spec(decode));
}

// The refusals of every kernel's argument tests launch nothing (expect_all_refused); the same
// path with valid arguments does launch, so that check could fail. (One real NVRTC compile: the
// smallest kernel.)
TEST_F(Dsv4Arguments, AValidCallThroughTheSamePathLaunchesOnce) {
  if (!nvrtc_available()) GTEST_SKIP() << "no NVRTC: " << nvrtc_unavailable_reason();
  auto& kernel = DcpPackKernel::instance();
  kernel(dcp_args());
  ASSERT_EQ(backend_->launches.size(), 1u);
  EXPECT_EQ(backend_->launches[0].kernel, "dsv4.dcp_pack");
  EXPECT_EQ(backend_->launches[0].geometry.grid, (Dim3{4, 1, 1}));
  EXPECT_EQ(backend_->launches[0].geometry.block, (Dim3{256, 1, 1}));
  // R = 0 rows: a valid call with nothing to do launches nothing.
  DcpPackArgs empty = dcp_args();
  empty.logits = contiguous(0, DType::f32, {0, 4096});
  empty.topk_indices = contiguous(1, DType::i32, {0, 512});
  empty.row_starts = contiguous(2, DType::i32, {0});
  empty.packed = contiguous(3, DType::f32, {0, 512, 2});
  kernel(empty);
  EXPECT_EQ(backend_->launches.size(), 1u);
}

}  // namespace
}  // namespace zerojit::dsv4
