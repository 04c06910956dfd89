// The parts of the zerojit._core extension module, each bound by its own translation unit.
#pragma once

#include <pybind11/pybind11.h>

#include <cstddef>
#include <functional>
#include <vector>

#include "zerojit/registry.hpp"

namespace zerojit::python {

struct DynamicRegistration;

// Maps zerojit's C++ exceptions onto the Python classes of zerojit._errors (InvalidArgument is
// a ValueError, RuntimeJitError a zerojit.Error, ...), carrying their fields as attributes.
void register_errors(pybind11::module_& module);

// The DSv4 kernels' CPU references on host tensors (zerojit._core.reference).
void bind_kernels(pybind11::module_& module);

// The DSv4 ops' launch path (zerojit._core.fast): METH_FASTCALL functions, fast_ops.cpp.
void bind_fast_ops(pybind11::module_& module);

// Launch loops timed in C++ (zerojit._core.benchmark), for the Python host-cost benchmark.
void bind_benchmark(pybind11::module_& module);

// Configurations, manifests, warmup, the JIT monitor and the disk cache.
void bind_runtime(pybind11::module_& module);

// Python kernels (zerojit.Kernel): their core handle, spaces, launch path and the engine hooks
// (log and monitor bridges), py_bindings.cpp.
void bind_py_kernels(pybind11::module_& module);

// Registered Python kernels as warmup takes them: a list of (kernel, tag, slots, dead axes) or
// None.
std::vector<DynamicRegistration> dynamic_registrations(const pybind11::object& items);

// A warmup progress callback for WarmupOptions::on_progress (nullptr for None): calls
// callable(kernel, key, origin, seconds, error, done, total) with the GIL taken, from the
// worker that finished the key.
std::function<void(const WarmupProgress&)> progress_bridge(const pybind11::object& callable);

}  // namespace zerojit::python
