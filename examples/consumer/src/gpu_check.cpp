// The consumer's kernel checked on a GPU: every key its configuration warms (f32, f64 and bf16;
// unrolled and not) run on fresh random inputs against a CPU reference, within tolerances, with
// the monitor in error mode so that a launch warmup did not cover fails. Built from zerojit's
// installed headers alone (zerojit/testing.hpp: device buffers, streams, comparisons).
// Exit 0: every case matched; 1: a mismatch or a failure; 77 (zerojit::testing::kSkipped): no
// GPU here, which it says. ctest runs it as the test consumer_gpu_check.
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "axpy.hpp"
#include "zerojit/testing.hpp"

namespace {

using zerojit::DType;
namespace testing = zerojit::testing;

constexpr double kAlpha = 0.75;

// How an element type is filled, read and compared: the host storage of a dtype, the value it
// holds, and the rounding the kernel does on store.
struct F32 {
  using Storage = float;
  static constexpr DType dtype = DType::f32;
  static float value(Storage s) { return s; }
  static Storage stored(double v) { return static_cast<float>(v); }
  // NVRTC fuses alpha * x + y into one FMA, the reference rounds twice: 1 ulp apart at most.
  static constexpr testing::Tolerance tolerance{.absolute = 1e-6, .relative = 1e-6};
};
struct F64 {
  using Storage = double;
  static constexpr DType dtype = DType::f64;
  static double value(Storage s) { return s; }
  static Storage stored(double v) { return v; }
  static constexpr testing::Tolerance tolerance{.absolute = 1e-14, .relative = 1e-14};
};
struct BF16 {
  using Storage = std::uint16_t;  // zj::bf16_t's bits
  static constexpr DType dtype = DType::bf16;
  static float value(Storage s) { return testing::bf16_to_float(s); }
  static Storage stored(double v) { return testing::float_to_bf16(static_cast<float>(v)); }
  // One bf16 rounding step (2^-8 of the value) apart at most.
  static constexpr testing::Tolerance tolerance{.absolute = 1e-2, .relative = 1.0 / 128};
};

// One launch of `length` elements; returns what failed ("" when the output matched).
template <class E>
std::string check(std::int64_t length, std::mt19937& random, const testing::Stream& stream) {
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  std::vector<typename E::Storage> x(static_cast<std::size_t>(length));
  std::vector<typename E::Storage> y(x.size());
  std::vector<double> expected(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    x[i] = E::stored(uniform(random));
    y[i] = E::stored(uniform(random));
    // The CPU reference, in the kernel's arithmetic type, rounded as the kernel stores.
    using Math = decltype(E::value(x[i]));
    const Math result = static_cast<Math>(kAlpha) * E::value(x[i]) + E::value(y[i]);
    expected[i] = E::value(E::stored(result));
  }
  testing::DeviceBuffer device_x(x), device_y(y);
  consumer::AxpyKernel::instance()(consumer::AxpyArgs{device_x.tensor(E::dtype, {length}),
                                                      device_y.tensor(E::dtype, {length}), kAlpha},
                                   stream.get());
  stream.synchronize();
  std::vector<double> actual;
  for (const auto element : device_y.download<typename E::Storage>()) {
    actual.push_back(E::value(element));
  }
  return testing::compare(
      std::string(zerojit::dtype_name(E::dtype)) + " y, length " + std::to_string(length), actual,
      expected, E::tolerance);
}

}  // namespace

int main() {
  if (const std::string why = testing::gpu_unavailable_reason(); !why.empty()) {
    std::printf("skipped: %s\n", why.c_str());
    return testing::kSkipped;
  }
  try {
    // Lengths 1024 and 1023: the unrolled key and the plain one, for each dtype.
    consumer::AxpyConfig config;
    config.lengths = {1024, 1023};
    zerojit::WarmupRegistry registry;
    consumer::register_warmup(registry, config);
    zerojit::WarmupOptions options;
    options.devices = {0};
    options.progress = zerojit::ProgressStyle::none;
    zerojit::Monitor::instance().set_mode(zerojit::MonitorMode::error);
    const zerojit::WarmupReport report = registry.warmup(options);
    std::printf("%s\n", report.summary_line().c_str());
    if (!report.ok()) return 1;

    std::mt19937 random(2024);
    const testing::Stream stream(0);
    int failures = 0;
    for (const std::int64_t length : config.lengths) {
      for (const std::string& failure :
           {check<F32>(length, random, stream), check<F64>(length, random, stream),
            check<BF16>(length, random, stream)}) {
        if (failure.empty()) continue;
        std::printf("FAILED %s\n", failure.c_str());
        ++failures;
      }
    }
    if (failures != 0) return 1;
    std::printf("ok: %zu cases match the CPU reference\n", 3 * config.lengths.size());
    return 0;
  } catch (const std::exception& error) {  // a CUDA error, a runtime JIT, ...
    std::printf("FAILED: %s\n", error.what());
    return 1;
  }
}
