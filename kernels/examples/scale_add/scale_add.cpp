#include "examples/scale_add/scale_add.hpp"

#include "examples/scale_add/scale_add_params.h"

namespace zerojit::examples {

ScaleAddKey ScaleAddKernel::dispatch(const ScaleAddDescriptors& d) const {
  if (d.x.dtype != DType::f32 && d.x.dtype != DType::f64) {
    checks().fail("x", "dtype must be f32 or f64, got " + std::string(dtype_name(d.x.dtype)));
  }
  const bool wide =
      d.x.ndim == 1 && d.x.size(0) % 4 == 0 && d.x.alignment >= 16 && d.y.alignment >= 16;
  return ScaleAddKey{d.x.dtype, wide ? 4 : 1};
}

Program ScaleAddKernel::program(const ScaleAddKey& key) const {
  if (key.dtype != DType::f32 && key.dtype != DType::f64) {
    throw Error("kernel " + name() + ": no program for dtype " +
                std::string(dtype_name(key.dtype)));
  }
  return make_program(key, "examples/scale_add/scale_add.cu",
                      instantiate("zj::examples::scale_add_kernel", key));
}

LaunchSpec<ScaleAddKey> ScaleAddKernel::plan(const ScaleAddKey& key,
                                             const ScaleAddArgs& args) const {
  const ArgumentChecks check = checks();
  for (const auto& [tensor, argument] : {std::pair{&args.x.desc, "x"}, {&args.y.desc, "y"}}) {
    check.tensor(*tensor, argument, {DType::f32, DType::f64}, 1);
    if (tensor->size(0) > 1 && tensor->stride(0) != 1) {
      check.fail(argument, "must be contiguous, got " + to_string(*tensor));
    }
  }
  if (args.x.desc.dtype != args.y.desc.dtype) check.fail("y", "dtype must match x's");
  check.size(args.y.desc, "y", 0, args.x.desc.size(0));
  check.same_device(args.y.desc, "y", args.x.desc);

  LaunchSpec<ScaleAddKey> spec;
  spec.key = key;
  spec.device = args.x.desc.device.ordinal;
  const long long count = args.x.desc.size(0);
  const long long per_block =
      static_cast<long long>(zj::examples::kScaleAddThreads) * spec.key.vector_width;
  spec.geometry.grid.x = static_cast<std::uint32_t>((count + per_block - 1) / per_block);
  spec.geometry.block.x = zj::examples::kScaleAddThreads;
  spec.args.push(zj::examples::ScaleAddParams{args.x.data, args.y.data, count, args.alpha});
  return spec;
}

WarmupSpace<ScaleAddDescriptors> ScaleAddKernel::warmup_space(const ScaleAddGate&) const {
  WarmupSpace<ScaleAddDescriptors> space(ScaleAddDescriptors{
      TensorDesc::contiguous(DType::f32, {1024}), TensorDesc::contiguous(DType::f32, {1024}), 1.0});
  space
      .choices("dtype", std::vector<DType>{DType::f32, DType::f64},
               [](ScaleAddDescriptors& d, DType v) { d.x.dtype = d.y.dtype = v; })
      .choices("length", std::vector<std::int64_t>{1023, 1024},
               [](ScaleAddDescriptors& d, std::int64_t v) { d.x.shape[0] = d.y.shape[0] = v; })
      .choices("alignment", std::vector<std::int64_t>{4, 256},
               [](ScaleAddDescriptors& d, std::int64_t v) { d.x.alignment = d.y.alignment = v; });
  return space;
}

}  // namespace zerojit::examples
