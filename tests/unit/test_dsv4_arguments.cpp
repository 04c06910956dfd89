// Bad inputs to every DSv4 kernel owner: for each argument class (dtype, rank, shape,
// contiguity, base alignment, strides, device, scalars, a missing fp8_scale) the owner throws
// InvalidArgument naming the kernel and the argument, with a message that says what is wrong,
// and launches nothing. No GPU: the tensors carry fake device addresses, which plan() only
// validates and packs, and a recording backend stands in for the driver.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dsv4/family.hpp"
#include "support/recording_backend.hpp"
#include "zerojit/zerojit.hpp"

namespace zerojit::dsv4 {
namespace {

using zerojit::testing::RecordingBackend;

// A fake device address per tensor: 256-byte aligned, never dereferenced. `misalign` moves it
// off that alignment by a number of bytes.
void* fake_address(int tensor, std::uintptr_t misalign = 0) {
  const std::uintptr_t base =
      0x7f0000000000ull + static_cast<std::uintptr_t>(tensor) * 0x10000000ull;
  return reinterpret_cast<void*>(base + misalign);
}

TensorRef contiguous(int tensor, DType dtype, std::initializer_list<std::int64_t> shape) {
  return make_tensor_ref(fake_address(tensor), TensorDesc::contiguous(dtype, shape));
}

TensorRef strided(int tensor, DType dtype, std::vector<std::int64_t> shape,
                  std::vector<std::int64_t> strides) {
  return make_tensor_ref(fake_address(tensor), TensorDesc::strided(dtype, shape, strides));
}

// The same tensor with another descriptor field changed.
TensorRef with_dtype(TensorRef ref, DType dtype) {
  ref.desc.dtype = dtype;
  return ref;
}
TensorRef with_shape(TensorRef ref, std::vector<std::int64_t> shape) {
  // Row-major strides for the new shape keep the other properties (contiguity) as they were.
  std::vector<std::int64_t> strides(shape.size(), 1);
  for (int d = static_cast<int>(shape.size()) - 2; d >= 0; --d) {
    strides[static_cast<std::size_t>(d)] =
        strides[static_cast<std::size_t>(d) + 1] * shape[static_cast<std::size_t>(d) + 1];
  }
  return make_tensor_ref(ref.data,
                         TensorDesc::strided(ref.desc.dtype, shape, strides, ref.desc.device));
}
TensorRef with_stride(TensorRef ref, int dim, std::int64_t stride) {
  ref.desc.strides[static_cast<std::size_t>(dim)] = stride;
  return ref;
}
TensorRef misaligned(TensorRef ref, std::uintptr_t bytes) {
  return make_tensor_ref(static_cast<char*>(ref.data) + bytes, ref.desc);
}
TensorRef on_device(TensorRef ref, Device device) {
  ref.desc.device = device;
  return ref;
}

// One bad variation of a valid call: what it changes, the argument the error must name and
// the words its message must contain.
template <class Call>
struct Mutation {
  std::string label;
  std::function<void(Call&)> apply;
  std::string argument;
  std::vector<std::string> message_parts;
};

class Dsv4Arguments : public ::testing::Test {
 protected:
  void SetUp() override {
    previous_store_ = Runtime::instance().artifact_store();
    backend_ = std::make_shared<RecordingBackend>();
    Runtime::instance().set_backend(backend_);
    Runtime::instance().set_artifact_store(nullptr);
    for (KernelBase* kernel : all_kernels()) kernel->reset_for_testing();
    Monitor::instance().disarm();
    Monitor::instance().set_mode(MonitorMode::off);
  }

  void TearDown() override {
    for (KernelBase* kernel : all_kernels()) kernel->reset_for_testing();
    Runtime::instance().set_backend(make_cuda_backend());
    Runtime::instance().set_artifact_store(previous_store_);
  }

  // `invoke` must throw InvalidArgument from `kernel` naming `argument`, with every part in its
  // message.
  static void expect_invalid(const std::string& label, const std::function<void()>& invoke,
                             const std::string& kernel, const std::string& argument,
                             const std::vector<std::string>& message_parts) {
    try {
      invoke();
      ADD_FAILURE() << label << ": accepted; expected InvalidArgument naming '" << argument << "'";
    } catch (const InvalidArgument& error) {
      const std::string message = error.what();
      EXPECT_EQ(error.kernel(), kernel) << label << ": " << message;
      EXPECT_EQ(error.argument(), argument) << label << ": " << message;
      EXPECT_NE(message.find("argument '" + argument + "'"), std::string::npos)
          << label << ": the message does not name the argument: " << message;
      for (const std::string& part : message_parts) {
        EXPECT_NE(message.find(part), std::string::npos)
            << label << ": the message does not say '" << part << "': " << message;
      }
    } catch (const std::exception& error) {
      ADD_FAILURE() << label << ": threw another exception than InvalidArgument: " << error.what();
    }
  }

  // Each mutation of `valid` is refused by plan() and by the owner's call, and the call
  // launches (and loads, and compiles) nothing. `valid` itself must plan.
  template <class Call>
  void expect_all_refused(KernelBase& kernel, const Call& valid,
                          const std::function<void(const Call&)>& plan,
                          const std::function<void(const Call&)>& call,
                          const std::vector<Mutation<Call>>& mutations) {
    ASSERT_NO_THROW(plan(valid)) << kernel.name() << ": the valid baseline call must plan";
    for (const Mutation<Call>& mutation : mutations) {
      Call bad = valid;
      mutation.apply(bad);
      const std::string label = kernel.name() + ", " + mutation.label;
      expect_invalid(
          label + " (plan)", [&] { plan(bad); }, kernel.name(), mutation.argument,
          mutation.message_parts);
      const std::size_t launches = backend_->launches.size();
      const std::size_t loads = backend_->loads.size();
      expect_invalid(
          label + " (call)", [&] { call(bad); }, kernel.name(), mutation.argument,
          mutation.message_parts);
      EXPECT_EQ(backend_->launches.size(), launches) << label << ": a refused call launched";
      EXPECT_EQ(backend_->loads.size(), loads) << label << ": a refused call loaded a module";
      EXPECT_EQ(kernel.counters().compiles, 0u) << label << ": a refused call compiled";
    }
  }

  std::shared_ptr<RecordingBackend> backend_;

 private:
  std::shared_ptr<ArtifactStore> previous_store_;
};

const std::string kDtype = "dtype must be";
const std::string kRank = "dimensions";
const std::string kContiguous = "must be contiguous";
const std::string kInnermost = "last dimension must have stride 1";
const std::string kCuda = "must be on a CUDA device";
const std::string kSameDevice = "must be on cuda:0";

// --- Indexer-Q ---------------------------------------------------------------------------------

constexpr std::int64_t kTokens = 16;

IndexerQInputs indexer_inputs(std::int64_t tokens = kTokens, std::int64_t heads = 64,
                              std::int64_t head_dim = 128, std::int64_t rope_dim = 64) {
  IndexerQInputs in;
  in.positions = contiguous(0, DType::i64, {tokens});
  in.q = contiguous(1, DType::bf16, {tokens, heads, head_dim});
  in.cos_sin_cache = contiguous(2, DType::f32, {4096, rope_dim});
  in.weights = contiguous(3, DType::bf16, {tokens, heads});
  in.scale = 0.011f;
  return in;
}

struct IndexerFp8Call {
  IndexerQInputs in = indexer_inputs();
  IndexerQFp8Outputs out{contiguous(4, DType::u8, {kTokens, 64, 128}),
                         contiguous(5, DType::f32, {kTokens, 64})};
};

struct IndexerMxFp4Call {
  IndexerQInputs in = indexer_inputs();
  IndexerQMxFp4Outputs out{contiguous(4, DType::u8, {kTokens, 64, 64}),
                           contiguous(6, DType::u8, {kTokens, 64, 4}),
                           contiguous(5, DType::f32, {kTokens, 64})};
};

// Input mutations shared by both variants (they validate their inputs in one place).
template <class Call>
std::vector<Mutation<Call>> indexer_input_mutations() {
  return {
      {"q is f32", [](Call& c) { c.in.q = with_dtype(c.in.q, DType::f32); }, "q", {kDtype, "bf16"}},
      {"q has rank 2",
       [](Call& c) {
         c.in.q = with_shape(c.in.q, {kTokens, 64 * 128});
       },
       "q",
       {"must have 3 dimensions"}},
      {"q has padded rows",
       [](Call& c) {
         c.in.q = strided(1, DType::bf16, {kTokens, 64, 128}, {64 * 136, 136, 1});
       },
       "q",
       {kContiguous}},
      {"q base is 2-byte aligned",
       [](Call& c) { c.in.q = misaligned(c.in.q, 2); },
       "q",
       {"16-byte aligned"}},
      {"q is on the CPU", [](Call& c) { c.in.q = on_device(c.in.q, Device::cpu()); }, "q", {kCuda}},
      {"positions is i32",
       [](Call& c) { c.in.positions = with_dtype(c.in.positions, DType::i32); },
       "positions",
       {kDtype, "i64"}},
      {"positions has T + 1 entries",
       [](Call& c) { c.in.positions = with_shape(c.in.positions, {kTokens + 1}); },
       "positions",
       {"size of dim 0 must be 16"}},
      {"positions is strided",
       [](Call& c) { c.in.positions = strided(0, DType::i64, {kTokens}, {2}); },
       "positions",
       {kContiguous}},
      {"positions is on another GPU",
       [](Call& c) { c.in.positions = on_device(c.in.positions, Device::cuda(1)); },
       "positions",
       {kSameDevice, "cuda:1"}},
      {"cos_sin_cache is f16",
       [](Call& c) { c.in.cos_sin_cache = with_dtype(c.in.cos_sin_cache, DType::f16); },
       "cos_sin_cache",
       {kDtype, "f32 or bf16"}},
      {"cos_sin_cache has rank 3",
       [](Call& c) {
         c.in.cos_sin_cache = with_shape(c.in.cos_sin_cache, {64, 64, 64});
       },
       "cos_sin_cache",
       {"must have 2 dimensions"}},
      {"cos_sin_cache columns are strided",
       [](Call& c) {
         c.in.cos_sin_cache = strided(2, DType::f32, {4096, 64}, {128, 2});
       },
       "cos_sin_cache",
       {kInnermost}},
      {"cos_sin_cache row stride is 66 floats (264 bytes)",
       [](Call& c) { c.in.cos_sin_cache = with_stride(c.in.cos_sin_cache, 0, 66); },
       "cos_sin_cache",
       {"stride of dim 0 must be a multiple of 16 bytes"}},
      {"cos_sin_cache base is 4-byte aligned",
       [](Call& c) { c.in.cos_sin_cache = misaligned(c.in.cos_sin_cache, 4); },
       "cos_sin_cache",
       {"16-byte aligned"}},
      {"cos_sin_cache is on another GPU",
       [](Call& c) { c.in.cos_sin_cache = on_device(c.in.cos_sin_cache, Device::cuda(1)); },
       "cos_sin_cache",
       {kSameDevice}},
      {"weights is f32",
       [](Call& c) { c.in.weights = with_dtype(c.in.weights, DType::f32); },
       "weights",
       {kDtype, "bf16"}},
      {"weights has 32 heads",
       [](Call& c) {
         c.in.weights = with_shape(c.in.weights, {kTokens, 32});
       },
       "weights",
       {"size of dim 1 must be 64"}},
      {"weights has T - 1 rows",
       [](Call& c) {
         c.in.weights = with_shape(c.in.weights, {kTokens - 1, 64});
       },
       "weights",
       {"size of dim 0 must be 16"}},
      {"weights is transposed",
       [](Call& c) {
         c.in.weights = strided(3, DType::bf16, {kTokens, 64}, {1, kTokens});
       },
       "weights",
       {kContiguous}},
      // Shapes no kernel can be built for are refused by the key check.
      {"head_dim 100",
       [](Call& c) { c.in = indexer_inputs(kTokens, 64, 100, 64); },
       "key",
       {"head_dim 100"}},
      {"head_dim 1024 (64 lanes a row; a subwarp has at most 32)",
       [](Call& c) { c.in = indexer_inputs(kTokens, 64, 1024, 64); },
       "key",
       {"head_dim 1024"}},
  };
}

TEST_F(Dsv4Arguments, IndexerQFp8) {
  auto& kernel = IndexerQFp8Kernel::instance();
  auto mutations = indexer_input_mutations<IndexerFp8Call>();
  const std::vector<Mutation<IndexerFp8Call>> outputs = {
      {"q_fp8 is f32",
       [](auto& c) { c.out.q_fp8 = with_dtype(c.out.q_fp8, DType::f32); },
       "q_fp8",
       {kDtype, "u8 or e4m3"}},
      {"q_fp8 has rank 2",
       [](auto& c) {
         c.out.q_fp8 = with_shape(c.out.q_fp8, {kTokens, 64 * 128});
       },
       "q_fp8",
       {"must have 3 dimensions"}},
      {"q_fp8 has head_dim 64",
       [](auto& c) {
         c.out.q_fp8 = with_shape(c.out.q_fp8, {kTokens, 64, 64});
       },
       "q_fp8",
       {"size of dim 2 must be 128"}},
      {"q_fp8 has padded rows",
       [](auto& c) {
         c.out.q_fp8 = strided(4, DType::u8, {kTokens, 64, 128}, {64 * 144, 144, 1});
       },
       "q_fp8",
       {kContiguous}},
      {"q_fp8 base is 8-byte aligned",
       [](auto& c) { c.out.q_fp8 = misaligned(c.out.q_fp8, 8); },
       "q_fp8",
       {"16-byte aligned"}},
      {"q_fp8 is on another GPU",
       [](auto& c) { c.out.q_fp8 = on_device(c.out.q_fp8, Device::cuda(1)); },
       "q_fp8",
       {kSameDevice}},
      {"weights_out is bf16",
       [](auto& c) { c.out.weights_out = with_dtype(c.out.weights_out, DType::bf16); },
       "weights_out",
       {kDtype, "f32"}},
      {"weights_out has 63 heads",
       [](auto& c) {
         c.out.weights_out = with_shape(c.out.weights_out, {kTokens, 63});
       },
       "weights_out",
       {"size of dim 1 must be 64"}},
      {"weights_out is on the CPU",
       [](auto& c) { c.out.weights_out = on_device(c.out.weights_out, Device::cpu()); },
       "weights_out",
       {kCuda}},
  };
  mutations.insert(mutations.end(), outputs.begin(), outputs.end());
  expect_all_refused<IndexerFp8Call>(
      kernel, IndexerFp8Call{}, [&](const auto& c) { (void)kernel.plan(c.in, c.out); },
      [&](const auto& c) { kernel(c.in, c.out); }, mutations);
}

TEST_F(Dsv4Arguments, IndexerQMxFp4) {
  auto& kernel = IndexerQMxFp4Kernel::instance();
  auto mutations = indexer_input_mutations<IndexerMxFp4Call>();
  const std::vector<Mutation<IndexerMxFp4Call>> outputs = {
      {"q_packed is bf16",
       [](auto& c) { c.out.q_packed = with_dtype(c.out.q_packed, DType::bf16); },
       "q_packed",
       {kDtype, "u8 or e2m1x2"}},
      {"q_packed holds D elements, not D / 2 bytes",
       [](auto& c) {
         c.out.q_packed = with_shape(c.out.q_packed, {kTokens, 64, 128});
       },
       "q_packed",
       {"size of dim 2 must be 64"}},
      {"q_packed base is 4-byte aligned",
       [](auto& c) { c.out.q_packed = misaligned(c.out.q_packed, 4); },
       "q_packed",
       {"8-byte aligned"}},
      {"q_packed has padded rows",
       [](auto& c) {
         c.out.q_packed = strided(4, DType::u8, {kTokens, 64, 64}, {64 * 80, 80, 1});
       },
       "q_packed",
       {kContiguous}},
      {"q_scale is i32 (the caller's view, not the kernel's bytes)",
       [](auto& c) { c.out.q_scale = with_dtype(c.out.q_scale, DType::i32); },
       "q_scale",
       {kDtype, "u8 or ue8m0"}},
      {"q_scale has 8 blocks per row",
       [](auto& c) {
         c.out.q_scale = with_shape(c.out.q_scale, {kTokens, 64, 8});
       },
       "q_scale",
       {"size of dim 2 must be 4"}},
      {"q_scale has rank 2",
       [](auto& c) {
         c.out.q_scale = with_shape(c.out.q_scale, {kTokens, 64 * 4});
       },
       "q_scale",
       {"must have 3 dimensions"}},
      {"q_scale is on another GPU",
       [](auto& c) { c.out.q_scale = on_device(c.out.q_scale, Device::cuda(1)); },
       "q_scale",
       {kSameDevice}},
      {"weights_out has T + 1 rows",
       [](auto& c) {
         c.out.weights_out = with_shape(c.out.weights_out, {kTokens + 1, 64});
       },
       "weights_out",
       {"size of dim 0 must be 16"}},
      // MXFP4 blocks are 32 elements: a rope part of 48 splits one.
      {"rope_dim 48",
       [](auto& c) { c.in = indexer_inputs(kTokens, 64, 128, 48); },
       "key",
       {"multiples of 32"}},
  };
  mutations.insert(mutations.end(), outputs.begin(), outputs.end());
  expect_all_refused<IndexerMxFp4Call>(
      kernel, IndexerMxFp4Call{}, [&](const auto& c) { (void)kernel.plan(c.in, c.out); },
      [&](const auto& c) { kernel(c.in, c.out); }, mutations);
}

// --- Dequantize + gather ---------------------------------------------------------------------

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
      kernel, gather_args(), [&](const A& a) { (void)kernel.plan(a); },
      [&](const A& a) { kernel(a); }, mutations);
}

// --- C4 compressor -------------------------------------------------------------------------------

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
  return {
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
       "token_to_req",
       {kDtype, "i32"}},
      {"token_to_req has rank 2",
       [](A& a) {
         a.token_to_req = with_shape(a.token_to_req, {kTokens, 1});
       },
       "token_to_req",
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
      {"eps is 0", [](A& a) { a.eps = 0.0f; }, "eps", {"must be positive"}},
      {"eps is negative", [](A& a) { a.eps = -1e-6f; }, "eps", {"must be positive"}},
      {"eps is NaN", [](A& a) { a.eps = std::nanf(""); }, "eps", {"must be positive"}},
  };
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
      {"k_cache has block size 0",
       [](A& a) {
         a.k_cache = strided(7, DType::u8, {16, 0, 584}, {37440, 584, 1});
       },
       "k_cache.shape[1] (block size)",
       {"must be positive"}},
      {"k_cache base is 8-byte aligned",
       [](A& a) { a.k_cache = misaligned(a.k_cache, 8); },
       "k_cache",
       {"16-byte aligned"}},
      {"k_cache is on another GPU",
       [](A& a) { a.k_cache = on_device(a.k_cache, Device::cuda(1)); },
       "k_cache",
       {kSameDevice}},
  };
  mutations.insert(mutations.end(), cache.begin(), cache.end());
  expect_all_refused<A>(
      kernel, c4_args(), [&](const A& a) { (void)kernel.plan(a); }, [&](const A& a) { kernel(a); },
      mutations);
}

// Mutations of the full-row caches (bf16 or per-tensor e4m3), shared by C4 and C128.
template <class A>
std::vector<Mutation<A>> full_cache_mutations(int k_cache_tensor, int scale_tensor) {
  return {
      {"k_cache is u8 (an fp8_ds_mla cache)",
       [=](A& a) {
         a.k_cache = strided(k_cache_tensor, DType::u8, {16, 64, 584}, {37440, 584, 1});
       },
       "k_cache",
       {kDtype, "bf16 or e4m3"}},
      {"k_cache rows are 584 wide",
       [](A& a) {
         a.k_cache = with_shape(a.k_cache, {16, 64, 584});
       },
       "k_cache",
       {"size of dim 2 must be 512"}},
      {"k_cache has rank 2",
       [](A& a) {
         a.k_cache = with_shape(a.k_cache, {1024, 512});
       },
       "k_cache",
       {"must have 3 dimensions"}},
      {"k_cache row stride is 516 elements",
       [=](A& a) {
         a.k_cache =
             strided(k_cache_tensor, a.k_cache.desc.dtype, {16, 64, 512}, {64 * 516, 516, 1});
       },
       "k_cache",
       {"stride of dim 1 must be a multiple of 16 bytes"}},
      {"k_cache columns are strided",
       [](A& a) { a.k_cache = with_stride(a.k_cache, 2, 2); },
       "k_cache",
       {kInnermost}},
      {"k_cache base is 8-byte aligned",
       [](A& a) { a.k_cache = misaligned(a.k_cache, 8); },
       "k_cache",
       {"16-byte aligned"}},
      {"k_cache is on another GPU",
       [](A& a) { a.k_cache = on_device(a.k_cache, Device::cuda(1)); },
       "k_cache",
       {kSameDevice}},
      {"an e4m3 cache without fp8_scale",
       [=](A& a) {
         a.k_cache = contiguous(k_cache_tensor, DType::e4m3, {16, 64, 512});
         a.fp8_scale.reset();
       },
       "fp8_scale",
       {"is required for an e4m3 cache"}},
      {"fp8_scale is bf16",
       [=](A& a) {
         a.k_cache = contiguous(k_cache_tensor, DType::e4m3, {16, 64, 512});
         a.fp8_scale = contiguous(scale_tensor, DType::bf16, {1});
       },
       "fp8_scale",
       {kDtype, "f32"}},
      {"fp8_scale has 2 entries",
       [=](A& a) {
         a.k_cache = contiguous(k_cache_tensor, DType::e4m3, {16, 64, 512});
         a.fp8_scale = contiguous(scale_tensor, DType::f32, {2});
       },
       "fp8_scale",
       {"size of dim 0 must be 1"}},
      {"fp8_scale is on another GPU",
       [=](A& a) {
         a.k_cache = contiguous(k_cache_tensor, DType::e4m3, {16, 64, 512});
         a.fp8_scale = on_device(contiguous(scale_tensor, DType::f32, {1}), Device::cuda(1));
       },
       "fp8_scale",
       {kSameDevice}},
  };
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
        kernel, c4_full_args(fp8), [&](const A& a) { (void)kernel.plan(a); },
        [&](const A& a) { kernel(a); }, mutations);
  }
}

// --- C128 compressor -------------------------------------------------------------------------

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
       "token_to_req",
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
      kernel, c128_compress_args(), [&](const A& a) { (void)kernel.plan(a); },
      [&](const A& a) { kernel(a); }, mutations);
}

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
  return {
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
      {"eps is 0", [](A& a) { a.eps = 0.0f; }, "eps", {"must be positive"}},
      {"eps is -inf", [](A& a) { a.eps = -INFINITY; }, "eps", {"must be positive"}},
  };
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
      {"k_cache base is 8-byte aligned",
       [](A& a) { a.k_cache = misaligned(a.k_cache, 8); },
       "k_cache",
       {"16-byte aligned"}},
      {"k_cache is on another GPU",
       [](A& a) { a.k_cache = on_device(a.k_cache, Device::cuda(1)); },
       "k_cache",
       {kSameDevice}},
  };
  mutations.insert(mutations.end(), cache.begin(), cache.end());
  expect_all_refused<A>(
      kernel, c128_store_args(), [&](const A& a) { (void)kernel.plan(a); },
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
        kernel, c128_full_args(fp8), [&](const A& a) { (void)kernel.plan(a); },
        [&](const A& a) { kernel(a); }, mutations);
  }
}

// --- DCP pack ------------------------------------------------------------------------------------

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
      kernel, dcp_args(), [&](const A& a) { (void)kernel.plan(a); }, [&](const A& a) { kernel(a); },
      mutations);
  // Without row starts (decode) the same checks hold.
  DcpPackArgs decode = dcp_args();
  decode.row_starts.reset();
  ASSERT_NO_THROW((void)kernel.plan(decode));
}

// The refusals above launch nothing; the same path with valid arguments does launch, so that
// check could fail. (One real NVRTC compile: the smallest kernel.)
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
