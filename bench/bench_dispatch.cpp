// CPU cost of the launch path without the launch: descriptors -> key -> executor lookup, for
// every DSv4 kernel (and the examples), on a backend that launches nothing. Runs anywhere
// (the keys compile with NVRTC first).
//
//   bench/zerojit_bench_dispatch --benchmark_repetitions=5 --benchmark_report_aggregates_only
#include <benchmark/benchmark.h>

#include <stdexcept>
#include <vector>

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

// The first (or only) point of a kernel's warmup space: a real runtime shape. The space is the
// one its gate gives under the default configuration, changed by `adjust` for the kernels that
// configuration does not run (MXFP4 indexer, full-row stores, DCP pack).
template <class Kernel>
typename Kernel::Descriptors first_point(void (*adjust)(Dsv4Config&) = nullptr) {
  Dsv4Config config = default_config();
  if (adjust != nullptr) adjust(config);
  const auto gate = AttentionKernels(config).gate<Kernel>();
  if (!gate) throw std::logic_error(Kernel::instance().name() + ": the configuration runs none");
  typename Kernel::Descriptors first{};
  bool found = false;
  Kernel::instance().warmup_space(*gate).for_each_point(
      [&](std::size_t, const std::vector<std::size_t>&, const typename Kernel::Descriptors* d) {
        if (d && !found) {
          first = *d;
          found = true;
        }
      });
  return first;
}

// Dispatch of `Kernel` on the first point of its warmup space (see first_point).
template <class Kernel>
void run_dispatch_of(benchmark::State& state, void (*adjust)(Dsv4Config&) = nullptr) {
  run_dispatch(state, Kernel::instance(), first_point<Kernel>(adjust));
}

void mxfp4_indexer(Dsv4Config& config) {
  config.serving.indexer_dtype = IndexerDtype::mxfp4;
  config.serving.target_arch = "sm_100a";
}
void fp8_e4m3_cache(Dsv4Config& config) { config.serving.kv_cache_dtype = KvCacheDtype::fp8_e4m3; }
void bf16_cache(Dsv4Config& config) { config.serving.kv_cache_dtype = KvCacheDtype::bf16; }
void two_dcp_ranks(Dsv4Config& config) { config.serving.dcp_world_size = 2; }

void BM_IndexerQFp8(benchmark::State& state) { run_dispatch_of<IndexerQFp8Kernel>(state); }
void BM_IndexerQMxFp4(benchmark::State& state) {
  run_dispatch_of<IndexerQMxFp4Kernel>(state, mxfp4_indexer);
}
void BM_DequantGather(benchmark::State& state) { run_dispatch_of<DequantGatherKernel>(state); }
void BM_C4Store(benchmark::State& state) { run_dispatch_of<C4StoreKernel>(state); }
void BM_C4StoreFull(benchmark::State& state) {
  run_dispatch_of<C4StoreFullKernel>(state, fp8_e4m3_cache);
}
void BM_C128Compress(benchmark::State& state) { run_dispatch_of<C128CompressKernel>(state); }
void BM_C128Store(benchmark::State& state) { run_dispatch_of<C128StoreKernel>(state); }
void BM_C128StoreFull(benchmark::State& state) {
  run_dispatch_of<C128StoreFullKernel>(state, bf16_cache);
}
void BM_DcpPack(benchmark::State& state) { run_dispatch_of<DcpPackKernel>(state, two_dcp_ranks); }

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
