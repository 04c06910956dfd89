// Serving through a miss (docs/BENCHMARKS.md): for each DSv4 kernel with a fallback, the first
// call of a key that warmup missed, three ways — blocking on its compile (monitor warn, an empty
// cache), blocking on a load of its compiled entry (warn, the entry on disk), and served at once
// by its warmed fallback (monitor fallback, the key loading in the background; the median of 5
// misses) — against a warmed call of the fallback (the median of 21); then the fallback's device
// time against the specialized key's. A plain program on the bandwidth benchmark's timer and
// inputs; exits 77 without a GPU.
//   zerojit_bench_fallback [--repeat N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

#include "dsv4/c128_compress/c128_compress.hpp"
#include "dsv4/compressor_batches.hpp"
#include "dsv4/indexer_q/indexer_q.hpp"
#include "kernels/cases.hpp"
#include "kernels/timing.hpp"

namespace zerojit::bench {
namespace {

using Clock = std::chrono::steady_clock;

double milliseconds_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// What the first call of a missed key costs the caller: the call and a wait for the stream, in
// milliseconds, in `mode`; with the fallback warmed first when `warm_fallback`.
template <class Kernel, class Args, class Key>
double first_call(Kernel& kernel, const Args& args, const Key& fallback, MonitorMode mode,
                  bool warm_fallback, cuda::Stream stream) {
  kernel.reset_for_testing();
  if (warm_fallback) {
    kernel.warm(fallback, Runtime::instance().target_arch(0), std::vector<int>{0});
  }
  Monitor::instance().set_mode(mode);
  Monitor::instance().arm();
  const Clock::time_point start = Clock::now();
  kernel(args, stream);
  cuda::check(cuda::driver().cuStreamSynchronize(stream), "cuStreamSynchronize");
  const double elapsed = milliseconds_since(start);
  Monitor::instance().disarm();
  Monitor::instance().set_mode(MonitorMode::off);
  if (!BackgroundCompiles::instance().wait_idle(std::chrono::minutes(2))) {
    throw std::runtime_error("a background compile did not finish within 2 minutes");
  }
  return elapsed;
}

template <class Kernel, class Args>
void measure(const char* label, Kernel& kernel, const Args& args, Timer& timer, cuda::Stream stream,
             int repetitions) {
  const auto key = kernel.dispatch(descriptors_of(args));
  const auto fallback = kernel.fallback(key);
  if (!fallback) {
    std::printf("%s: its key [%s] has no fallback\n", label, kernel.key_text(key).c_str());
    return;
  }
  const double compile = first_call(kernel, args, *fallback, MonitorMode::warn, false, stream);
  const double load = first_call(kernel, args, *fallback, MonitorMode::warn, false, stream);
  // Each a fresh miss (first_call resets the kernel); the key loads from disk in the background.
  std::vector<double> served_calls;
  for (int i = 0; i < 5; ++i) {
    served_calls.push_back(
        first_call(kernel, args, *fallback, MonitorMode::fallback, true, stream));
  }
  const double served = median(served_calls);
  const LaunchTarget target{0, stream};
  std::vector<double> warmed;
  for (int i = 0; i < 21; ++i) {
    const Clock::time_point start = Clock::now();
    kernel.launch(kernel.plan(*fallback, args), target);
    cuda::check(cuda::driver().cuStreamSynchronize(stream), "cuStreamSynchronize");
    warmed.push_back(milliseconds_since(start));
  }
  const Measurement specialized =
      timer.measure({[&](cuda::Stream s) {
                      kernel.launch(kernel.plan(key, args), LaunchTarget{0, s});
                    }},
                    repetitions);
  const Measurement covering =
      timer.measure({[&](cuda::Stream s) {
                      kernel.launch(kernel.plan(*fallback, args), LaunchTarget{0, s});
                    }},
                    repetitions);
  const double warmed_ms = median(warmed);
  std::printf(
      "%s: key [%s], fallback [%s]\n"
      "  first call, ms: compile %.2f | load from disk %.2f | served by the fallback %.3f (median "
      "of 5) | "
      "a warmed call of the fallback %.3f (served / warmed %.2fx)\n"
      "  device time, us (median of %d): specialized %.2f | fallback %.2f (fallback / "
      "specialized %.2fx)\n",
      label, kernel.key_text(key).c_str(), kernel.key_text(*fallback).c_str(), compile, load,
      served, warmed_ms, served / warmed_ms, repetitions, specialized.median_us, covering.median_us,
      covering.median_us / specialized.median_us);
  std::fflush(stdout);
}

// The indexer-Q at 8192 tokens (a coarsened key: its fallback takes coarsen 1).
void indexer_q(Timer& timer, cuda::Stream stream, int repetitions, bool mxfp4) {
  constexpr std::int64_t kTokens = 8192;
  in::Random random(mxfp4 ? 4101 : 4102);  // fixed seeds: every run times the same inputs
  const in::IndexerQInputsHost host = in::make_indexer_q_inputs(
      random, kTokens, kIndexHeads, kIndexHeadDim, kRopeDim, DType::f32, kRopeDim, 65536);
  const in::HostTensor weights_out = in::make_tensor(DType::f32, {kTokens, kIndexHeads});
  DeviceSet set(false);
  if (mxfp4) {
    dsv4::IndexerQMxFp4Args a;
    put_indexer_q_inputs(set, host, a);
    a.q_packed = set.put(in::make_tensor(DType::u8, {kTokens, kIndexHeads, kIndexHeadDim / 2}));
    a.q_scale = set.put(in::make_tensor(DType::u8, {kTokens, kIndexHeads, kIndexHeadDim / 32}));
    a.weights_out = set.put(weights_out);
    cuda::check(cuda::driver().cuCtxSynchronize(), "cuCtxSynchronize");
    measure("indexer_q_mxfp4, 8192 tokens", dsv4::IndexerQMxFp4Kernel::instance(), a, timer, stream,
            repetitions);
  } else {
    dsv4::IndexerQFp8Args a;
    put_indexer_q_inputs(set, host, a);
    a.q_fp8 = set.put(in::make_tensor(DType::u8, {kTokens, kIndexHeads, kIndexHeadDim}));
    a.weights_out = set.put(weights_out);
    cuda::check(cuda::driver().cuCtxSynchronize(), "cuCtxSynchronize");
    measure("indexer_q_fp8, 8192 tokens", dsv4::IndexerQFp8Kernel::instance(), a, timer, stream,
            repetitions);
  }
}

// The C128 compress at a prefill of 4 requests of 4096 tokens (the CTA-scan key: its fallback
// is the decode kernel).
void c128_compress(Timer& timer, cuda::Stream stream, int repetitions) {
  in::Random random(4103);
  const std::vector<in::RequestChunk> requests = compressor_requests(random, 16384, 4096, 128);
  const CompressorMetadata m =
      compressor_metadata(random, requests, 128, in::count_boundaries(requests, 128) + 1);
  const in::CompressorState state =
      in::make_compressor_state(random, requests, 8, 512, 128, 0, 0, 1);
  const auto tokens = static_cast<std::int64_t>(m.tokens.positions.size());
  DeviceSet set(false);
  const dsv4::C128CompressArgs a =
      put_c128_compress_args(set, m, state, in::make_tensor(DType::f32, {tokens, kHeadSize}));
  cuda::check(cuda::driver().cuCtxSynchronize(), "cuCtxSynchronize");
  measure("c128_compress, prefill of 16384 tokens", dsv4::C128CompressKernel::instance(), a, timer,
          stream, repetitions);
}

int run(int repetitions) {
  const TimedDevice timed = open_timed_device();
  const cuda::DeviceInfo& device = timed.info;
  cuda::Stream stream = timed.stream;
  std::printf("device: %s (sm_%d%d), cache %s\n", device.name.c_str(), device.compute_major,
              device.compute_minor, std::getenv("ZEROJIT_CACHE_DIR"));
  const std::int64_t l2 = device.l2_cache_bytes > 0 ? device.l2_cache_bytes : 50 << 20;
  Timer timer(stream, timed.clock_khz, l2);
  indexer_q(timer, stream, repetitions, false);
  indexer_q(timer, stream, repetitions, true);
  c128_compress(timer, stream, repetitions);
  return 0;
}

}  // namespace
}  // namespace zerojit::bench

int main(int argc, char** argv) {
  int repetitions = 50;
  if (argc == 3 && std::string(argv[1]) == "--repeat") repetitions = std::atoi(argv[2]);
  if (repetitions < 1) {
    std::fprintf(stderr, "zerojit_bench_fallback: --repeat takes a positive count\n");
    return 2;
  }
  // An empty cache of its own: the first call of each key must really compile.
  char cache[] = "/tmp/zerojit-bench-fallback-XXXXXX";
  if (mkdtemp(cache) == nullptr) {
    std::perror("zerojit_bench_fallback: mkdtemp");
    return 1;
  }
  setenv("ZEROJIT_CACHE_DIR", cache, 1);
  int code = 1;
  try {
    if (zerojit::cuda::device_count() == 0) {
      std::printf("zerojit_bench_fallback: no CUDA device; nothing measured\n");
      code = 77;
    } else {
      code = zerojit::bench::run(repetitions);
    }
  } catch (const std::exception& error) {
    std::fprintf(stderr, "zerojit_bench_fallback: %s\n", error.what());
  }
  std::error_code ignored;  // a cache left behind in /tmp is harmless
  std::filesystem::remove_all(cache, ignored);
  return code;
}
