// The CUDA driver implementation of Backend.
#include <string>

#include <map>
#include <mutex>

#include "zerojit/backend.hpp"
#include "zerojit/cutedsl_runtime.hpp"
#include "zerojit/error.hpp"
#include "zerojit/launch_record.hpp"

namespace zerojit {
namespace {

constexpr std::uint32_t kDefaultSharedLimit = 48 * 1024;

// What a Triton compiler fixed (launch_record.hpp) onto the loaded function, with the function
// attributes the launch will need set now, at load time, never on the hot path.
void apply_launch_record(const CompiledArtifact& artifact, LoadedFunction& loaded) {
  const LaunchRecord record = decode_launch_record(artifact.launch_record, artifact.kernel_name);
  adopt_launch_record(record, artifact.kernel_name + " [" + artifact.key_text + "]", loaded);
  const cuda::DriverApi& api = cuda::driver();
  if (record.shared_bytes > kDefaultSharedLimit) {
    cuda::check(
        api.cuFuncSetAttribute(loaded.function, cuda::kFuncAttributeMaxDynamicSharedSizeBytes,
                               static_cast<int>(record.shared_bytes)),
        "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES) for " + artifact.kernel_name);
  }
  if (record.cluster_ctas > 8) {  // past the portable cluster size
    cuda::check(
        api.cuFuncSetAttribute(loaded.function, cuda::kFuncAttributeNonPortableClusterSizeAllowed,
                               1),
        "cuFuncSetAttribute(NON_PORTABLE_CLUSTER_SIZE_ALLOWED) for " + artifact.kernel_name);
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
    if (artifact.language == Language::cutedsl)
      return load_host_object(artifact, lowered_name, device);
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
    if (artifact.language == Language::triton) apply_launch_record(artifact, loaded);
    return loaded;
  }

  bool is_capturing(cuda::Stream stream) override { return cuda::stream_is_capturing(stream); }

  void run_host(const LoadedFunction& function, void** args, std::size_t count) override {
    cutedsl::check(cutedsl::runtime().run(reinterpret_cast<void*>(function.function), args, count),
                   "CuteDSLRT_Function_Run");
  }

  // A CuTeDSL entry: its host object loaded by the CuTeDSL runtime, which loads the object's CUDA
  // library as it does (the first load of an identity), its entry function resolved, which
  // loads the CUDA module (CuteDSLRT_Module_Get_Function), with the device's context current.
  // One module per identity for the process, shared by the devices.
  LoadedFunction load_host_object(const CompiledArtifact& artifact, std::string_view entry,
                                  int device) {
    const cutedsl::RuntimeApi& runtime = cutedsl::runtime();
    const cuda::ScopedDevice scope(device);
    const std::string what = "kernel " + artifact.kernel_name + " [" + artifact.key_text + "]";
    std::lock_guard lock(host_objects_mutex_);
    void*& module = host_modules_[artifact.identity];
    if (module == nullptr) {
      cutedsl::check(runtime.create_module(
                         &module, reinterpret_cast<const unsigned char*>(artifact.cubin.data()),
                         artifact.cubin.size(), nullptr, 0),
                     "loading the host object of " + what);
    }
    void* function = nullptr;
    const std::string prefix(entry);
    cutedsl::check(runtime.get_function(&function, module, prefix.c_str()),
                   "resolving " + prefix + " of " + what);
    LoadedFunction loaded;
    loaded.function = reinterpret_cast<cuda::Function>(function);
    loaded.module = reinterpret_cast<cuda::Module>(module);
    loaded.device = device;
    return loaded;
  }

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

 private:
  std::mutex host_objects_mutex_;
  std::map<ProgramIdentity, void*> host_modules_;  // loaded for the life of the process
};

}  // namespace

std::shared_ptr<Backend> make_cuda_backend() { return std::make_shared<CudaBackend>(); }

}  // namespace zerojit
