// The parts of the zerojit._core extension module, each bound by its own translation unit.
#pragma once

#include <pybind11/pybind11.h>

namespace zerojit::python {

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

}  // namespace zerojit::python
