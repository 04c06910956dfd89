#include "fast_call.hpp"

#include <pybind11/pybind11.h>

#include <string>

#include "arguments.hpp"
#include "dlpack_abi.hpp"
#include "exchange.hpp"

namespace py = pybind11;

namespace zerojit::python {
namespace {

std::string type_name(PyObject* object) { return Py_TYPE(object)->tp_name; }

}  // namespace

FastCall::FastCall(std::string_view kernel, PyObject* stream) : kernel_(kernel) {
  if (stream == nullptr || stream == Py_None) return;
  PyObject* handle = stream;
  py::object attribute;
  if (!PyLong_Check(stream)) {
    attribute = py::reinterpret_steal<py::object>(PyObject_GetAttrString(stream, "cuda_stream"));
    if (!attribute) {
      PyErr_Clear();
      fail("stream",
           "must be a CUstream handle (int) or have .cuda_stream, got " + type_name(stream));
    }
    handle = attribute.ptr();
  }
  const unsigned long long value = PyLong_AsUnsignedLongLong(handle);
  if (PyErr_Occurred()) {
    PyErr_Clear();
    fail("stream", "must be a non-negative CUstream handle");
  }
  explicit_stream_ = static_cast<std::uintptr_t>(value);
}

void FastCall::fail(std::string_view argument, const std::string& problem) const {
  throw InvalidArgument(std::string(kernel_), std::string(argument), problem);
}

const ProducerStream& FastCall::producer_stream() {
  // Capsule producers order themselves on the stream the launch will use (which is fixed from
  // here on).
  if (!producer_) producer_ = producer_stream_for(reinterpret_cast<std::uintptr_t>(stream()));
  return *producer_;
}

TensorRef FastCall::import(PyObject* object, std::string_view argument, bool written) {
  if (object == Py_None) fail(argument, "is required, got None");
  const dlpack::DLPackExchangeAPI* framework_api = exchange_api_of(object);
  // With an explicit stream the capsule protocol orders the producer on it; the exchange API
  // (which does not synchronize) still allocates the outputs the caller left to zerojit.
  if (api_ == nullptr) api_ = framework_api;
  TensorRef ref;
  if (framework_api != nullptr && !explicit_stream_) {
    ref = exchange_tensor_ref(*framework_api, object, kernel_, argument);
  } else {
    imported_.push_back(import_tensor(object, kernel_, argument, producer_stream()));
    if (written && imported_.back().read_only()) {
      fail(argument, "is read-only, but the kernel writes it");
    }
    ref = imported_.back().ref();
  }
  if (!first_device_ && ref.desc.device.kind == DeviceKind::cuda) first_device_ = ref.desc.device;
  return ref;
}

TensorRef FastCall::tensor(PyObject* object, std::string_view argument) {
  return import(object, argument, false);
}

TensorRef FastCall::written(PyObject* object, std::string_view argument) {
  return import(object, argument, true);
}

std::optional<TensorRef> FastCall::optional_tensor(PyObject* object, std::string_view argument) {
  if (object == Py_None) return std::nullopt;
  return tensor(object, argument);
}

TensorRef FastCall::output(PyObject*& object, std::string_view argument, DType dtype,
                           std::span<const std::int64_t> shape) {
  if (object != Py_None) return import(object, argument, true);  // the caller holds a reference
  bool valid_shape = true;
  for (const std::int64_t extent : shape) valid_shape = valid_shape && extent >= 0;
  if (api_ == nullptr || !first_device_ || !valid_shape) {
    // Reported after the plan's validation, which names a bad input first (a host tensor, a
    // wrong shape) when there is one.
    if (!deferred_problem_) {
      deferred_argument_ = argument;
      deferred_problem_ =
          valid_shape ? "is None, and zerojit allocates outputs only like CUDA tensors of a "
                        "framework with the DLPack exchange API (PyTorch); pass the output tensor"
                      : "is None and cannot be allocated: its shape would be negative";
    }
    TensorRef placeholder;
    placeholder.desc =
        TensorDesc::contiguous(dtype, shape, first_device_ ? *first_device_ : Device::cpu());
    return placeholder;
  }
  object = exchange_allocate(*api_, dtype, shape, *first_device_, kernel_, argument);
  return exchange_tensor_ref(*api_, object, kernel_, argument);
}

std::int64_t FastCall::integer(PyObject* object, std::string_view argument) const {
  return integer_argument(kernel_, object, argument);
}

std::optional<std::int64_t> FastCall::optional_integer(PyObject* object,
                                                       std::string_view argument) const {
  return optional_integer_argument(kernel_, object, argument);
}

double FastCall::number(PyObject* object, std::string_view argument) const {
  return number_argument(kernel_, object, argument);
}

std::optional<bool> FastCall::optional_flag(PyObject* object, std::string_view argument) const {
  return optional_flag_argument(kernel_, object, argument);
}

cuda::Stream FastCall::stream() {
  if (!stream_) {
    if (explicit_stream_) {
      stream_ = *explicit_stream_;
    } else if (api_ != nullptr && first_device_) {
      stream_ = exchange_current_stream(*api_, first_device_->ordinal);
    } else {
      stream_ = 0;  // the legacy default stream, as for any DLPack producer without a stream
    }
  }
  return reinterpret_cast<cuda::Stream>(*stream_);
}

void FastCall::throw_deferred() const {
  if (deferred_problem_) fail(deferred_argument_, deferred_problem_);
}

int FastCall::device() const { return first_device_ ? first_device_->ordinal : 0; }

}  // namespace zerojit::python
