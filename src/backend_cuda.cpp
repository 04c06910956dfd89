// The CUDA driver implementation of Backend.
#include <string>

#include "zerojit/backend.hpp"
#include "zerojit/error.hpp"

namespace zerojit {
namespace {

class CudaBackend final : public Backend {
 public:
  std::string_view name() const override { return "cuda"; }

  int device_count() override { return cuda::device_count(); }

  std::string target_arch(int device) override {
    const cuda::DeviceInfo info = cuda::device_info(device);
    return cuda::target_arch_for(info.compute_major, info.compute_minor);
  }

  LoadedFunction load(const CompiledArtifact& artifact, std::string_view lowered_name,
                      int device) override {
    const cuda::DriverApi& api = cuda::driver();
    const cuda::ScopedDevice scope(device);  // the caller's thread keeps its context
    LoadedFunction loaded;
    loaded.device = device;
    cuda::check(api.cuModuleLoadData(&loaded.module, artifact.cubin.data()),
                "cuModuleLoadData(" + artifact.kernel_name + ")");
    const std::string name(lowered_name);
    cuda::check(api.cuModuleGetFunction(&loaded.function, loaded.module, name.c_str()),
                "cuModuleGetFunction(" + artifact.kernel_name + ")");
    // Under lazy module loading (the default since CUDA 12.2) the function would be loaded at
    // its first launch: do it now, during warmup.
    if (api.cuFuncLoad != nullptr) cuda::check(api.cuFuncLoad(loaded.function), "cuFuncLoad");
    if (api.cuFuncGetParamInfo != nullptr) {
      loaded.param_count = 0;
      for (std::size_t index = 0; index < static_cast<std::size_t>(kMaxKernelParams); ++index) {
        std::size_t offset = 0, size = 0;
        if (api.cuFuncGetParamInfo(loaded.function, index, &offset, &size) != cuda::kSuccess) break;
        loaded.param_sizes[index] = static_cast<std::uint32_t>(size);
        ++loaded.param_count;
      }
    }
    return loaded;
  }

  bool is_capturing(cuda::Stream stream) override { return cuda::stream_is_capturing(stream); }

  void launch(const LoadedFunction& function, const LaunchGeometry& geometry,
              const KernelArgs& args, cuda::Stream stream) override {
    std::array<void*, kMaxKernelParams> pointers;
    args.fill_pointers(pointers);
    const cuda::DriverApi& api = cuda::driver();
    if (geometry.shared_bytes > 48 * 1024) {
      cuda::check(
          api.cuFuncSetAttribute(function.function, cuda::kFuncAttributeMaxDynamicSharedSizeBytes,
                                 static_cast<int>(geometry.shared_bytes)),
          "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)");
    }
    const cuda::Result result =
        api.cuLaunchKernel(function.function, geometry.grid.x, geometry.grid.y, geometry.grid.z,
                           geometry.block.x, geometry.block.y, geometry.block.z,
                           geometry.shared_bytes, stream, pointers.data(), nullptr);
    if (result != cuda::kSuccess) cuda::check(result, "cuLaunchKernel");
  }
};

}  // namespace

std::shared_ptr<Backend> make_cuda_backend() { return std::make_shared<CudaBackend>(); }

}  // namespace zerojit
