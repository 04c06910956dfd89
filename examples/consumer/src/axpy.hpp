// The consumer's kernel owner on zerojit's contract: a compile key, descriptors, the dispatch
// from descriptors to key (the one place the specialization is decided), the program, the
// launch plan and the warmup space, plus the configuration that says what to warm.
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

struct AxpyDescriptors {
  zerojit::TensorDesc x;
  zerojit::TensorDesc y;

  static constexpr auto fields() {
    return std::tuple{zerojit::field("x", &AxpyDescriptors::x),
                      zerojit::field("y", &AxpyDescriptors::y)};
  }
};

struct AxpyArgs {
  zerojit::TensorRef x;
  zerojit::TensorRef y;
  double alpha = 1.0;

  AxpyDescriptors descriptors() const { return {x.desc, y.desc}; }
};

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
  zerojit::LaunchSpec<AxpyKey> plan(const AxpyArgs& args) const;
  zerojit::WarmupSpace<AxpyDescriptors> warmup_space(const AxpyConfig& config) const;

 private:
  friend JitKernel;
  AxpyKernel() : JitKernel("consumer.axpy", embedded_files()) {}
};

// Registers what `config` can reach: the kernel with its warmup space.
void register_warmup(zerojit::WarmupRegistry& registry, const AxpyConfig& config);

}  // namespace consumer
