// Tensors in through DLPack: any Python object with __dlpack__ / __dlpack_device__ (torch
// tensors, numpy arrays, CuPy arrays, JAX arrays...) or a raw "dltensor" capsule becomes a
// zerojit::TensorRef, without copying and without linking against any of those libraries.
//
// The capsule protocol is honoured: a consumed capsule is renamed "used_dltensor" (or
// "used_dltensor_versioned"), and the producer's deleter runs when the ImportedTensor that owns
// it is destroyed, so the memory stays alive for exactly as long as the launch needs it.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <string_view>

#include "zerojit/tensor.hpp"

namespace zerojit::python {

// Which stream the consumer will use, as DLPack's __dlpack__(stream=...) takes it for CUDA
// producers: 1 = the legacy default stream, -1 = "do not synchronize" (the caller launches on
// the producer's own current stream), any other value = a CUstream handle. CPU producers are
// always asked with stream=None, as the protocol requires.
struct ProducerStream {
  pybind11::object value;  // an int, or None to let the producer use its default
};

// The ProducerStream for launching on `stream`: the handle itself, 0 (the legacy default
// stream) spelled 1 as the protocol wants it.
ProducerStream producer_stream_for(std::uintptr_t stream);

// One imported tensor. Movable, not copyable; the destructor calls the producer's deleter and
// must run with the GIL held (some producers' deleters release Python references).
class ImportedTensor {
 public:
  ImportedTensor() = default;
  ImportedTensor(ImportedTensor&& other) noexcept;
  ImportedTensor& operator=(ImportedTensor&& other) noexcept;
  ImportedTensor(const ImportedTensor&) = delete;
  ImportedTensor& operator=(const ImportedTensor&) = delete;
  ~ImportedTensor();

  const TensorRef& ref() const { return ref_; }
  bool read_only() const { return read_only_; }
  // Relabels the device (the CPU references validate host tensors as if they were on cuda:0).
  void set_device(Device device) { ref_.desc.device = device; }

 private:
  friend ImportedTensor import_tensor(pybind11::handle object, std::string_view kernel,
                                      std::string_view argument, const ProducerStream& stream);
  void release() noexcept;

  TensorRef ref_;
  bool read_only_ = false;
  void* managed_ = nullptr;  // DLManagedTensor* or DLManagedTensorVersioned*
  bool versioned_ = false;
};

// The TensorRef of a DLTensor (dlpack_abi.hpp's, passed as void* to keep the ABI out of this
// header): device, dtype, shape and strides checked as import_tensor checks them.
TensorRef tensor_ref_from_dltensor(const void* dl_tensor, std::string_view kernel,
                                   std::string_view argument);

// Imports `object` for argument `argument` of `kernel`. Throws zerojit::InvalidArgument naming
// both when the object is not a tensor, is on a device zerojit cannot address, has a dtype
// zerojit does not know or more dimensions than it supports. Errors raised by the producer
// (e.g. torch refusing a tensor that requires grad) propagate unchanged.
ImportedTensor import_tensor(pybind11::handle object, std::string_view kernel,
                             std::string_view argument, const ProducerStream& stream);

}  // namespace zerojit::python
