// Host time per launch of an empty kernel: through zerojit's hit path (dispatch, executor
// lookup, argument check, launch) against a raw cuLaunchKernel of the very same function, in
// one process. Needs a GPU.
//
//   bench/zerojit_bench_launch --benchmark_repetitions=10 --benchmark_report_aggregates_only
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>
#include <cstdio>

#include "examples/empty/empty_params.h"
#include "examples/examples.hpp"
#include "zerojit/zerojit.hpp"

namespace {

using zerojit::cuda::driver;

// Launches are asynchronous: without an occasional sync the queue fills and both variants
// would measure the GPU. Both sync at the same cadence, with the clock stopped: an empty
// kernel takes the GPU about as long as its launch takes the host, so a timed drain would
// measure the GPU's rate instead of the host's cost per launch.
constexpr int kSyncEvery = 256;

// Times `launch` once per iteration, draining the queue every kSyncEvery launches untimed.
template <class Launch>
void time_launches(benchmark::State& state, Launch launch) {
  const auto& api = driver();
  int n = 0;
  for (auto _ : state) {
    launch();
    if (++n % kSyncEvery == 0) {
      state.PauseTiming();
      api.cuCtxSynchronize();
      state.ResumeTiming();
    }
  }
  api.cuCtxSynchronize();
}

bool gpu_ready() {
  if (zerojit::cuda::device_count() == 0) return false;
  zerojit::cuda::make_device_current(0);
  return true;
}

void BM_RawCuLaunchKernel(benchmark::State& state) {
  if (!gpu_ready()) return state.SkipWithError("no CUDA device");
  auto& kernel = zerojit::examples::EmptyKernel::instance();
  const auto spec = kernel.launch_spec(zerojit::examples::EmptyArgs{32});
  const zerojit::LoadedFunction& function =
      kernel.get_or_compile(spec.key, zerojit::LaunchTarget{});
  zj::examples::EmptyParams params{nullptr, nullptr, 0, 0.0};
  void* args[] = {&params};
  const auto& api = driver();
  time_launches(state, [&] {
    api.cuLaunchKernel(function.function, 1, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr);
  });
}

void BM_ZerojitHitPath(benchmark::State& state) {
  if (!gpu_ready()) return state.SkipWithError("no CUDA device");
  auto& kernel = zerojit::examples::EmptyKernel::instance();
  kernel(32, zerojit::LaunchTarget{});  // warm
  time_launches(state, [&] { kernel(32, zerojit::LaunchTarget{}); });
}

// The same, with a real argument block and validation: y = a*x + y on 16 elements.
void BM_ZerojitScaleAddHitPath(benchmark::State& state) {
  if (!gpu_ready()) return state.SkipWithError("no CUDA device");
  zerojit::cuda::DevicePtr buffer = 0;
  zerojit::cuda::check(driver().cuMemAlloc(&buffer, 256), "cuMemAlloc");
  const auto desc = zerojit::TensorDesc::contiguous(zerojit::DType::f32, {16});
  zerojit::examples::ScaleAddArgs args{
      zerojit::make_tensor_ref(reinterpret_cast<void*>(buffer), desc),
      zerojit::make_tensor_ref(reinterpret_cast<void*>(buffer + 128), desc), 1.0};
  auto& kernel = zerojit::examples::ScaleAddKernel::instance();
  kernel(args);
  time_launches(state, [&] { kernel(args); });
  driver().cuMemFree(buffer);
}

// Both launches side by side in one loop: each iteration times one raw launch and one
// zerojit launch (alternating which goes first), so that drift of the host or the driver
// between separate benchmarks cannot masquerade as overhead. Reports the mean host time of
// each and their ratio; the clock reads add the same ~20 ns to both.
void BM_SideBySide(benchmark::State& state) {
  if (!gpu_ready()) return state.SkipWithError("no CUDA device");
  using Clock = std::chrono::steady_clock;
  auto& kernel = zerojit::examples::EmptyKernel::instance();
  const auto spec = kernel.launch_spec(zerojit::examples::EmptyArgs{32});
  const zerojit::LoadedFunction& function =
      kernel.get_or_compile(spec.key, zerojit::LaunchTarget{});
  kernel(32, zerojit::LaunchTarget{});  // warm the hit path
  zj::examples::EmptyParams params{nullptr, nullptr, 0, 0.0};
  void* args[] = {&params};
  const auto& api = driver();
  auto raw = [&] {
    api.cuLaunchKernel(function.function, 1, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr);
  };
  auto through_zerojit = [&] { kernel(32, zerojit::LaunchTarget{}); };
  std::chrono::nanoseconds raw_total{0}, zerojit_total{0};
  std::int64_t n = 0;
  for (auto _ : state) {
    const bool raw_first = (n & 1) == 0;
    const auto t0 = Clock::now();
    raw_first ? raw() : through_zerojit();
    const auto t1 = Clock::now();
    raw_first ? through_zerojit() : raw();
    const auto t2 = Clock::now();
    (raw_first ? raw_total : zerojit_total) += t1 - t0;
    (raw_first ? zerojit_total : raw_total) += t2 - t1;
    if (++n % (kSyncEvery / 2) == 0) {
      state.PauseTiming();
      api.cuCtxSynchronize();
      state.ResumeTiming();
    }
  }
  api.cuCtxSynchronize();
  const double raw_ns = static_cast<double>(raw_total.count()) / static_cast<double>(n);
  const double zerojit_ns = static_cast<double>(zerojit_total.count()) / static_cast<double>(n);
  state.counters["raw_ns"] = raw_ns;
  state.counters["zerojit_ns"] = zerojit_ns;
  state.counters["added_ns"] = zerojit_ns - raw_ns;
  state.counters["ratio"] = zerojit_ns / raw_ns;
}

BENCHMARK(BM_RawCuLaunchKernel);
BENCHMARK(BM_ZerojitHitPath);
BENCHMARK(BM_ZerojitScaleAddHitPath);
BENCHMARK(BM_SideBySide);

}  // namespace

BENCHMARK_MAIN();
