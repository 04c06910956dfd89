// y = alpha * x + y: the smallest complete kernel owner. It shows every part of the contract
// (key, arguments declared once, dispatch, program, plan(key, args), warmup space, gate) and the
// core's tests and benchmarks run on it.
#pragma once

#include <tuple>

#include "examples/embedded.hpp"
#include "zerojit/kernel.hpp"

namespace zerojit::examples {

struct ScaleAddKey {
  DType dtype = DType::f32;
  int vector_width = 1;

  static constexpr auto fields() {
    return std::tuple{field("dtype", &ScaleAddKey::dtype),
                      field("vector_width", &ScaleAddKey::vector_width)};
  }
  auto operator<=>(const ScaleAddKey&) const = default;
};

// The call's arguments, declared once (zerojit/arguments.hpp): with TensorRef what a caller
// passes, with TensorDesc the descriptors dispatch decides from.
template <class Tensor>
struct ScaleAddArguments {
  Tensor x;  // f32 | f64 [n], contiguous
  Tensor y;  // x's dtype [n], contiguous; written
  double alpha = 1.0;

  static constexpr auto fields() {
    using A = ScaleAddArguments;
    return std::tuple{input("x", &A::x), output("y", &A::y), scalar("alpha", &A::alpha)};
  }
};
using ScaleAddArgs = ScaleAddArguments<TensorRef>;
using ScaleAddDescriptors = ScaleAddArguments<TensorDesc>;

// What a configuration of the example family decides for scale_add: it always runs, over
// both dtypes, and there is nothing to parameterize.
struct ScaleAddGate {
  static constexpr auto fields() { return std::tuple{}; }
};

class ScaleAddKernel final : public JitKernel<ScaleAddKernel, ScaleAddKey, ScaleAddDescriptors> {
 public:
  // f32 or f64; 4-wide when the length is a multiple of 4 and both bases are 16-byte aligned.
  ScaleAddKey dispatch(const ScaleAddDescriptors& descriptors) const override;
  Program program(const ScaleAddKey& key) const override;
  // Validates the arguments (dtype, shape, contiguity, device) and builds the launch of `key`,
  // which the base's dispatch chose for them.
  LaunchSpec<ScaleAddKey> plan(const ScaleAddKey& key, const ScaleAddArgs& args) const;
  // Both dtypes, a length that allows the 4-wide path and one that does not, aligned and
  // unaligned bases.
  WarmupSpace<ScaleAddDescriptors> warmup_space(const ScaleAddGate& gate = {}) const;

 private:
  friend JitKernel;
  ScaleAddKernel() : JitKernel("examples.scale_add", embedded_files()) {}
};

}  // namespace zerojit::examples
