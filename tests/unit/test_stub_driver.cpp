// The launch path through the CUDA backend on the stub driver (tests/support/stub_driver.cpp),
// which this test's environment loads in place of libcuda.so.1 and of the CuTeDSL runtime: real
// cubins loaded, their parameters read from the image, launches recorded with their argument
// bytes, in each launch form, and nothing launched where the arguments or the capture state
// forbid it.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "examples/examples.hpp"
#include "examples/scale_add/scale_add_params.h"
#include "zerojit/zerojit.hpp"

namespace zerojit {
namespace {

// Before any test loads the driver: the stub in place of libcuda.so.1 and the CuTeDSL runtime.
const bool kStubInstalled = [] {
  ::setenv("ZEROJIT_TESTING_CUDA_DRIVER", ZEROJIT_STUB_DRIVER, 1);
  ::setenv("ZEROJIT_CUTE_DSL_RUNTIME", ZEROJIT_STUB_DRIVER, 1);
  return true;
}();

// The stub's own functions, from the library the driver loader opened (dlopen of the same path
// returns the same handle).
struct Stub {
  std::size_t (*events)(char*, std::size_t) = nullptr;
  void (*clear)() = nullptr;
  void (*set_capturing)(int) = nullptr;

  static const Stub& get() {
    static const Stub stub = [] {
      Stub made;
      void* library = dlopen(ZEROJIT_STUB_DRIVER, RTLD_NOW | RTLD_LOCAL);
      if (library == nullptr) return made;
      made.events = reinterpret_cast<decltype(made.events)>(dlsym(library, "zerojit_stub_events"));
      made.clear = reinterpret_cast<decltype(made.clear)>(dlsym(library, "zerojit_stub_clear"));
      made.set_capturing = reinterpret_cast<decltype(made.set_capturing)>(
          dlsym(library, "zerojit_stub_set_capturing"));
      return made;
    }();
    return stub;
  }

  // The events so far, one JSON line each.
  std::vector<std::string> lines() const {
    std::string text(events(nullptr, 0), '\0');
    events(text.data(), text.size());
    std::vector<std::string> out;
    std::size_t start = 0;
    for (std::size_t end; (end = text.find('\n', start)) != std::string::npos; start = end + 1) {
      out.push_back(text.substr(start, end - start));
    }
    return out;
  }
  std::vector<std::string> lines_with(const std::string& event) const {
    std::vector<std::string> out;
    for (const std::string& line : lines()) {
      if (line.find("\"event\":\"" + event + "\"") != std::string::npos) out.push_back(line);
    }
    return out;
  }
};

std::string hex_of(const void* data, std::size_t size) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  for (std::size_t i = 0; i < size; ++i) {
    const auto byte = static_cast<const unsigned char*>(data)[i];
    out += digits[byte >> 4];
    out += digits[byte & 15];
  }
  return out;
}

class StubDriver : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!kStubInstalled || !cuda::driver_available() || Stub::get().events == nullptr) {
      GTEST_SKIP() << "the stub driver is not loaded (ZEROJIT_TESTING_CUDA_DRIVER unset?): "
                   << cuda::driver_unavailable_reason();
    }
    if (!nvrtc_available())
      GTEST_SKIP() << "NVRTC is not available: " << nvrtc_unavailable_reason();
    Runtime::instance().set_backend(make_cuda_backend());
    Runtime::instance().set_artifact_store(nullptr);
    for (KernelBase* kernel : Runtime::instance().kernels()) kernel->reset_for_testing();
    Monitor::instance().disarm();
    Monitor::instance().set_mode(MonitorMode::off);
    Stub::get().clear();
    Stub::get().set_capturing(0);
  }
  void TearDown() override {
    if (Stub::get().set_capturing != nullptr) Stub::get().set_capturing(0);
    Monitor::instance().disarm();
    Monitor::instance().set_mode(MonitorMode::off);
  }

  static examples::ScaleAddArgs scale_add_args(std::int64_t length) {
    examples::ScaleAddArgs args;
    const auto desc = TensorDesc::contiguous(DType::f32, {length});
    args.x = make_tensor_ref(reinterpret_cast<void*>(0x7000000), desc);
    args.y = make_tensor_ref(reinterpret_cast<void*>(0x7100000), desc);
    args.alpha = 2.5;
    return args;
  }
};

TEST_F(StubDriver, AWarmedKernelLaunchesWithTheBytesItsCubinDeclares) {
  auto& kernel = examples::ScaleAddKernel::instance();
  const examples::ScaleAddArgs args = scale_add_args(1024);
  const auto key = kernel.dispatch(descriptors_of(args));
  const int devices[] = {0};
  kernel.warm(key, Runtime::instance().target_arch(0), devices);
  ASSERT_EQ(Stub::get().lines_with("module_load").size(), 1u);

  kernel(args);
  const auto launches = Stub::get().lines_with("launch");
  ASSERT_EQ(launches.size(), 1u);
  // The argument block as the kernel's one parameter, byte for byte, as the cubin declares it.
  const zj::examples::ScaleAddParams params{args.x.data, args.y.data, 1024, 2.5};
  EXPECT_NE(launches[0].find("\"params\":[\"" + hex_of(&params, sizeof params) + "\"]"),
            std::string::npos)
      << launches[0];
  EXPECT_NE(launches[0].find("\"grid\":[1,1,1],\"block\":[256,1,1]"), std::string::npos)
      << launches[0];
  EXPECT_EQ(kernel.counters().hits, 1u);
}

TEST_F(StubDriver, AMissDuringCaptureCompilesAndLaunchesNothing) {
  auto& kernel = examples::ScaleAddKernel::instance();
  Stub::get().set_capturing(1);
  EXPECT_THROW(kernel(scale_add_args(1000)), RuntimeJitError);
  EXPECT_TRUE(Stub::get().lines_with("module_load").empty());
  EXPECT_TRUE(Stub::get().lines_with("launch").empty());
  EXPECT_EQ(kernel.counters().compiles, 0u);
}

TEST_F(StubDriver, ArgumentsThatDisagreeWithTheCubinAreNeverLaunched) {
  auto& kernel = examples::ScaleAddKernel::instance();
  const examples::ScaleAddArgs args = scale_add_args(1024);
  const auto key = kernel.dispatch(descriptors_of(args));
  const int devices[] = {0};
  kernel.warm(key, Runtime::instance().target_arch(0), devices);
  LaunchSpec<examples::ScaleAddKey> spec = kernel.launch_spec(args);
  spec.args = KernelArgs{};
  spec.args.push(std::int32_t{1});  // 4 bytes where the cubin takes a 32-byte block
  EXPECT_THROW(kernel.launch(spec, {0, nullptr}), LaunchError);
  EXPECT_TRUE(Stub::get().lines_with("launch").empty());
}

}  // namespace
}  // namespace zerojit
