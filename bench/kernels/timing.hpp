// Timing one launch with CUDA events, the host's launch cost hidden behind a GPU spin.
#pragma once

#include <cstdint>
#include <functional>
#include <tuple>
#include <vector>

#include "zerojit/zerojit.hpp"

namespace zerojit::bench {

struct SpinKey {
  int threads = 1;
  static constexpr auto fields() { return std::tuple{field("threads", &SpinKey::threads)}; }
  auto operator<=>(const SpinKey&) const = default;
};

struct SpinDescriptors {
  int threads = 1;
  static constexpr auto fields() { return std::tuple{field("threads", &SpinDescriptors::threads)}; }
};

// Spins one thread for a number of SM clock cycles and touches no memory: enqueued before each
// timed launch, so that the host enqueues the start event and the launch while the GPU is still
// busy and the events time the kernel alone.
class SpinKernel final : public JitKernel<SpinKernel, SpinKey, SpinDescriptors> {
 public:
  SpinKernel();

  SpinKey dispatch(const SpinDescriptors& descriptors) const override {
    return SpinKey{descriptors.threads};
  }
  Program program(const SpinKey& key) const override;
  void operator()(long long cycles, cuda::Stream stream);
};

struct CopyKey {
  int vectors_per_thread = 4;  // 16-byte loads each thread has in flight before it stores
  static constexpr auto fields() {
    return std::tuple{field("vectors_per_thread", &CopyKey::vectors_per_thread)};
  }
  auto operator<=>(const CopyKey&) const = default;
};

struct CopyDescriptors {
  int vectors_per_thread = 4;
  static constexpr auto fields() {
    return std::tuple{field("vectors_per_thread", &CopyDescriptors::vectors_per_thread)};
  }
};

// A plain streaming copy on the SMs: the yardstick a memory-bound kernel of the same bytes is
// held to. (A cuMemcpyDtoDAsync captured in a graph becomes a copy-engine node, which moves
// the same bytes 30-50 % slower than a kernel does, so it cannot serve as that yardstick.)
class CopyKernel final : public JitKernel<CopyKernel, CopyKey, CopyDescriptors> {
 public:
  CopyKernel();
  CopyKey dispatch(const CopyDescriptors& descriptors) const override {
    return CopyKey{descriptors.vectors_per_thread};
  }
  Program program(const CopyKey& key) const override;
  // Copies `bytes` (a multiple of 16, both addresses 16-byte aligned).
  void operator()(cuda::DevicePtr destination, cuda::DevicePtr source, std::size_t bytes,
                  cuda::Stream stream);
};

struct Measurement {
  double median_us = 0.0;
  double min_us = 0.0;
  int repetitions = 0;
};

using Launch = std::function<void(cuda::Stream)>;

// Device 0, made current, as the benchmarks time on it: what it is, its SM clock in kHz (0
// where the driver does not say) and a non-blocking stream of its own (the caller destroys it).
struct TimedDevice {
  cuda::DeviceInfo info;
  int clock_khz = 0;
  cuda::Stream stream = nullptr;
};
TimedDevice open_timed_device();

class Timer {
 public:
  // `l2_bytes` sizes the flush of measure_graph; a `clock_khz` of 0 (unknown) spins as if at 2 GHz.
  Timer(cuda::Stream stream, double clock_khz, std::int64_t l2_bytes);
  ~Timer();
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;

  // Warms up (the first launch of each set compiles and loads), then times `repetitions`
  // launches, rotating among the sets. `flush`: an L2 flush before each spin (the chain
  // benchmark's eager timing, whose decode-sized inputs would otherwise stay in L2).
  Measurement measure(const std::vector<Launch>& launches, int repetitions, bool flush = false);

  // Device time as a CUDA graph replays it: one graph holding one launch per input set (no
  // host gaps between them), each replay after an L2 flush (a write of 4x the L2), timed with
  // events; the figure is a replay's time over the launches it holds (its median and minimum
  // over `repetitions` replays). The method of vLLM's kernel benchmarks (do_bench over a graph).
  Measurement measure_graph(const std::vector<Launch>& launches, int repetitions);

 private:
  void flush_l2();

  cuda::Stream stream_;
  double clock_khz_;
  SpinKernel spin_;
  cuda::DevicePtr flush_buffer_ = 0;
  std::size_t flush_bytes_ = 0;
};

}  // namespace zerojit::bench
