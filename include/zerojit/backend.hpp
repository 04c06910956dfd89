// The device side of zerojit behind one interface: loading a compiled module on a device,
// asking whether a stream is capturing, launching. The CUDA driver implements it; tests
// install a recording backend to check launches on a machine without a GPU.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "zerojit/compiler.hpp"
#include "zerojit/cuda.hpp"
#include "zerojit/error.hpp"
#include "zerojit/launch.hpp"

namespace zerojit {

// A kernel function loaded on one device, with the parameter sizes the launch check compares
// the packed arguments against.
struct LoadedFunction {
  cuda::Function function = nullptr;  // a host_object image's entry: what its runtime returned
  cuda::Module module = nullptr;
  int device = 0;
  int param_count = -1;  // -1: the driver cannot say (no cuFuncGetParamInfo); no check then
  std::array<std::uint32_t, kMaxKernelParams> param_sizes{};
  // How a call reaches the device, from the artifact's entry kind (language.hpp).
  LaunchForm form = LaunchForm::plan;
  HostObjectRuntime* host_runtime = nullptr;  // a host_entry function's runtime
  // What a compiler fixed about the launch (the entry kind's launch record), for the recorded
  // form; left as is where the plan or the host entry decides.
  std::uint32_t block_threads = 0;
  std::uint32_t shared_bytes = 0;
  std::uint32_t grid_x_multiplier = 1;       // the cluster size (Triton's num_ctas)
  std::uint32_t trailing_null_pointers = 0;  // parameters the compiler appended, passed null
  LaunchAttributes attributes;
};

// What a backend's load does for every entry kind after the image is loaded: the form and host
// runtime of its kind, and what its launch record fixes (EntryKind::adopt_record).
void adopt_entry_kind(const CompiledArtifact& artifact, LoadedFunction& function);

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;
  virtual int device_count() = 0;
  // The NVRTC target for a device, e.g. "sm_90a".
  virtual std::string target_arch(int device) = 0;
  // Loads the artifact on the device and resolves `lowered_name` eagerly (no lazy loading
  // left for the first launch), as its entry kind says (a cubin, or a host object its runtime
  // loads), then adopt_entry_kind. The module stays loaded for the life of the process.
  virtual LoadedFunction load(const CompiledArtifact& artifact, std::string_view lowered_name,
                              int device) = 0;
  virtual bool is_capturing(cuda::Stream stream) = 0;
  // Launches with cuLaunchKernel, or with cuLaunchKernelEx when the geometry carries launch
  // attributes.
  virtual void launch(const LoadedFunction& function, const LaunchGeometry& geometry,
                      const KernelArgs& args, cuda::Stream stream) = 0;
  // Runs the host entry a language's compiler exported (it computes its grid and launches on
  // the stream among its arguments) with its argument pointers, in order: by default through
  // the function's host runtime.
  virtual void run_host(const LoadedFunction& function, void** args, std::size_t count) {
    if (function.host_runtime == nullptr) {
      throw Error("the " + std::string(name()) + " backend has no host runtime for this function");
    }
    function.host_runtime->run(reinterpret_cast<void*>(function.function), args, count);
  }
};

// The CUDA driver backend (the default). Its methods throw UnavailableError without a driver.
std::shared_ptr<Backend> make_cuda_backend();

}  // namespace zerojit
