#include "exchange.hpp"

#include <pybind11/pybind11.h>

#include <array>
#include <cstdint>
#include <string>

#include "dlpack.hpp"
#include "dlpack_abi.hpp"
#include "zerojit/dtype.hpp"
#include "zerojit/error.hpp"

namespace py = pybind11;

namespace zerojit::python {
namespace {

using namespace dlpack;

// Tensor types seen so far and their API (null: none). A handful of types in any program, so
// a linear scan of a small array beats hashing; types stay alive as long as their tensors,
// and a Python type object is never reused while a tensor of it exists.
struct TypeEntry {
  PyTypeObject* type = nullptr;
  const DLPackExchangeAPI* api = nullptr;
};
constexpr std::size_t kCachedTypes = 16;
std::array<TypeEntry, kCachedTypes> g_types;
std::size_t g_type_count = 0;

constexpr std::uintptr_t kLowestPlausibleAddress = 1 << 16;

const DLPackExchangeAPI* look_up(PyTypeObject* type) {
  PyObject* attribute =
      PyObject_GetAttrString(reinterpret_cast<PyObject*>(type), "__dlpack_c_exchange_api__");
  if (attribute == nullptr) {
    PyErr_Clear();
    return nullptr;
  }
  const DLPackExchangeAPI* api = nullptr;
  if (PyCapsule_CheckExact(attribute)) {
    api = static_cast<const DLPackExchangeAPI*>(
        PyCapsule_GetPointer(attribute, kExchangeApiCapsuleName));
  } else if (PyLong_Check(attribute)) {
    // An integer holding the table's address, as the DLPack text also allows. No table lives
    // in the first pages of an address space: a small number is a mistake, not an address.
    void* address = PyLong_AsVoidPtr(attribute);
    if (reinterpret_cast<std::uintptr_t>(address) >= kLowestPlausibleAddress) {
      api = static_cast<const DLPackExchangeAPI*>(address);
    }
  }
  if (PyErr_Occurred()) PyErr_Clear();
  Py_DECREF(attribute);
  // Walk to a table of a major version this consumer reads.
  const DLPackExchangeAPIHeader* header = api != nullptr ? &api->header : nullptr;
  while (header != nullptr && header->version.major > kMaxDLPackMajor) header = header->prev_api;
  if (header == nullptr || header->version.major != kMaxDLPackMajor) return nullptr;
  api = reinterpret_cast<const DLPackExchangeAPI*>(header);
  // DLPack 1.2 introduced the table: an older minor version does not have it.
  if (header->version.minor < 2 || api->dltensor_from_py_object_no_sync == nullptr ||
      api->current_work_stream == nullptr) {
    return nullptr;
  }
  return api;
}

void set_allocation_error(void*, const char* kind, const char* message) {
  PyErr_Format(PyExc_RuntimeError, "%s: %s", kind != nullptr ? kind : "allocation failed",
               message != nullptr ? message : "");
}

}  // namespace

const DLPackExchangeAPI* exchange_api_of(PyObject* object) {
  PyTypeObject* type = Py_TYPE(object);
  for (std::size_t i = 0; i < g_type_count; ++i) {
    if (g_types[i].type == type) return g_types[i].api;
  }
  const DLPackExchangeAPI* api = look_up(type);
  if (g_type_count < kCachedTypes) {
    // Held, so that a type that is freed (a heap type of a subclass) cannot have its address
    // reused by another type while the cache still says what the first one had.
    Py_INCREF(reinterpret_cast<PyObject*>(type));
    g_types[g_type_count++] = {type, api};
  }
  return api;
}

TensorRef exchange_tensor_ref(const DLPackExchangeAPI& api, PyObject* object,
                              std::string_view kernel, std::string_view argument) {
  DLTensor tensor{};
  if (api.dltensor_from_py_object_no_sync(object, &tensor) != 0) throw py::error_already_set();
  return tensor_ref_from_dltensor(&tensor, kernel, argument);
}

std::uintptr_t exchange_current_stream(const DLPackExchangeAPI& api, int device) {
  void* stream = nullptr;
  if (api.current_work_stream(kDLCUDA, device, &stream) != 0) throw py::error_already_set();
  return reinterpret_cast<std::uintptr_t>(stream);
}

PyObject* exchange_allocate(const DLPackExchangeAPI& api, DType dtype,
                            std::span<const std::int64_t> shape, Device device,
                            std::string_view kernel, std::string_view argument) {
  const DLPackDType code = dtype_to_dlpack(dtype);
  std::array<std::int64_t, kMaxTensorDims> extents{};
  std::size_t ndim = 0;
  for (const std::int64_t extent : shape) extents[ndim++] = extent;
  DLTensor prototype{};
  prototype.device = {device.kind == DeviceKind::cuda ? kDLCUDA : kDLCPU, device.ordinal};
  prototype.ndim = static_cast<std::int32_t>(ndim);
  prototype.dtype = {code.code, code.bits, code.lanes};
  prototype.shape = extents.data();
  DLManagedTensorVersioned* managed = nullptr;
  if (api.managed_tensor_allocator(&prototype, &managed, nullptr, set_allocation_error) != 0 ||
      managed == nullptr) {
    if (!PyErr_Occurred()) {
      throw InvalidArgument(std::string(kernel), std::string(argument),
                            "could not be allocated by the tensors' framework");
    }
    throw py::error_already_set();
  }
  void* object = nullptr;
  if (api.managed_tensor_to_py_object_no_sync(managed, &object) != 0) {
    throw py::error_already_set();
  }
  return static_cast<PyObject*>(object);
}

}  // namespace zerojit::python
