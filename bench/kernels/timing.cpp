#include "kernels/timing.hpp"

#include <algorithm>
#include <chrono>
#include <span>
#include <string>
#include <string_view>

namespace zerojit::bench {

namespace {

constexpr std::string_view kSpinSource =
    R"(// Spins one thread for `cycles` SM clock cycles and touches no memory. The bandwidth
// benchmark enqueues it before each timed launch, so that the host enqueues the start event
// and the launch while the GPU is still busy and the events time the kernel alone.
namespace zj::bench {
__global__ void spin_kernel(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}
}  // namespace zj::bench
)";
constexpr EmbeddedFile kSpinFiles[] = {{"bench/spin.cu", kSpinSource}};

const EmbeddedFileSet& spin_files() {
  static const EmbeddedFileSet files{std::span<const EmbeddedFile>(kSpinFiles)};
  return files;
}

constexpr std::string_view kCopySource =
    R"(// Copies 16-byte vectors: each thread loads VECTORS of them (a block's worth apart, so
// each load instruction is coalesced across the warp) before it stores any, so that enough
// loads are in flight to cover DRAM latency. One pass, no grid-stride loop: the grid covers
// the copy, as a memory-bound kernel's grid covers its rows.
namespace zj::bench {
template <int VECTORS>
__global__ void copy_kernel(uint4* __restrict__ destination, const uint4* __restrict__ source,
                            unsigned long long vectors) {
  const unsigned long long first =
      static_cast<unsigned long long>(blockIdx.x) * blockDim.x * VECTORS + threadIdx.x;
  uint4 values[VECTORS];
#pragma unroll
  for (int i = 0; i < VECTORS; ++i) {
    const unsigned long long index = first + static_cast<unsigned long long>(i) * blockDim.x;
    if (index < vectors) values[i] = source[index];
  }
#pragma unroll
  for (int i = 0; i < VECTORS; ++i) {
    const unsigned long long index = first + static_cast<unsigned long long>(i) * blockDim.x;
    if (index < vectors) destination[index] = values[i];
  }
}
}  // namespace zj::bench
)";
constexpr EmbeddedFile kCopyFiles[] = {{"bench/copy.cu", kCopySource}};

const EmbeddedFileSet& copy_files() {
  static const EmbeddedFileSet files{std::span<const EmbeddedFile>(kCopyFiles)};
  return files;
}

constexpr unsigned kCopyThreads = 256;

}  // namespace

SpinKernel::SpinKernel() : JitKernel("bench.spin", spin_files()) {}

Program SpinKernel::program(const SpinKey& key) const {
  return make_program(key, "bench/spin.cu", "zj::bench::spin_kernel");
}

void SpinKernel::operator()(long long cycles, cuda::Stream stream) {
  const SpinDescriptors descriptors{1};
  LaunchSpec<SpinKey> spec;
  spec.key = dispatch(descriptors);
  spec.geometry.block.x = 1;
  spec.args.push(cycles);
  launch(spec, LaunchTarget{0, stream}, &descriptors);
}

CopyKernel::CopyKernel() : JitKernel("bench.copy", copy_files()) {}

Program CopyKernel::program(const CopyKey& key) const {
  return make_program(key, "bench/copy.cu",
                      "zj::bench::copy_kernel<" + std::to_string(key.vectors_per_thread) + ">");
}

void CopyKernel::operator()(cuda::DevicePtr destination, cuda::DevicePtr source, std::size_t bytes,
                            cuda::Stream stream) {
  const CopyDescriptors descriptors{};
  LaunchSpec<CopyKey> spec;
  spec.key = dispatch(descriptors);
  const auto vectors = static_cast<unsigned long long>(bytes / 16);
  const unsigned long long per_block =
      kCopyThreads * static_cast<unsigned>(spec.key.vectors_per_thread);
  spec.geometry.block.x = kCopyThreads;
  spec.geometry.grid.x =
      static_cast<unsigned>(std::max(1ULL, (vectors + per_block - 1) / per_block));
  spec.args.push(destination);
  spec.args.push(source);
  spec.args.push(vectors);
  launch(spec, LaunchTarget{0, stream}, &descriptors);
}

TimedDevice open_timed_device() {
  cuda::make_device_current(0);
  TimedDevice device;
  device.info = cuda::device_info(0);
  const auto& api = cuda::driver();
  cuda::DeviceHandle handle = 0;
  cuda::check(api.cuDeviceGet(&handle, 0), "cuDeviceGet");
  constexpr int kAttributeClockRate = 13;  // CU_DEVICE_ATTRIBUTE_CLOCK_RATE, kHz
  cuda::check(api.cuDeviceGetAttribute(&device.clock_khz, kAttributeClockRate, handle),
              "cuDeviceGetAttribute(CLOCK_RATE)");
  cuda::check(api.cuStreamCreate(&device.stream, cuda::kStreamNonBlocking), "cuStreamCreate");
  return device;
}

Timer::Timer(cuda::Stream stream, double clock_khz, std::int64_t l2_bytes)
    : stream_(stream),
      clock_khz_(clock_khz > 0 ? clock_khz : 2'000'000),
      flush_bytes_(static_cast<std::size_t>(4 * l2_bytes)) {
  cuda::check(cuda::driver().cuMemAlloc(&flush_buffer_, flush_bytes_), "cuMemAlloc (L2 flush)");
}

Timer::~Timer() {
  if (flush_buffer_ != 0) cuda::driver().cuMemFree(flush_buffer_);
}

void Timer::flush_l2() {
  cuda::check(cuda::driver().cuMemsetD8Async(flush_buffer_, 0x3C, flush_bytes_, stream_),
              "cuMemsetD8Async (L2 flush)");
}

namespace {

Measurement summarize(std::vector<double> microseconds) {
  std::sort(microseconds.begin(), microseconds.end());
  Measurement result;
  result.repetitions = static_cast<int>(microseconds.size());
  result.min_us = microseconds.front();
  const std::size_t middle = microseconds.size() / 2;
  result.median_us = microseconds.size() % 2 == 1
                         ? microseconds[middle]
                         : 0.5 * (microseconds[middle - 1] + microseconds[middle]);
  return result;
}

}  // namespace

Measurement Timer::measure_graph(const std::vector<Launch>& launches, int repetitions) {
  const auto& api = cuda::driver();
  for (const Launch& launch : launches) launch(stream_);  // compile and load outside the graph
  cuda::check(api.cuStreamSynchronize(stream_), "cuStreamSynchronize (warmup)");
  cuda::Graph graph = nullptr;
  cuda::check(api.cuStreamBeginCapture(stream_, cuda::kStreamCaptureModeThreadLocal),
              "cuStreamBeginCapture");
  for (const Launch& launch : launches) launch(stream_);
  cuda::check(api.cuStreamEndCapture(stream_, &graph), "cuStreamEndCapture");
  cuda::GraphExec exec = nullptr;
  cuda::check(api.cuGraphInstantiateWithFlags(&exec, graph, 0), "cuGraphInstantiateWithFlags");
  cuda::check(api.cuGraphLaunch(exec, stream_), "cuGraphLaunch (warmup)");
  cuda::check(api.cuStreamSynchronize(stream_), "cuStreamSynchronize (graph warmup)");

  cuda::Event start = nullptr, end = nullptr;
  cuda::check(api.cuEventCreate(&start, cuda::kEventDefault), "cuEventCreate");
  cuda::check(api.cuEventCreate(&end, cuda::kEventDefault), "cuEventCreate");
  std::vector<double> microseconds;
  for (int r = 0; r < repetitions; ++r) {
    flush_l2();
    cuda::check(api.cuEventRecord(start, stream_), "cuEventRecord");
    cuda::check(api.cuGraphLaunch(exec, stream_), "cuGraphLaunch");
    cuda::check(api.cuEventRecord(end, stream_), "cuEventRecord");
    cuda::check(api.cuEventSynchronize(end), "cuEventSynchronize");
    float milliseconds = 0.0f;
    cuda::check(api.cuEventElapsedTime(&milliseconds, start, end), "cuEventElapsedTime");
    microseconds.push_back(static_cast<double>(milliseconds) * 1000.0 /
                           static_cast<double>(launches.size()));
  }
  api.cuEventDestroy(start);
  api.cuEventDestroy(end);
  api.cuGraphExecDestroy(exec);
  api.cuGraphDestroy(graph);
  return summarize(std::move(microseconds));
}

Measurement Timer::measure(const std::vector<Launch>& launches, int repetitions, bool flush) {
  const auto& api = cuda::driver();
  for (const Launch& launch : launches) launch(stream_);
  spin_(1, stream_);  // compiles the spin once
  cuda::check(api.cuStreamSynchronize(stream_), "cuStreamSynchronize (warmup)");

  // What one launch costs the host, so that the spin outlasts it.
  constexpr int kProbe = 4;
  const auto probe_start = std::chrono::steady_clock::now();
  for (int i = 0; i < kProbe; ++i) {
    launches[static_cast<std::size_t>(i) % launches.size()](stream_);
  }
  const double host_us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - probe_start)
          .count() /
      kProbe;
  cuda::check(api.cuStreamSynchronize(stream_), "cuStreamSynchronize (probe)");
  const double spin_us = std::max(20.0, 3.0 * host_us + 10.0);
  const auto spin_cycles = static_cast<long long>(spin_us * clock_khz_ / 1000.0);

  std::vector<cuda::Event> starts(static_cast<std::size_t>(repetitions));
  std::vector<cuda::Event> ends(static_cast<std::size_t>(repetitions));
  for (int r = 0; r < repetitions; ++r) {
    cuda::check(api.cuEventCreate(&starts[static_cast<std::size_t>(r)], cuda::kEventDefault),
                "cuEventCreate");
    cuda::check(api.cuEventCreate(&ends[static_cast<std::size_t>(r)], cuda::kEventDefault),
                "cuEventCreate");
  }
  for (int r = 0; r < repetitions; ++r) {
    const auto i = static_cast<std::size_t>(r);
    if (flush) flush_l2();
    spin_(spin_cycles, stream_);
    cuda::check(api.cuEventRecord(starts[i], stream_), "cuEventRecord");
    launches[i % launches.size()](stream_);
    cuda::check(api.cuEventRecord(ends[i], stream_), "cuEventRecord");
  }
  cuda::check(api.cuStreamSynchronize(stream_), "cuStreamSynchronize (timed launches)");
  std::vector<double> microseconds;
  for (int r = 0; r < repetitions; ++r) {
    const auto i = static_cast<std::size_t>(r);
    float milliseconds = 0.0f;
    cuda::check(api.cuEventElapsedTime(&milliseconds, starts[i], ends[i]), "cuEventElapsedTime");
    microseconds.push_back(static_cast<double>(milliseconds) * 1000.0);
    api.cuEventDestroy(starts[i]);
    api.cuEventDestroy(ends[i]);
  }
  return summarize(std::move(microseconds));
}

}  // namespace zerojit::bench
