// What the DSv4 GPU tests share (label gpu; tests/dsv4/<kernel>/test_gpu*.cpp and
// tests/dsv4/test_serving_gpu.cpp): each kernel runs against its CPU reference on fresh random
// inputs, and
//  * outputs are poisoned with 0xA5 first, and every byte a kernel must not write (guards,
//    padding, other rows, inactive tokens, other pages, bytes past B * 584 of a page) must still
//    hold it afterwards;
//  * every failure names the kernel, the case, the output, the element, the expected and the
//    actual value (a check returns its failures as text; EXPECT_NO_FAILURE reports them).
//
// Without a GPU every test skips, saying why. ZEROJIT_DSV4_GPU_DRY_RUN=1 runs the suite without
// one instead: tensors stay in host memory, the kernels still compile with NVRTC, and a backend
// that runs the CPU references stands in for the driver. The comparisons then hold trivially;
// a dry run checks the suite itself (valid inputs, expectations computed, nothing crashes).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "dsv4/family.hpp"
#include "dsv4/support/call_inputs.hpp"
#include "dsv4/support/launch_order.hpp"
#include "support/gpu.hpp"
#include "zerojit/zerojit.hpp"

namespace zerojit::dsv4::testing {

// Whether ZEROJIT_DSV4_GPU_DRY_RUN=1 asks for a run without a GPU.
bool dry_run();

// Where a case's tensors live: device memory, or (dry run) aligned host memory.
class Placement {
 public:
  // A copy of the tensor's whole allocation (guards and padding included) on the device under
  // test; returns the ref of its element 0.
  TensorRef put(const HostTensor& tensor);
  // put(tensor) for an input the kernel before writes in a serving step (the PDL tests): with
  // a producer (`order` other than alone) the copy holds poison until `producer` runs.
  TensorRef put_produced(const HostTensor& tensor, Producer& producer, LaunchOrder order);
  // The allocation put(tensor) made, read back whole (after the device finished).
  std::vector<std::uint8_t> get(const HostTensor& tensor) const;

 private:
  struct Allocation {
    const HostTensor* source = nullptr;
    std::unique_ptr<zerojit::testing::DeviceBuffer> device;
    std::vector<std::uint8_t> host;
    std::size_t host_offset = 0;
  };
  std::vector<Allocation> allocations_;
};

// Waits for the device; an asynchronous kernel fault surfaces here as a CudaError.
void finish();

// The dry run's backend: "launching" runs the CPU reference on the packed argument block.
class ReferenceBackend final : public Backend {
 public:
  std::string_view name() const override { return "cpu-reference (dry run)"; }
  int device_count() override { return 1; }
  std::string target_arch(int) override { return "sm_90a"; }
  LoadedFunction load(const CompiledArtifact& artifact, std::string_view, int device) override;
  bool is_capturing(cuda::Stream) override { return false; }
  void launch(const LoadedFunction& function, const LaunchGeometry&, const KernelArgs& args,
              cuda::Stream) override;

  bool execute = true;  // false: record nothing, run nothing (the battery only counts compiles)

 private:
  struct Loaded {
    std::string kernel;
    std::string key;
  };
  std::vector<Loaded> loaded_;
};

class Dsv4Gpu : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  std::shared_ptr<ReferenceBackend> reference_backend_;  // dry run only

 private:
  std::shared_ptr<ArtifactStore> previous_store_;
};

// A check returns its failures as text (empty: passed); each names kernel, case, output,
// element, expected and actual.
#define EXPECT_NO_FAILURE(expression)                           \
  do {                                                          \
    const std::string failure_text_ = (expression);             \
    if (!failure_text_.empty()) ADD_FAILURE() << failure_text_; \
  } while (0)

// Compiles the keys a test is about to use, all at once (one NVRTC job per core), so that a
// test with many keys does not compile them one launch at a time. Compile errors fail the test
// naming kernel and key.
template <class Kernel>
void precompile(Kernel& kernel, std::vector<typename Kernel::Key> keys) {
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  const std::string arch = Runtime::instance().target_arch(0);
  for (const auto& outcome : kernel.compile_many(keys, arch, 0)) {
    EXPECT_TRUE(outcome.error.empty())
        << kernel.name() << " [" << describe(outcome.key) << "] does not compile for " << arch
        << ": " << outcome.error;
  }
}

// "kernel case 'name'": the prefix of every failure.
std::string case_label(std::string_view kernel, std::string_view name);

void append_failure(std::string& failures, const std::string& label, std::string_view output,
                    const std::string& failure);

// Whole allocations compared byte for byte, reporting elements with their values.
std::string compare_tensor(const HostTensor& expected, const std::vector<std::uint8_t>& actual,
                           std::vector<std::string> names);

std::span<const float> float_view(const std::vector<std::uint8_t>& bytes, std::int64_t offset,
                                  std::int64_t count);

// A compressor store's cache against the reference's (compressor/reference.hpp): the rows
// `written` within the reference's tolerances, every other byte identical.
std::string compare_k_cache(CacheKind kind, const KCache& expected,
                            const std::vector<std::uint8_t>& actual,
                            const std::vector<long long>& written);

}  // namespace zerojit::dsv4::testing

// The names every GPU test file brings in with `using namespace zerojit::dsv4::gpu_test;`: the
// harness, the inputs (as `in`), the CPU references (as `ref`; each test includes its kernel's
// reference.hpp) and the kernels' parameter structs (as `params`).
namespace zerojit::dsv4::reference {}

namespace zerojit::dsv4::gpu_test {

using namespace zerojit::dsv4::testing;
namespace in = zerojit::dsv4::testing;
namespace ref = zerojit::dsv4::reference;
namespace params = zj::dsv4;

}  // namespace zerojit::dsv4::gpu_test
