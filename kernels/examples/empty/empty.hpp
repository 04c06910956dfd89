// A kernel that does nothing, for measuring what a launch through zerojit costs.
#pragma once

#include <tuple>

#include "examples/embedded.hpp"
#include "zerojit/kernel.hpp"

namespace zerojit::examples {

struct EmptyKey {
  int block_threads = 32;

  static constexpr auto fields() {
    return std::tuple{field("block_threads", &EmptyKey::block_threads)};
  }
  auto operator<=>(const EmptyKey&) const = default;
};

struct EmptyDescriptors {
  int block_threads = 32;

  static constexpr auto fields() {
    return std::tuple{field("block_threads", &EmptyDescriptors::block_threads)};
  }
};

// The example family warms one block size.
struct EmptyGate {
  int block_threads = 32;

  static constexpr auto fields() {
    return std::tuple{field("block_threads", &EmptyGate::block_threads)};
  }
};

class EmptyKernel final : public JitKernel<EmptyKernel, EmptyKey, EmptyDescriptors> {
 public:
  EmptyKey dispatch(const EmptyDescriptors& descriptors) const override;
  Program program(const EmptyKey& key) const override;
  LaunchSpec<EmptyKey> plan(int block_threads) const;
  WarmupSpace<EmptyDescriptors> warmup_space(const EmptyGate& gate) const;

  // Launches one block on an explicit target (the benchmarks' loop).
  void operator()(int block_threads, LaunchTarget target) {
    const EmptyDescriptors descriptors{block_threads};
    launch(plan(block_threads), target, &descriptors);
  }

 private:
  friend JitKernel;
  EmptyKernel() : JitKernel("examples.empty", embedded_files()) {}
};

}  // namespace zerojit::examples
