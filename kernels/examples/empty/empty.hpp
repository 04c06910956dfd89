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

// The call's arguments (zerojit/arguments.hpp): the block size alone, there being nothing to
// compute.
template <class Tensor>
struct EmptyArguments {
  int block_threads = 32;

  static constexpr auto fields() {
    return std::tuple{scalar("block_threads", &EmptyArguments::block_threads)};
  }
};
using EmptyArgs = EmptyArguments<TensorRef>;
using EmptyDescriptors = EmptyArguments<TensorDesc>;

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
  // One block of block_threads threads.
  LaunchSpec<EmptyKey> plan(const EmptyKey& key, const EmptyArgs& args) const;
  WarmupSpace<EmptyDescriptors> warmup_space(const EmptyGate& gate) const;

  // Launches one block on an explicit target (the benchmarks' loop).
  void operator()(int block_threads, LaunchTarget target) {
    const EmptyArgs args{block_threads};
    const EmptyDescriptors descriptors{block_threads};
    launch(launch_spec(args), target, &descriptors);
  }

 private:
  friend JitKernel;
  EmptyKernel() : JitKernel("examples.empty", embedded_files()) {}
};

}  // namespace zerojit::examples
