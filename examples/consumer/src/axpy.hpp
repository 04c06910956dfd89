// The consumer's kernel owner on zerojit's contract: a compile key, the arguments declared once
// (the call and its descriptors), the dispatch from descriptors to key (the one place the
// specialization is decided), the program, the plan of the key dispatch chose and the warmup
// space, plus the configuration that says what to warm.
#pragma once

#include <tuple>
#include <vector>

#include "zerojit/zerojit.hpp"

namespace consumer {

// The kernel sources, embedded by zerojit_embed() (CMakeLists.txt).
const zerojit::EmbeddedFileSet& embedded_files();

struct AxpyKey {
  zerojit::DType dtype = zerojit::DType::f32;
  int unroll = 1;

  static constexpr auto fields() {
    return std::tuple{zerojit::field("dtype", &AxpyKey::dtype),
                      zerojit::field("unroll", &AxpyKey::unroll)};
  }
  auto operator<=>(const AxpyKey&) const = default;
};

// The call's arguments, declared once (zerojit/arguments.hpp): with TensorRef what a caller
// passes (AxpyArgs), with TensorDesc the descriptors dispatch decides from (AxpyDescriptors).
template <class Tensor>
struct AxpyArguments {
  Tensor x;  // f32 | f64 | bf16 [n]
  Tensor y;  // x's dtype [n]; written
  double alpha = 1.0;

  static constexpr auto fields() {
    using A = AxpyArguments;
    return std::tuple{zerojit::input("x", &A::x), zerojit::output("y", &A::y),
                      zerojit::scalar("alpha", &A::alpha)};
  }
};
using AxpyArgs = AxpyArguments<zerojit::TensorRef>;
using AxpyDescriptors = AxpyArguments<zerojit::TensorDesc>;

// What a serving configuration can hand the kernel: which dtypes, and the lengths of x.
struct AxpyConfig {
  std::vector<zerojit::DType> dtypes{zerojit::DType::f32, zerojit::DType::f64,
                                     zerojit::DType::bf16};
  std::vector<std::int64_t> lengths{1024};
};

class AxpyKernel final : public zerojit::JitKernel<AxpyKernel, AxpyKey, AxpyDescriptors> {
 public:
  // f32, f64 or bf16; unrolled by 4 when the length is a multiple of 4.
  AxpyKey dispatch(const AxpyDescriptors& descriptors) const override;
  zerojit::Program program(const AxpyKey& key) const override;
  // Validates the arguments and builds the launch of `key`, which the base's dispatch chose.
  zerojit::LaunchSpec<AxpyKey> plan(const AxpyKey& key, const AxpyArgs& args) const;
  zerojit::WarmupSpace<AxpyDescriptors> warmup_space(const AxpyConfig& config) const;

 private:
  friend JitKernel;
  AxpyKernel() : JitKernel("consumer.axpy", embedded_files()) {}
};

// Registers what `config` can reach: the kernel with its warmup space.
void register_warmup(zerojit::WarmupRegistry& registry, const AxpyConfig& config);

}  // namespace consumer
