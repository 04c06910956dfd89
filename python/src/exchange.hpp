// The fast way in for framework tensors: DLPack 1.2's exchange API (dlpack_abi.hpp), looked up
// once per tensor type and cached, so that a launch reads each tensor's pointer, shape and
// strides, the framework's current stream and new output tensors through plain C calls.
// PyTorch publishes it (`torch.Tensor.__dlpack_c_exchange_api__`); types without it (numpy,
// CuPy, JAX, older PyTorch) go through the DLPack capsule protocol instead (dlpack.hpp).
//
// Every function here needs the GIL.
#pragma once

#include <Python.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "zerojit/tensor.hpp"

namespace zerojit::python {

namespace dlpack {
struct DLPackExchangeAPI;
}

// The exchange API of `object`'s type, or nullptr when the type publishes none (or one of a
// DLPack major version this module does not read). Cached per type: after the first lookup
// of a type this is a few pointer comparisons.
const dlpack::DLPackExchangeAPI* exchange_api_of(PyObject* object);

// The tensor `object` viewed through `api` (its dltensor_from_py_object_no_sync). Throws
// zerojit::InvalidArgument naming kernel and argument for what zerojit cannot take, and
// pybind11::error_already_set when the producer itself refused.
TensorRef exchange_tensor_ref(const dlpack::DLPackExchangeAPI& api, PyObject* object,
                              std::string_view kernel, std::string_view argument);

// The producer framework's current stream of a CUDA device (PyTorch: torch.cuda.current_stream).
std::uintptr_t exchange_current_stream(const dlpack::DLPackExchangeAPI& api, int device);

// A new, uninitialized tensor of the producer framework (a torch.Tensor for PyTorch's API):
// dtype, shape and device as given, compact. Returns a new reference.
PyObject* exchange_allocate(const dlpack::DLPackExchangeAPI& api, DType dtype,
                            std::span<const std::int64_t> shape, Device device,
                            std::string_view kernel, std::string_view argument);

}  // namespace zerojit::python
