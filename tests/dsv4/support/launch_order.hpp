// How a DSv4 GPU test launches the kernel under test: alone, as most tests do, or right behind a
// producer kernel that writes the kernel's inputs, with and without programmatic dependent
// launch (PDL). The PDL tests run every kernel the three ways and hold all three to the same
// reference.
//
// The producer releases its dependents first thing, spins for about 30 µs and only then writes
// the inputs it was given (until then they hold 0xFF poison): with PDL the kernel under test
// starts while the producer spins, so a kernel that read one of those inputs before its
// grid-dependency wait, or wrote anything before it, would read poison or race the producer.
// With a relay between them (a kernel that keeps the protocol of zerojit/device/
// grid_dependency.cuh: releases first, waits on its way out) the kernel under test starts while
// the producer spins, two kernels back: its wait must then hold until the producer, not only
// the relay's start, is done, which is what the DSv4 kernels' early release relies on.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "zerojit/testing.hpp"
#include "zerojit/zerojit.hpp"

namespace zerojit::dsv4::testing {

enum class LaunchOrder {
  alone,               // the null stream, no producer, no PDL
  after_producer,      // behind the producer on a stream, launched without PDL
  pdl_after_producer,  // behind the producer on a stream, launched with PDL
  pdl_after_relay,     // behind the producer and a relay kernel, all three launched with PDL
};

std::string_view to_string(LaunchOrder order);

inline constexpr LaunchOrder kLaunchOrders[] = {LaunchOrder::alone, LaunchOrder::after_producer,
                                                LaunchOrder::pdl_after_producer,
                                                LaunchOrder::pdl_after_relay};

// The inputs the producer writes, and the launch behind it.
class Producer {
 public:
  // Remembers that the device bytes [destination, + bytes) must become `source` (host bytes) by
  // the producer, and poisons them now. In a dry run (host memory) the "producer" is a memcpy.
  void add(void* destination, const std::uint8_t* source, std::size_t bytes, bool device);

  // alone: launch(nullptr, false). Otherwise, on a fresh stream: the producer (and the relay,
  // for pdl_after_relay), then launch(stream, pdl) with pdl set for the PDL orders, and a wait
  // for the stream. (The caller waits for the device, as after any launch.)
  void run(LaunchOrder order, const std::function<void(cuda::Stream, bool)>& launch);

 private:
  struct Copy {
    void* destination = nullptr;
    std::unique_ptr<zerojit::testing::DeviceBuffer> staging;  // device: the real bytes
    std::vector<std::uint8_t> host;                           // dry run: the real bytes
    std::size_t bytes = 0;
  };
  std::vector<Copy> copies_;
};

}  // namespace zerojit::dsv4::testing
