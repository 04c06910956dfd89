// zerojit._core.benchmark: launch loops timed in C++, the floor the Python benchmark
// (bench/python_host_cost.py) measures its calls against: the raw driver launch of the example
// empty kernel, and the same kernel through zerojit's hit path (executor lookup, argument
// check, launch). Not for use outside benchmarks.
#include <pybind11/pybind11.h>

#include <chrono>
#include <cstdint>

#include "bindings.hpp"
#include "examples/empty/empty_params.h"
#include "examples/examples.hpp"

namespace py = pybind11;

namespace zerojit::python {
namespace {

// Seconds per launch of `count` empty-kernel launches on `stream` of `device`, host time.
double launch_loop(const std::string& through, int count, std::uintptr_t stream, int device) {
  auto& kernel = examples::EmptyKernel::instance();
  const cuda::ScopedDevice scope(device);
  const LaunchTarget target{device, reinterpret_cast<cuda::Stream>(stream)};
  kernel(32, target);  // compile and load outside the loop
  const auto spec = kernel.launch_spec(examples::EmptyArgs{32});
  const LoadedFunction& function = kernel.get_or_compile(spec.key, target);
  zj::examples::EmptyParams params{nullptr, nullptr, 0, 0.0};
  void* args[] = {&params};
  const cuda::DriverApi& api = cuda::driver();
  const bool raw = through == "driver";
  if (!raw && through != "zerojit") {
    throw InvalidArgument("benchmark.launch_loop", "through", "must be 'driver' or 'zerojit'");
  }
  py::gil_scoped_release release;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < count; ++i) {
    if (raw) {
      api.cuLaunchKernel(function.function, 1, 1, 1, 32, 1, 1, 0, target.stream, args, nullptr);
    } else {
      kernel(32, target);
    }
  }
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  return elapsed.count() / count;
}

}  // namespace

void bind_benchmark(py::module_& module) {
  py::module_ benchmark =
      module.def_submodule("benchmark", "launch loops timed in C++, for bench/python_host_cost.py");
  benchmark.def("launch_loop", &launch_loop, py::arg("through"), py::arg("count"),
                py::arg("stream"), py::arg("device"));
}

}  // namespace zerojit::python
