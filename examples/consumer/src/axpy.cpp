#include "axpy.hpp"

#include <string>

#include "axpy_params.h"

namespace consumer {

using zerojit::DType;

AxpyKey AxpyKernel::dispatch(const AxpyDescriptors& d) const {
  if (d.x.dtype != DType::f32 && d.x.dtype != DType::f64 && d.x.dtype != DType::bf16) {
    checks().fail(
        "x", "dtype must be f32, f64 or bf16, got " + std::string(zerojit::dtype_name(d.x.dtype)));
  }
  return AxpyKey{d.x.dtype, d.x.ndim == 1 && d.x.size(0) % 4 == 0 ? 4 : 1};
}

zerojit::Program AxpyKernel::program(const AxpyKey& key) const {
  return make_program(key, "axpy.cu", instantiate("consumer::axpy_kernel", key));
}

zerojit::LaunchSpec<AxpyKey> AxpyKernel::plan(const AxpyKey& key, const AxpyArgs& args) const {
  const zerojit::ArgumentChecks check = checks();
  check.tensor(args.x.desc, "x", {DType::f32, DType::f64, DType::bf16}, 1);
  check.tensor(args.y.desc, "y", {DType::f32, DType::f64, DType::bf16}, 1);
  if (args.x.desc.dtype != args.y.desc.dtype) check.fail("y", "dtype must match x's");
  check.size(args.y.desc, "y", 0, args.x.desc.size(0));
  zerojit::LaunchSpec<AxpyKey> spec;
  spec.key = key;
  spec.device = args.x.desc.device.ordinal;
  const long long count = args.x.desc.size(0);
  const long long per_block = static_cast<long long>(kAxpyThreads) * spec.key.unroll;
  spec.geometry.grid.x = static_cast<std::uint32_t>((count + per_block - 1) / per_block);
  spec.geometry.block.x = kAxpyThreads;
  spec.args.push(AxpyParams{args.x.data, args.y.data, count, args.alpha});
  return spec;
}

zerojit::WarmupSpace<AxpyDescriptors> AxpyKernel::warmup_space(const AxpyConfig& config) const {
  using zerojit::TensorDesc;
  zerojit::WarmupSpace<AxpyDescriptors> space(AxpyDescriptors{
      TensorDesc::contiguous(DType::f32, {1024}), TensorDesc::contiguous(DType::f32, {1024}), 1.0});
  space
      .choices("dtype", config.dtypes,
               [](AxpyDescriptors& d, DType v) { d.x.dtype = d.y.dtype = v; })
      .choices("length", config.lengths,
               [](AxpyDescriptors& d, std::int64_t v) { d.x.shape[0] = d.y.shape[0] = v; });
  return space;
}

void register_warmup(zerojit::WarmupRegistry& registry, const AxpyConfig& config) {
  auto& kernel = AxpyKernel::instance();
  registry.add(kernel, "axpy", [&kernel, config] { return kernel.warmup_space(config); });
}

}  // namespace consumer
