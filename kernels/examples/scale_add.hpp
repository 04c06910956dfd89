// The example kernel family: y = alpha * x + y, and an empty kernel. Small enough to read in
// one sitting, it shows everything a zerojit kernel owner defines (key, descriptors, dispatch,
// program, plan, warmup space); the core's tests and benchmarks run on it.
#pragma once

#include <tuple>

#include "zerojit/zerojit.hpp"

namespace zerojit::examples {

const EmbeddedFileSet& embedded_files();

struct ScaleAddKey {
  DType dtype = DType::f32;
  int vector_width = 1;

  static constexpr auto fields() {
    return std::tuple{field("dtype", &ScaleAddKey::dtype),
                      field("vector_width", &ScaleAddKey::vector_width)};
  }
  auto operator<=>(const ScaleAddKey&) const = default;
};

struct ScaleAddDescriptors {
  TensorDesc x;
  TensorDesc y;

  static constexpr auto fields() {
    return std::tuple{field("x", &ScaleAddDescriptors::x), field("y", &ScaleAddDescriptors::y)};
  }
};

struct ScaleAddArgs {
  TensorRef x;
  TensorRef y;
  double alpha = 1.0;
};

class ScaleAddKernel final : public JitKernel<ScaleAddKey, ScaleAddDescriptors> {
 public:
  static ScaleAddKernel& instance();

  // f32 or f64; 4-wide when the length is a multiple of 4 and both bases are 16-byte aligned.
  ScaleAddKey dispatch(const ScaleAddDescriptors& descriptors) const override;
  Program program(const ScaleAddKey& key) const override;

  // Validates the arguments (dtype, shape, contiguity, device) and builds the launch.
  LaunchSpec<ScaleAddKey> plan(const ScaleAddArgs& args) const;
  // Plans and launches on the tensors' device.
  void operator()(const ScaleAddArgs& args, cuda::Stream stream = nullptr);

  // Both dtypes, a length that allows the 4-wide path and one that does not, aligned and
  // unaligned bases.
  WarmupSpace<ScaleAddDescriptors> warmup_space() const;

 private:
  ScaleAddKernel() : JitKernel("examples.scale_add") {}
};

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

// A kernel that does nothing, for measuring what a launch through zerojit costs.
class EmptyKernel final : public JitKernel<EmptyKey, EmptyDescriptors> {
 public:
  static EmptyKernel& instance();

  EmptyKey dispatch(const EmptyDescriptors& descriptors) const override;
  Program program(const EmptyKey& key) const override;
  LaunchSpec<EmptyKey> plan(int block_threads) const;
  void operator()(int block_threads, LaunchTarget target) {
    const EmptyDescriptors descriptors{block_threads};
    launch(plan(block_threads), target, &descriptors);
  }

 private:
  EmptyKernel() : JitKernel("examples.empty") {}
};

// Registers both example kernels with their warmup spaces: the built-in set `zerojit warmup
// --examples` compiles.
void register_examples(WarmupRegistry& registry);

}  // namespace zerojit::examples
