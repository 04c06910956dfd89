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
  cuda::Function function = nullptr;
  cuda::Module module = nullptr;
  int device = 0;
  int param_count = -1;  // -1: the driver cannot say (no cuFuncGetParamInfo); no check then
  std::array<std::uint32_t, kMaxKernelParams> param_sizes{};
  // What the compiler fixed about the launch (its launch record, launch_record.hpp), for a
  // language whose compiler decides it (Triton); left as is for CUDA C++, whose plan decides.
  std::uint32_t block_threads = 0;
  std::uint32_t shared_bytes = 0;
  std::uint32_t grid_x_multiplier = 1;       // Triton's num_ctas
  std::uint32_t trailing_null_pointers = 0;  // Triton's scratch parameters, passed null
  LaunchAttributes attributes;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;
  virtual int device_count() = 0;
  // The NVRTC target for a device, e.g. "sm_90a".
  virtual std::string target_arch(int device) = 0;
  // Loads the artifact on the device and resolves `lowered_name` eagerly (no lazy loading
  // left for the first launch); a Triton artifact's launch record fills in what its compiler
  // fixed. The module stays loaded for the life of the process.
  virtual LoadedFunction load(const CompiledArtifact& artifact, std::string_view lowered_name,
                              int device) = 0;
  virtual bool is_capturing(cuda::Stream stream) = 0;
  // Launches with cuLaunchKernel, or with cuLaunchKernelEx when the geometry carries launch
  // attributes.
  virtual void launch(const LoadedFunction& function, const LaunchGeometry& geometry,
                      const KernelArgs& args, cuda::Stream stream) = 0;
  // Runs the host entry a language's compiler exported (a CuTeDSL kernel: it computes its grid
  // and launches on the stream among its arguments) with its argument pointers, in order.
  virtual void run_host(const LoadedFunction& function, void** args, std::size_t count) {
    (void)function, (void)args, (void)count;
    throw Error("the " + std::string(name()) + " backend runs no host functions");
  }
};

// The CUDA driver backend (the default). Its methods throw UnavailableError without a driver.
std::shared_ptr<Backend> make_cuda_backend();

}  // namespace zerojit
