// The core on a real GPU: the example kernels launched through the contract, the executor
// cache's hit path, the monitor in error mode, the argument check, and graph capture.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "examples/examples.hpp"
#include "support/gpu.hpp"
#include "zerojit/zerojit.hpp"

namespace zerojit {
namespace {

using testing::DeviceBuffer;

class CoreGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    Monitor::instance().disarm();
    Monitor::instance().set_mode(MonitorMode::off);
    for (KernelBase* kernel : Runtime::instance().kernels()) kernel->reset_for_testing();
  }
  void TearDown() override {
    Monitor::instance().disarm();
    Monitor::instance().set_mode(MonitorMode::off);
  }
};

// y = 1.5 x + y on `device` (whose context the caller made current), checked element by
// element, with every element outside the vector unchanged.
template <class T>
void check_scale_add(std::int64_t length, std::uintptr_t misalign_elements, int device = 0) {
  std::mt19937_64 rng(static_cast<std::uint64_t>(length) * 7919 + misalign_elements);
  std::uniform_real_distribution<T> dist(-4, 4);
  const std::size_t total = static_cast<std::size_t>(length) + misalign_elements + 8;
  std::vector<T> x(total), y(total);
  for (auto& v : x) v = dist(rng);
  for (auto& v : y) v = dist(rng);
  DeviceBuffer dx(x), dy(y);
  const DType dtype = sizeof(T) == 4 ? DType::f32 : DType::f64;
  auto desc = TensorDesc::contiguous(dtype, {length});
  desc.device = Device::cuda(device);
  examples::ScaleAddArgs args;
  args.x = make_tensor_ref(static_cast<T*>(dx.get()) + misalign_elements, desc);
  args.y = make_tensor_ref(static_cast<T*>(dy.get()) + misalign_elements, desc);
  args.alpha = 1.5;
  examples::ScaleAddKernel::instance()(args);
  const std::vector<T> out = dy.template download<T>();
  for (std::size_t i = 0; i < total; ++i) {
    const bool inside =
        i >= misalign_elements && i < misalign_elements + static_cast<std::size_t>(length);
    if (!inside) {
      ASSERT_EQ(out[i], y[i]) << "device " << device << ": element " << i
                              << " outside the vector changed";
      continue;
    }
    const T expected = static_cast<T>(1.5) * x[i] + y[i];
    ASSERT_NEAR(out[i], expected, std::abs(expected) * 1e-6 + 1e-6)
        << "device " << device << ": element " << i;
  }
}

// The SM count launch plans size grids by is the device's, not the fallback.
TEST_F(CoreGpu, MultiprocessorCountIsTheDevicesOwn) {
  ZEROJIT_REQUIRE_GPU();
  const cuda::DeviceInfo info = cuda::device_info(0);
  ASSERT_GT(info.multiprocessors, 0);
  EXPECT_EQ(cuda::multiprocessor_count(0), info.multiprocessors);
  EXPECT_EQ(cuda::multiprocessor_count(0), info.multiprocessors);  // cached read
}

TEST_F(CoreGpu, ScaleAddMatchesTheHostOnEveryPath) {
  ZEROJIT_REQUIRE_GPU();
  check_scale_add<float>(1 << 20, 0);        // 4-wide
  check_scale_add<float>((1 << 20) + 3, 0);  // scalar: length not a multiple of 4
  check_scale_add<float>(4096, 1);           // scalar: misaligned base
  check_scale_add<double>(1, 0);
  check_scale_add<double>(100000, 0);
  // f32 4-wide, f32 scalar (both scalar cases share it), f64 scalar, f64 4-wide.
  EXPECT_EQ(examples::ScaleAddKernel::instance().executor_count(), 4u);
}

TEST_F(CoreGpu, WarmedKeysLaunchWithoutCompilingOrLoading) {
  ZEROJIT_REQUIRE_GPU();
  WarmupRegistry registry;
  examples::register_examples(registry);
  const auto report = registry.warmup(WarmupOptions{.progress = ProgressStyle::none});
  ASSERT_TRUE(report.ok());
  ASSERT_EQ(report.devices, std::vector<int>{0});
  auto& kernel = examples::ScaleAddKernel::instance();
  const auto before = kernel.counters();
  check_scale_add<float>(1 << 16, 0);
  check_scale_add<double>(999, 0);
  const auto after = kernel.counters();
  EXPECT_EQ(after.compiles, before.compiles);
  EXPECT_EQ(after.loads, before.loads);
  EXPECT_EQ(after.misses, before.misses);
  EXPECT_EQ(after.hits, before.hits + 2);
}

TEST_F(CoreGpu, MonitorErrorModeThrowsOnAnUnwarmedKeyAndLaunchesNothing) {
  ZEROJIT_REQUIRE_GPU();
  auto& kernel = examples::ScaleAddKernel::instance();
  WarmupRegistry registry;  // a space that only covers f32
  registry.add(kernel, "f32 only", [&kernel] {
    auto space = kernel.warmup_space();
    space.filter("f32",
                 [](const examples::ScaleAddDescriptors& d) { return d.x.dtype == DType::f32; });
    return space;
  });
  Monitor::instance().set_mode(MonitorMode::error);
  ASSERT_TRUE(registry.warmup(WarmupOptions{.progress = ProgressStyle::none}).ok());
  check_scale_add<float>(4096, 0);  // warmed
  std::vector<double> y(64, 1.0);
  DeviceBuffer dx(y), dy(y);
  const auto desc = TensorDesc::contiguous(DType::f64, {64});
  examples::ScaleAddArgs args{make_tensor_ref(dx.get(), desc), make_tensor_ref(dy.get(), desc),
                              5.0};
  try {
    kernel(args);
    FAIL() << "expected RuntimeJitError";
  } catch (const RuntimeJitError& error) {
    EXPECT_EQ(error.kernel(), "examples.scale_add");
    EXPECT_EQ(error.key(), "dtype=f64, vector_width=4");
    EXPECT_NE(error.descriptors().find("f64[64]"), std::string::npos) << error.descriptors();
  }
  EXPECT_EQ(dy.download<double>(), y) << "a refused launch must write nothing";
}

TEST_F(CoreGpu, ArgumentSizeMismatchIsCaughtBeforeLaunch) {
  ZEROJIT_REQUIRE_GPU();
  if (cuda::driver().cuFuncGetParamInfo == nullptr)
    GTEST_SKIP() << "driver lacks cuFuncGetParamInfo";
  auto& kernel = examples::EmptyKernel::instance();
  auto spec = kernel.launch_spec(examples::EmptyArgs{32});
  kernel.launch(spec, LaunchTarget{});  // right size: fine
  testing::synchronize();
  spec.args = KernelArgs{};
  spec.args.push(1);  // 4 bytes where the kernel takes a 32-byte block
  EXPECT_THROW(kernel.launch(spec, LaunchTarget{}), LaunchError);
  const auto& function = kernel.get_or_compile(spec.key, LaunchTarget{});
  EXPECT_EQ(function.param_count, 1);
  EXPECT_EQ(function.param_sizes[0], 32u);
}

TEST_F(CoreGpu, WarmedKernelsCaptureIntoAGraphAndUnwarmedOnesRefuse) {
  ZEROJIT_REQUIRE_GPU();
  const cuda::DriverApi& api = cuda::driver();
  auto& kernel = examples::ScaleAddKernel::instance();
  std::vector<float> x(1024, 2.0f), y(1024, 1.0f);
  DeviceBuffer dx(x), dy(y);
  const auto desc = TensorDesc::contiguous(DType::f32, {1024});
  const examples::ScaleAddArgs args{make_tensor_ref(dx.get(), desc),
                                    make_tensor_ref(dy.get(), desc), 1.0};
  kernel(args);  // warms (dtype=f32, vector_width=4): y = 3
  testing::synchronize();

  cuda::Stream stream = nullptr;
  cuda::check(api.cuStreamCreate(&stream, cuda::kStreamNonBlocking), "cuStreamCreate");
  cuda::check(api.cuStreamBeginCapture(stream, cuda::kStreamCaptureModeThreadLocal), "begin");
  kernel(args, stream);  // captured, not run
  cuda::Graph graph = nullptr;
  cuda::check(api.cuStreamEndCapture(stream, &graph), "cuStreamEndCapture");
  cuda::GraphExec exec = nullptr;
  cuda::check(api.cuGraphInstantiateWithFlags(&exec, graph, 0), "cuGraphInstantiate");
  for (int replay = 0; replay < 3; ++replay)
    cuda::check(api.cuGraphLaunch(exec, stream), "cuGraphLaunch");
  cuda::check(api.cuStreamSynchronize(stream), "cuStreamSynchronize");
  EXPECT_EQ(dy.download<float>(), std::vector<float>(1024, 9.0f));  // 3 + 3 * 2

  // An unwarmed key during capture is refused with a clear error, monitor off or not.
  std::vector<double> d(16, 1.0);
  DeviceBuffer dd(d);
  const auto ddesc = TensorDesc::contiguous(DType::f64, {15});
  const examples::ScaleAddArgs unwarmed{make_tensor_ref(dd.get(), ddesc),
                                        make_tensor_ref(dd.get(), ddesc), 1.0};
  cuda::check(api.cuStreamBeginCapture(stream, cuda::kStreamCaptureModeThreadLocal), "begin");
  EXPECT_THROW(kernel(unwarmed, stream), RuntimeJitError);
  cuda::Graph discarded = nullptr;
  api.cuStreamEndCapture(stream, &discarded);
  if (discarded != nullptr) api.cuGraphDestroy(discarded);
  api.cuGraphExecDestroy(exec);
  api.cuGraphDestroy(graph);
  api.cuStreamDestroy(stream);
}

// --- Two devices (skipped with fewer) ----------------------------------------------------------

#define ZEROJIT_REQUIRE_TWO_GPUS()                                                      \
  do {                                                                                  \
    ZEROJIT_REQUIRE_GPU();                                                              \
    if (cuda::device_count() < 2) {                                                     \
      GTEST_SKIP() << "needs two CUDA devices, " << cuda::device_count() << " visible"; \
    }                                                                                   \
  } while (0)

cuda::Context current_context() {
  cuda::Context context = nullptr;
  cuda::check(cuda::driver().cuCtxGetCurrent(&context), "cuCtxGetCurrent");
  return context;
}

TEST_F(CoreGpu, WarmupLoadsEveryDeviceAndEachLaunchesFromItsOwnCache) {
  ZEROJIT_REQUIRE_TWO_GPUS();
  auto& kernel = examples::ScaleAddKernel::instance();
  WarmupRegistry registry;
  examples::register_examples(registry);
  const std::size_t keys = registry.manifest().size();
  // The loads run on this thread (one job): they must leave it in device 1's context, where
  // the caller put it, although the last module loaded may be device 0's.
  cuda::make_device_current(1);
  const cuda::Context caller_context = current_context();
  Monitor::instance().set_mode(MonitorMode::error);
  const auto report = registry.warmup(WarmupOptions{.jobs = 1, .progress = ProgressStyle::none});
  ASSERT_TRUE(report.ok()) << report.to_json();
  EXPECT_EQ(current_context(), caller_context) << "warmup changed the caller's current context";
  ASSERT_EQ(report.devices, (std::vector<int>{0, 1}));
  ASSERT_EQ(report.archs.size(), 1u) << "two devices of one arch compile each key once";
  std::uint64_t kernel_keys = 0;
  for (const auto& key : report.keys) kernel_keys += key.kernel == kernel.name() ? 1 : 0;
  const auto warmed = kernel.counters();
  // One artifact per key for the one arch: compiled, or read from the disk cache that earlier
  // tests of this process filled.
  EXPECT_EQ(warmed.compiles + warmed.disk_loads, kernel_keys);
  EXPECT_EQ(warmed.loads, 2 * kernel_keys) << "every key is loaded on both devices";
  EXPECT_EQ(kernel.executor_count(), 2 * kernel_keys);
  EXPECT_LE(kernel_keys, keys);

  for (int device : {1, 0, 1}) {
    cuda::make_device_current(device);
    check_scale_add<float>((1 << 16) + 3, 0, device);
    check_scale_add<double>(4096, 0, device);
  }
  const auto after = kernel.counters();
  EXPECT_EQ(after.compiles, warmed.compiles);
  EXPECT_EQ(after.loads, warmed.loads);
  EXPECT_EQ(after.misses, warmed.misses);
  EXPECT_EQ(after.runtime_jit, 0u);
  EXPECT_EQ(after.hits, warmed.hits + 6);
}

TEST_F(CoreGpu, KeysWarmedOnOneDeviceAreAMonitoredLoadOnTheOther) {
  ZEROJIT_REQUIRE_TWO_GPUS();
  auto& kernel = examples::ScaleAddKernel::instance();
  WarmupRegistry registry;
  examples::register_examples(registry);
  Monitor::instance().set_mode(MonitorMode::error);
  const auto report =
      registry.warmup(WarmupOptions{.devices = {0}, .progress = ProgressStyle::none});
  ASSERT_TRUE(report.ok()) << report.to_json();
  ASSERT_EQ(report.devices, std::vector<int>{0});

  cuda::make_device_current(1);
  std::vector<float> x(256, 2.0f), y(256, 1.0f);
  DeviceBuffer dx(x), dy(y);
  auto desc = TensorDesc::contiguous(DType::f32, {256});
  desc.device = Device::cuda(1);
  const examples::ScaleAddArgs args{make_tensor_ref(dx.get(), desc),
                                    make_tensor_ref(dy.get(), desc), 1.0};
  const auto before = kernel.counters();
  Monitor::instance().reset_events();
  try {
    kernel(args);
    FAIL() << "expected RuntimeJitError: the key was never loaded on device 1";
  } catch (const RuntimeJitError& error) {
    EXPECT_EQ(error.kernel(), "examples.scale_add");
    EXPECT_EQ(error.key(), "dtype=f32, vector_width=4");
    EXPECT_NE(std::string(error.what()).find("never loaded on this launch's device"),
              std::string::npos)
        << error.what();
  }
  EXPECT_EQ(kernel.counters().loads, before.loads) << "a refused launch loads nothing";
  EXPECT_EQ(dy.download<float>(), y) << "a refused launch must write nothing";
  const std::vector<JitEvent> events = Monitor::instance().events();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, JitEventKind::load) << "compiled for the arch already: only a load";
}

}  // namespace
}  // namespace zerojit
