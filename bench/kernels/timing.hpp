// Timing one launch with CUDA events, the host's launch cost hidden behind a GPU spin.
#pragma once

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

struct Measurement {
  double median_us = 0.0;
  double min_us = 0.0;
  int repetitions = 0;
};

using Launch = std::function<void(cuda::Stream)>;

class Timer {
 public:
  Timer(cuda::Stream stream, double clock_khz) : stream_(stream), clock_khz_(clock_khz) {}

  // Warms up (the first launch of each set compiles and loads), then times `repetitions`
  // launches, rotating among the sets.
  Measurement measure(const std::vector<Launch>& launches, int repetitions);

 private:
  cuda::Stream stream_;
  double clock_khz_;
  SpinKernel spin_;
};

}  // namespace zerojit::bench
