// The CUDA driver implementation of Backend.
#include <string>

#include "zerojit/backend.hpp"
#include "zerojit/error.hpp"

namespace zerojit {
namespace {

constexpr std::uint32_t kDefaultSharedLimit = 48 * 1024;

// The function attributes what its compiler fixed (the launch record) needs, set at load time,
// never on the hot path.
void set_recorded_attributes(const LoadedFunction& loaded, const std::string& kernel) {
  const cuda::DriverApi& api = cuda::driver();
  if (loaded.shared_bytes > kDefaultSharedLimit) {
    cuda::check(
        api.cuFuncSetAttribute(loaded.function, cuda::kFuncAttributeMaxDynamicSharedSizeBytes,
                               static_cast<int>(loaded.shared_bytes)),
        "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES) for " + kernel);
  }
  if (loaded.attributes.cluster.x > 8) {  // past the portable cluster size
    cuda::check(api.cuFuncSetAttribute(loaded.function,
                                       cuda::kFuncAttributeNonPortableClusterSizeAllowed, 1),
                "cuFuncSetAttribute(NON_PORTABLE_CLUSTER_SIZE_ALLOWED) for " + kernel);
  }
}

// cuLaunchKernelEx with the geometry's attributes.
cuda::Result launch_with_attributes(const cuda::DriverApi& api, const LoadedFunction& function,
                                    const LaunchGeometry& geometry, void** params,
                                    cuda::Stream stream) {
  if (api.cuLaunchKernelEx == nullptr) {
    throw UnavailableError(
        "this CUDA driver has no cuLaunchKernelEx (CUDA 12.0 or later), which a "
        "launch with attributes (PDL, cooperative, cluster) needs");
  }
  const LaunchAttributes& wanted = geometry.attributes;
  std::array<cuda::LaunchAttribute, 4> attributes{};
  unsigned count = 0;
  if (wanted.programmatic_serialization) {
    attributes[count].id = cuda::kLaunchAttributeProgrammaticStreamSerialization;
    attributes[count++].value.flag = 1;
  }
  if (wanted.cooperative) {
    attributes[count].id = cuda::kLaunchAttributeCooperative;
    attributes[count++].value.flag = 1;
  }
  if (wanted.cluster.x != 0) {
    attributes[count].id = cuda::kLaunchAttributeClusterDimension;
    attributes[count++].value.cluster = {wanted.cluster.x, wanted.cluster.y, wanted.cluster.z};
    if (wanted.cluster_spread) {
      attributes[count].id = cuda::kLaunchAttributeClusterSchedulingPolicyPreference;
      attributes[count++].value.flag = cuda::kClusterSchedulingPolicySpread;
    }
  }
  const cuda::LaunchConfig config{
      geometry.grid.x,  geometry.grid.y,       geometry.grid.z, geometry.block.x,  geometry.block.y,
      geometry.block.z, geometry.shared_bytes, stream,          attributes.data(), count};
  return api.cuLaunchKernelEx(&config, function.function, params, nullptr);
}

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
    const cuda::ScopedDevice scope(device);  // the caller's thread keeps its context
    LoadedFunction loaded;
    loaded.device = device;
    const EntryKind& kind = entry_kind(artifact.language);
    if (kind.image == ImageForm::host_object) {
      // Its runtime loads the object's CUDA library and module (with this context current).
      loaded.function =
          reinterpret_cast<cuda::Function>(kind.host_runtime()->load(artifact, lowered_name));
      adopt_entry_kind(artifact, loaded);
      return loaded;
    }
    const cuda::DriverApi& api = cuda::driver();
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
    adopt_entry_kind(artifact, loaded);
    if (loaded.form == LaunchForm::recorded) set_recorded_attributes(loaded, artifact.kernel_name);
    return loaded;
  }

  bool is_capturing(cuda::Stream stream) override { return cuda::stream_is_capturing(stream); }

  void launch(const LoadedFunction& function, const LaunchGeometry& geometry,
              const KernelArgs& args, cuda::Stream stream) override {
    std::array<void*, kMaxKernelParams> pointers;
    args.fill_pointers(pointers);
    const cuda::DriverApi& api = cuda::driver();
    if (geometry.shared_bytes > kDefaultSharedLimit &&
        geometry.shared_bytes != function.shared_bytes) {
      cuda::check(
          api.cuFuncSetAttribute(function.function, cuda::kFuncAttributeMaxDynamicSharedSizeBytes,
                                 static_cast<int>(geometry.shared_bytes)),
          "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)");
    }
    if (geometry.attributes.any()) {
      const cuda::Result result =
          launch_with_attributes(api, function, geometry, pointers.data(), stream);
      if (result != cuda::kSuccess) cuda::check(result, "cuLaunchKernelEx");
      return;
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
