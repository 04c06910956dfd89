// One kernel call from Python on the fast path: the arguments of a METH_FASTCALL function read
// in place (no argument tuple, no keyword dict, no pybind11 casting), tensors taken through
// the DLPack exchange API where their framework publishes it (exchange.hpp) and through the
// capsule protocol otherwise (dlpack.hpp), the stream read once, outputs allocated in C++
// when the caller passed None.
//
// Streams: without an explicit stream, a launch goes on the current stream of the first CUDA
// tensor's framework (PyTorch's current stream) with no synchronization, as any PyTorch op
// would; tensors of frameworks without the exchange API are then asked to order themselves on
// that stream. An explicit stream (an int CUstream handle, or an object with .cuda_stream)
// takes every tensor through the capsule protocol, which asks each producer to synchronize
// with that stream.
#pragma once

#include <Python.h>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "dlpack.hpp"
#include "zerojit/zerojit.hpp"

namespace zerojit::python {

namespace dlpack {
struct DLPackExchangeAPI;
}

class FastCall {
 public:
  // `stream` is the call's stream argument: None, an int handle, or an object with .cuda_stream.
  FastCall(std::string_view kernel, PyObject* stream);
  FastCall(const FastCall&) = delete;
  FastCall& operator=(const FastCall&) = delete;

  std::string_view kernel() const { return kernel_; }
  // Names another kernel in later errors (the compressor stores pick theirs from the cache).
  void set_kernel(std::string_view kernel) { kernel_ = kernel; }
  [[noreturn]] void fail(std::string_view argument, const std::string& problem) const;

  TensorRef tensor(PyObject* object, std::string_view argument);
  // A tensor the kernel writes (a read-only one is refused).
  TensorRef written(PyObject* object, std::string_view argument);
  std::optional<TensorRef> optional_tensor(PyObject* object, std::string_view argument);
  // An output: the given tensor (whose reference the caller holds: OwnedObjects in
  // fast_ops.cpp), or (object is None) a new compact one of the inputs' framework, stored into
  // `object` (a new reference the caller returns or releases).
  TensorRef output(PyObject*& object, std::string_view argument, DType dtype,
                   std::span<const std::int64_t> shape);
  TensorRef output(PyObject*& object, std::string_view argument, DType dtype,
                   std::initializer_list<std::int64_t> shape) {
    return output(object, argument, dtype,
                  std::span<const std::int64_t>(shape.begin(), shape.size()));
  }

  std::int64_t integer(PyObject* object, std::string_view argument) const;
  std::optional<std::int64_t> optional_integer(PyObject* object, std::string_view argument) const;
  double number(PyObject* object, std::string_view argument) const;
  std::optional<bool> optional_flag(PyObject* object, std::string_view argument) const;

  // Throws what an output could not be allocated for (output() defers it past validation).
  void throw_deferred() const;

  // The stream to launch on and the device the launch goes to (the first CUDA tensor's).
  cuda::Stream stream();
  int device() const;

 private:
  TensorRef import(PyObject* object, std::string_view argument, bool written);
  const ProducerStream& producer_stream();

  std::string_view kernel_;
  std::optional<std::uintptr_t> explicit_stream_;
  const dlpack::DLPackExchangeAPI* api_ = nullptr;  // of the first framework tensor
  std::optional<Device> first_device_;
  std::optional<std::uintptr_t> stream_;
  std::optional<ProducerStream> producer_;
  std::vector<ImportedTensor> imported_;  // capsule-path tensors, kept alive for the launch
  std::string_view deferred_argument_;
  const char* deferred_problem_ = nullptr;
};

// Plans a call and launches it: on a warmed key with the GIL held (releasing it would cost
// more than the launch); on a miss, which may compile for seconds, with the GIL released.
template <class Kernel, class Args>
void launch_from_python(Kernel& kernel, const Args& args, FastCall& call) {
  auto spec = kernel.launch_spec(args);
  call.throw_deferred();
  const LaunchTarget target{spec.device, call.stream()};
  const cuda::ScopedDevice device(spec.device);
  if (spec.geometry.empty() || kernel.has_executor(spec.key, spec.device)) {
    kernel.launch(std::move(spec), target);
    return;
  }
  const auto descriptors = descriptors_of(args);
  PyThreadState* saved = PyEval_SaveThread();
  try {
    kernel.launch(std::move(spec), target, &descriptors);
  } catch (...) {
    PyEval_RestoreThread(saved);
    throw;
  }
  PyEval_RestoreThread(saved);
}

// Sets the Python error for the exception in flight (zerojit's own mapped onto
// zerojit._errors, a pending Python error restored); for METH_FASTCALL functions, which
// return nullptr after it.
void set_python_error_from_current_exception();

}  // namespace zerojit::python
