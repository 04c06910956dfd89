// CPU cost of the launch path without the launch: descriptors -> key -> executor lookup, for
// every DSv4 kernel (and the examples), on a backend that launches nothing. Runs anywhere
// (the keys compile with NVRTC first).
//
//   bench/zerojit_bench_dispatch --benchmark_repetitions=5 --benchmark_report_aggregates_only
#include <benchmark/benchmark.h>

#include "dsv4/family.hpp"
#include "support/null_backend.hpp"

namespace {

using namespace zerojit;
using namespace zerojit::dsv4;

void install_null_backend() {
  static bool installed = [] {
    Runtime::instance().set_backend(std::make_shared<testing::NullBackend>());
    Runtime::instance().set_artifact_store(nullptr);
    return true;
  }();
  (void)installed;
}

template <class Kernel>
void run_dispatch(benchmark::State& state, Kernel& kernel,
                  const typename Kernel::Descriptors& descriptors) {
  install_null_backend();
  const LaunchTarget target{};
  kernel.get_or_compile(kernel.dispatch(descriptors), target);  // compile + fake load
  for (auto _ : state) {
    const auto key = kernel.dispatch(descriptors);
    const LoadedFunction& function = kernel.get_or_compile(key, target);
    benchmark::DoNotOptimize(&function);
  }
}

// The first (or only) point of each kernel's default warmup space: a real runtime shape.
template <class Kernel>
typename Kernel::Descriptors first_point(const WarmupSpace<typename Kernel::Descriptors>& space) {
  typename Kernel::Descriptors first{};
  bool found = false;
  space.for_each_point(
      [&](std::size_t, const std::vector<std::size_t>&, const typename Kernel::Descriptors* d) {
        if (d && !found) {
          first = *d;
          found = true;
        }
      });
  return first;
}

void BM_IndexerQFp8(benchmark::State& state) {
  auto& k = IndexerQFp8Kernel::instance();
  run_dispatch(state, k,
               first_point<IndexerQFp8Kernel>(k.warmup_space(128, 64, 64, DType::f32, 8192)));
}
void BM_IndexerQMxFp4(benchmark::State& state) {
  auto& k = IndexerQMxFp4Kernel::instance();
  run_dispatch(state, k,
               first_point<IndexerQMxFp4Kernel>(k.warmup_space(128, 64, 64, DType::f32, 8192)));
}
void BM_DequantGather(benchmark::State& state) {
  auto& k = DequantGatherKernel::instance();
  run_dispatch(state, k, first_point<DequantGatherKernel>(k.warmup_space({{256, true}})));
}
void BM_C4Store(benchmark::State& state) {
  auto& k = C4StoreKernel::instance();
  run_dispatch(state, k, first_point<C4StoreKernel>(k.warmup_space(DType::bf16, 64)));
}
void BM_C4StoreFull(benchmark::State& state) {
  auto& k = C4StoreFullKernel::instance();
  run_dispatch(state, k, first_point<C4StoreFullKernel>(k.warmup_space(DType::bf16, true, 64)));
}
void BM_C128Compress(benchmark::State& state) {
  auto& k = C128CompressKernel::instance();
  run_dispatch(state, k, first_point<C128CompressKernel>(k.warmup_space(512)));
}
void BM_C128Store(benchmark::State& state) {
  auto& k = C128StoreKernel::instance();
  run_dispatch(state, k, first_point<C128StoreKernel>(k.warmup_space(DType::bf16, 2, 1728)));
}
void BM_C128StoreFull(benchmark::State& state) {
  auto& k = C128StoreFullKernel::instance();
  run_dispatch(state, k, first_point<C128StoreFullKernel>(k.warmup_space(DType::bf16, false, 2)));
}
void BM_DcpPack(benchmark::State& state) {
  auto& k = DcpPackKernel::instance();
  run_dispatch(state, k, first_point<DcpPackKernel>(k.warmup_space(512, 2, 1)));
}

BENCHMARK(BM_IndexerQFp8);
BENCHMARK(BM_IndexerQMxFp4);
BENCHMARK(BM_DequantGather);
BENCHMARK(BM_C4Store);
BENCHMARK(BM_C4StoreFull);
BENCHMARK(BM_C128Compress);
BENCHMARK(BM_C128Store);
BENCHMARK(BM_C128StoreFull);
BENCHMARK(BM_DcpPack);

}  // namespace

BENCHMARK_MAIN();
