#include "examples/scale_add.hpp"

#include "examples/scale_add_params.h"

namespace zerojit::examples {
namespace {

const char* kKernelName = "examples.scale_add";

void check_vector(const TensorDesc& desc, const char* argument) {
  if (desc.device.kind != DeviceKind::cuda) {
    throw InvalidArgument(kKernelName, argument,
                          "must be on a CUDA device, got " + to_string(desc.device));
  }
  if (desc.ndim != 1) {
    throw InvalidArgument(kKernelName, argument, "must be 1-D, got " + to_string(desc));
  }
  if (desc.size(0) > 1 && desc.stride(0) != 1) {
    throw InvalidArgument(kKernelName, argument, "must be contiguous, got " + to_string(desc));
  }
}

}  // namespace

ScaleAddKernel& ScaleAddKernel::instance() {
  static ScaleAddKernel kernel;
  return kernel;
}

ScaleAddKey ScaleAddKernel::dispatch(const ScaleAddDescriptors& d) const {
  if (d.x.dtype != DType::f32 && d.x.dtype != DType::f64) {
    throw InvalidArgument(kKernelName, "x",
                          "dtype must be f32 or f64, got " + std::string(dtype_name(d.x.dtype)));
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
  Program program;
  program.kernel_name = name();
  program.files = &embedded_files();
  program.source_path = "examples/scale_add.cu";
  program.name_expressions = {"zj::examples::scale_add_kernel<" + template_arguments(key) + ">"};
  program.key_text = describe(key);
  return program;
}

LaunchSpec<ScaleAddKey> ScaleAddKernel::plan(const ScaleAddArgs& args) const {
  check_vector(args.x.desc, "x");
  check_vector(args.y.desc, "y");
  if (args.x.desc.dtype != args.y.desc.dtype) {
    throw InvalidArgument(kKernelName, "y", "dtype must match x's");
  }
  if (args.x.desc.size(0) != args.y.desc.size(0)) {
    throw InvalidArgument(kKernelName, "y",
                          "length " + std::to_string(args.y.desc.size(0)) + " differs from x's " +
                              std::to_string(args.x.desc.size(0)));
  }
  if (args.x.desc.device != args.y.desc.device) {
    throw InvalidArgument(kKernelName, "y", "must be on x's device");
  }
  const ScaleAddDescriptors descriptors{args.x.desc, args.y.desc};
  LaunchSpec<ScaleAddKey> spec;
  spec.key = dispatch(descriptors);
  const long long count = args.x.desc.size(0);
  const long long per_block =
      static_cast<long long>(zj::examples::kScaleAddThreads) * spec.key.vector_width;
  spec.geometry.grid.x = static_cast<std::uint32_t>((count + per_block - 1) / per_block);
  spec.geometry.block.x = zj::examples::kScaleAddThreads;
  spec.args.push(zj::examples::ScaleAddParams{args.x.data, args.y.data, count, args.alpha});
  return spec;
}

void ScaleAddKernel::operator()(const ScaleAddArgs& args, cuda::Stream stream) {
  const ScaleAddDescriptors descriptors{args.x.desc, args.y.desc};
  launch(plan(args), LaunchTarget{args.x.desc.device.ordinal, stream}, &descriptors);
}

WarmupSpace<ScaleAddDescriptors> ScaleAddKernel::warmup_space() const {
  WarmupSpace<ScaleAddDescriptors> space(ScaleAddDescriptors{
      TensorDesc::contiguous(DType::f32, {1024}), TensorDesc::contiguous(DType::f32, {1024})});
  space
      .choices("dtype", std::vector<DType>{DType::f32, DType::f64},
               [](ScaleAddDescriptors& d, DType v) { d.x.dtype = d.y.dtype = v; })
      .choices("length", std::vector<std::int64_t>{1023, 1024},
               [](ScaleAddDescriptors& d, std::int64_t v) { d.x.shape[0] = d.y.shape[0] = v; })
      .choices("alignment", std::vector<std::int64_t>{4, 256},
               [](ScaleAddDescriptors& d, std::int64_t v) { d.x.alignment = d.y.alignment = v; });
  return space;
}

EmptyKernel& EmptyKernel::instance() {
  static EmptyKernel kernel;
  return kernel;
}

EmptyKey EmptyKernel::dispatch(const EmptyDescriptors& descriptors) const {
  if (descriptors.block_threads < 1 || descriptors.block_threads > 1024) {
    throw InvalidArgument(name(), "block_threads", "must be in [1, 1024]");
  }
  return EmptyKey{descriptors.block_threads};
}

Program EmptyKernel::program(const EmptyKey& key) const {
  Program program;
  program.kernel_name = name();
  program.files = &embedded_files();
  program.source_path = "examples/scale_add.cu";
  program.name_expressions = {"zj::examples::empty_kernel"};
  // The block size does not change the code; it is in the key so that the benchmark can show
  // several executors. It reaches the compiler as a macro so that identities differ.
  program.options = macro_definitions(key);
  program.key_text = describe(key);
  return program;
}

LaunchSpec<EmptyKey> EmptyKernel::plan(int block_threads) const {
  LaunchSpec<EmptyKey> spec;
  spec.key = dispatch(EmptyDescriptors{block_threads});
  spec.geometry.block.x = static_cast<std::uint32_t>(block_threads);
  spec.args.push(zj::examples::ScaleAddParams{nullptr, nullptr, 0, 0.0});
  return spec;
}

void register_examples(WarmupRegistry& registry) {
  ScaleAddKernel& scale_add = ScaleAddKernel::instance();
  registry.add(scale_add, "examples", [&scale_add] { return scale_add.warmup_space(); });
  EmptyKernel& empty = EmptyKernel::instance();
  registry.add(empty, "examples", [] {
    WarmupSpace<EmptyDescriptors> space;
    space.choices("block_threads", std::vector<int>{32},
                  [](EmptyDescriptors& d, int v) { d.block_threads = v; });
    return space;
  });
}

}  // namespace zerojit::examples
