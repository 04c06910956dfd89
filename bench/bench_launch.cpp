// Host time per launch of an empty kernel: through zerojit's hit path (dispatch, executor
// lookup, argument check, launch) against a raw cuLaunchKernel of the very same function, in
// one process. Needs a GPU.
//
//   bench/zerojit_bench_launch --benchmark_repetitions=5 --benchmark_report_aggregates_only
#include <benchmark/benchmark.h>

#include <cstdio>

#include "examples/scale_add.hpp"
#include "examples/scale_add_params.h"
#include "zerojit/zerojit.hpp"

namespace {

using zerojit::cuda::driver;

// Launches are asynchronous: without an occasional sync the queue fills and both variants
// would measure the GPU. Both sync at the same cadence.
constexpr int kSyncEvery = 256;

bool gpu_ready() {
  if (zerojit::cuda::device_count() == 0) return false;
  zerojit::cuda::make_device_current(0);
  return true;
}

void BM_RawCuLaunchKernel(benchmark::State& state) {
  if (!gpu_ready()) return state.SkipWithError("no CUDA device");
  auto& kernel = zerojit::examples::EmptyKernel::instance();
  const auto spec = kernel.plan(32);
  const zerojit::LoadedFunction& function = kernel.get_or_compile(spec.key, zerojit::LaunchTarget{});
  zj::examples::ScaleAddParams params{nullptr, nullptr, 0, 0.0};
  void* args[] = {&params};
  const auto& api = driver();
  int n = 0;
  for (auto _ : state) {
    api.cuLaunchKernel(function.function, 1, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr);
    if (++n % kSyncEvery == 0) api.cuCtxSynchronize();
  }
  api.cuCtxSynchronize();
}

void BM_ZerojitHitPath(benchmark::State& state) {
  if (!gpu_ready()) return state.SkipWithError("no CUDA device");
  auto& kernel = zerojit::examples::EmptyKernel::instance();
  kernel(32, zerojit::LaunchTarget{});  // warm
  const auto& api = driver();
  int n = 0;
  for (auto _ : state) {
    kernel(32, zerojit::LaunchTarget{});
    if (++n % kSyncEvery == 0) api.cuCtxSynchronize();
  }
  api.cuCtxSynchronize();
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
  int n = 0;
  for (auto _ : state) {
    kernel(args);
    if (++n % kSyncEvery == 0) driver().cuCtxSynchronize();
  }
  driver().cuCtxSynchronize();
  driver().cuMemFree(buffer);
}

BENCHMARK(BM_RawCuLaunchKernel);
BENCHMARK(BM_ZerojitHitPath);
BENCHMARK(BM_ZerojitScaleAddHitPath);

}  // namespace

BENCHMARK_MAIN();
