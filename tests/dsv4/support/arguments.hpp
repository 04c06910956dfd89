// What the DSv4 argument-check tests share (tests/dsv4/<kernel>/test_arguments.cpp): bad inputs
// to every kernel owner, for each argument class (dtype, rank, shape, contiguity, base
// alignment, strides, device, scalars, a missing fp8_scale), must make the owner throw
// InvalidArgument naming the kernel and the argument, with a message that says what is wrong,
// and launch nothing. No GPU: the tensors carry fake device addresses, which plan() only
// validates and packs, and a recording backend stands in for the driver.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "dsv4/family.hpp"
#include "support/recording_backend.hpp"
#include "zerojit/zerojit.hpp"

namespace zerojit::dsv4::testing {

using zerojit::testing::RecordingBackend;

// A fake device address per tensor: 256-byte aligned, never dereferenced. `misalign` moves it
// off that alignment by a number of bytes.
inline void* fake_address(int tensor, std::uintptr_t misalign = 0) {
  const std::uintptr_t base =
      0x7f0000000000ull + static_cast<std::uintptr_t>(tensor) * 0x10000000ull;
  return reinterpret_cast<void*>(base + misalign);
}

inline TensorRef contiguous(int tensor, DType dtype, std::initializer_list<std::int64_t> shape) {
  return make_tensor_ref(fake_address(tensor), TensorDesc::contiguous(dtype, shape));
}

inline TensorRef strided(int tensor, DType dtype, std::vector<std::int64_t> shape,
                         std::vector<std::int64_t> strides) {
  return make_tensor_ref(fake_address(tensor), TensorDesc::strided(dtype, shape, strides));
}

// The same tensor with another descriptor field changed.
inline TensorRef with_dtype(TensorRef ref, DType dtype) {
  ref.desc.dtype = dtype;
  return ref;
}
inline TensorRef with_shape(TensorRef ref, std::vector<std::int64_t> shape) {
  // Row-major strides for the new shape keep the other properties (contiguity) as they were.
  std::vector<std::int64_t> strides(shape.size(), 1);
  for (int d = static_cast<int>(shape.size()) - 2; d >= 0; --d) {
    strides[static_cast<std::size_t>(d)] =
        strides[static_cast<std::size_t>(d) + 1] * shape[static_cast<std::size_t>(d) + 1];
  }
  return make_tensor_ref(ref.data,
                         TensorDesc::strided(ref.desc.dtype, shape, strides, ref.desc.device));
}
inline TensorRef with_stride(TensorRef ref, int dim, std::int64_t stride) {
  ref.desc.strides[static_cast<std::size_t>(dim)] = stride;
  return ref;
}
inline TensorRef misaligned(TensorRef ref, std::uintptr_t bytes) {
  return make_tensor_ref(static_cast<char*>(ref.data) + bytes, ref.desc);
}
inline TensorRef on_device(TensorRef ref, Device device) {
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

inline const std::string kDtype = "dtype must be";
inline const std::string kRank = "dimensions";
inline const std::string kContiguous = "must be contiguous";
inline const std::string kInnermost = "last dimension must have stride 1";
inline const std::string kCuda = "must be on a CUDA device";
inline const std::string kSameDevice = "must be on cuda:0";

// The token count T of every baseline call.
inline constexpr std::int64_t kTokens = 16;

// The k_cache mutations every cache layout refuses alike (the C4 and C128 stores, ds_mla and
// full rows): a base aligned to 8 bytes only, a cache on another GPU.
template <class A>
std::vector<Mutation<A>> k_cache_placement_mutations() {
  return {
      {"k_cache base is 8-byte aligned",
       [](A& a) { a.k_cache = misaligned(a.k_cache, 8); },
       "k_cache",
       {"16-byte aligned"}},
      {"k_cache is on another GPU",
       [](A& a) { a.k_cache = on_device(a.k_cache, Device::cuda(1)); },
       "k_cache",
       {kSameDevice}},
  };
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
      {"k_cache rows overlap",
       [=](A& a) {
         a.k_cache = strided(k_cache_tensor, a.k_cache.desc.dtype, {16, 64, 512}, {32768, 16, 1});
       },
       "k_cache",
       {"overlap"}},
      {"k_cache pages are one page (stride 0)",
       [](A& a) { a.k_cache = with_stride(a.k_cache, 0, 0); },
       "k_cache",
       {"overlap"}},
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

}  // namespace zerojit::dsv4::testing
