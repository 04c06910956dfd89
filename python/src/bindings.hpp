// The parts of the zerojit._core extension module, each bound by its own translation unit.
#pragma once

#include <pybind11/pybind11.h>

namespace zerojit::python {

// Maps zerojit's C++ exceptions onto the Python classes of zerojit._errors (InvalidArgument is
// a ValueError, RuntimeJitError a zerojit.Error, ...), carrying their fields as attributes.
void register_errors(pybind11::module_& module);

// The DSv4 kernels (launch on a device, or run the CPU reference on host tensors).
void bind_kernels(pybind11::module_& module);

// Configurations, manifests, warmup, the JIT monitor and the disk cache.
void bind_runtime(pybind11::module_& module);

}  // namespace zerojit::python
