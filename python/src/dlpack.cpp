#include "dlpack.hpp"

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "dlpack_abi.hpp"
#include "zerojit/dtype.hpp"
#include "zerojit/error.hpp"

namespace py = pybind11;

namespace zerojit::python {
namespace {

using namespace dlpack;

[[noreturn]] void fail(std::string_view kernel, std::string_view argument,
                       const std::string& problem) {
  throw InvalidArgument(std::string(kernel), std::string(argument), problem);
}

std::string type_name(py::handle object) {
  return py::str(py::type::handle_of(object).attr("__qualname__")).cast<std::string>();
}

std::string device_type_text(std::int32_t device_type) {
  switch (device_type) {
    case kDLCPU:
      return "cpu";
    case kDLCUDA:
      return "cuda";
    case kDLCUDAHost:
      return "cuda_host";
    case kDLCUDAManaged:
      return "cuda_managed";
    default:
      return "DLPack device type " + std::to_string(device_type);
  }
}

// PyTorch before the DLPack 1.1 fp4 code exported float4_e2m1fn_x2 as 2 lanes of 4 bits; the
// core maps only single-lane types, so that one spelling is accepted here.
std::optional<DType> import_dtype(DLDataType dl) {
  if (dl.code == kDLFloat4_e2m1fn && dl.bits == 4 && dl.lanes == 2) return DType::e2m1x2;
  return dtype_from_dlpack(DLPackDType{dl.code, dl.bits, dl.lanes});
}

// Asks the producer for a capsule, offering the versioned protocol first.
py::object request_capsule(py::handle object, const py::object& stream) {
  py::object method = object.attr("__dlpack__");
  try {
    return method(py::arg("stream") = stream,
                  py::arg("max_version") = py::make_tuple(kMaxDLPackMajor, kMaxDLPackMinor));
  } catch (py::error_already_set& error) {
    // Producers older than DLPack 1.0 (numpy < 2.1, ...) do not take max_version.
    if (!error.matches(PyExc_TypeError)) throw;
  }
  return method(py::arg("stream") = stream);
}

}  // namespace

TensorRef tensor_ref_from_dltensor(const void* dl_tensor, std::string_view kernel,
                                   std::string_view argument) {
  const DLTensor& tensor = *static_cast<const DLTensor*>(dl_tensor);
  Device device;
  switch (tensor.device.device_type) {
    case kDLCPU:
    case kDLCUDAHost:  // pinned host memory: a host pointer
      device = Device::cpu();
      break;
    case kDLCUDA:
    case kDLCUDAManaged:
      device = Device::cuda(tensor.device.device_id);
      break;
    default:
      fail(kernel, argument,
           "is on " + device_type_text(tensor.device.device_type) +
               ", which zerojit kernels cannot address (they take CUDA tensors)");
  }
  const std::optional<DType> dtype = import_dtype(tensor.dtype);
  if (!dtype) {
    fail(kernel, argument,
         "has DLPack dtype (code " + std::to_string(tensor.dtype.code) + ", bits " +
             std::to_string(tensor.dtype.bits) + ", lanes " + std::to_string(tensor.dtype.lanes) +
             "), which zerojit does not know");
  }
  if (tensor.ndim < 0 || tensor.ndim > kMaxTensorDims) {
    fail(kernel, argument,
         "has " + std::to_string(tensor.ndim) + " dimensions; zerojit tensors have at most " +
             std::to_string(kMaxTensorDims));
  }
  if (tensor.ndim > 0 && tensor.shape == nullptr) {
    fail(kernel, argument,
         "has a null shape pointer for " + std::to_string(tensor.ndim) +
             " dimensions (a producer breaking the DLPack protocol)");
  }
  // Filled in place: this runs for every tensor of every launch from Python.
  TensorRef ref;
  ref.desc.dtype = *dtype;
  ref.desc.ndim = tensor.ndim;
  ref.desc.device = device;
  // Checked before anything is read through the tensor: a negative extent, or sizes and
  // strides whose products overflow, would make the kernels' (and the CPU references') index
  // arithmetic wrap and reach memory the tensor does not own.
  std::int64_t compact = 1;  // the elements, and the next compact stride
  std::int64_t reach = 0;    // the farthest element from the first, in elements
  bool overflow = false;
  for (int d = tensor.ndim; d-- > 0;) {
    const auto index = static_cast<std::size_t>(d);
    const std::int64_t extent = tensor.shape[d];
    if (extent < 0) {
      fail(
          kernel, argument,
          "has a negative extent " + std::to_string(extent) + " in dimension " + std::to_string(d));
    }
    const std::int64_t stride = tensor.strides != nullptr ? tensor.strides[d] : compact;
    ref.desc.shape[index] = extent;
    ref.desc.strides[index] = stride;
    std::int64_t span = 0;
    if (extent > 0) {
      overflow = overflow || stride == INT64_MIN ||
                 __builtin_mul_overflow(stride < 0 ? -stride : stride, extent - 1, &span) ||
                 __builtin_add_overflow(reach, span, &reach);
    }
    overflow = overflow || __builtin_mul_overflow(compact, extent > 0 ? extent : 1, &compact);
  }
  const auto element_bytes = static_cast<std::int64_t>(dtype_size_bytes(*dtype));
  std::int64_t reach_bytes = 0;
  overflow = overflow || __builtin_mul_overflow(reach + 1, element_bytes, &reach_bytes) ||
             __builtin_mul_overflow(compact, element_bytes, &compact);
  if (overflow) {
    fail(kernel, argument,
         "has sizes or strides whose product overflows 64 bits (a producer breaking the DLPack "
         "protocol)");
  }
  // The first and the farthest byte must be addresses: an offset such as 2^63, or one that
  // wraps around the address space, is refused before the pointer is formed.
  const auto base = reinterpret_cast<std::uintptr_t>(tensor.data);
  std::uintptr_t first = 0, last = 0;
  if (tensor.byte_offset > static_cast<std::uint64_t>(INT64_MAX) ||
      __builtin_add_overflow(base, tensor.byte_offset, &first) ||
      __builtin_add_overflow(first, static_cast<std::uintptr_t>(reach_bytes), &last)) {
    fail(kernel, argument,
         "has a byte_offset of " + std::to_string(tensor.byte_offset) +
             " that puts it beyond any address (a producer breaking the DLPack protocol)");
  }
  if (tensor.data == nullptr && ref.desc.numel() > 0) {
    fail(kernel, argument, "has a null data pointer for a tensor that is not empty");
  }
  ref.data = reinterpret_cast<void*>(first);
  ref.desc.alignment = pointer_alignment(ref.data);
  return ref;
}

ProducerStream producer_stream_for(std::uintptr_t stream) {
  return ProducerStream{py::int_(stream == 0 ? std::uintptr_t{1} : stream)};
}

ImportedTensor::ImportedTensor(ImportedTensor&& other) noexcept
    : ref_(other.ref_),
      read_only_(other.read_only_),
      managed_(std::exchange(other.managed_, nullptr)),
      versioned_(other.versioned_) {}

ImportedTensor& ImportedTensor::operator=(ImportedTensor&& other) noexcept {
  if (this != &other) {
    release();
    ref_ = other.ref_;
    read_only_ = other.read_only_;
    managed_ = std::exchange(other.managed_, nullptr);
    versioned_ = other.versioned_;
  }
  return *this;
}

ImportedTensor::~ImportedTensor() { release(); }

void ImportedTensor::release() noexcept {
  if (managed_ == nullptr) return;
  if (versioned_) {
    auto* managed = static_cast<DLManagedTensorVersioned*>(managed_);
    if (managed->deleter != nullptr) managed->deleter(managed);
  } else {
    auto* managed = static_cast<DLManagedTensor*>(managed_);
    if (managed->deleter != nullptr) managed->deleter(managed);
  }
  managed_ = nullptr;
}

ImportedTensor import_tensor(py::handle object, std::string_view kernel, std::string_view argument,
                             const ProducerStream& stream) {
  py::object capsule;
  if (PyCapsule_CheckExact(object.ptr())) {
    capsule = py::reinterpret_borrow<py::object>(object);
  } else {
    if (!py::hasattr(object, "__dlpack__")) {
      fail(kernel, argument,
           "must be a tensor (an object with __dlpack__, e.g. a torch.Tensor or a numpy array), "
           "got " +
               type_name(object));
    }
    // A CPU producer must be asked with stream=None; a CUDA one with the consumer's stream.
    py::object producer_stream = py::none();
    if (py::hasattr(object, "__dlpack_device__")) {
      const py::object reported = object.attr("__dlpack_device__")();
      std::pair<int, int> device;
      try {
        device = reported.cast<std::pair<int, int>>();
      } catch (const py::cast_error&) {
        fail(kernel, argument,
             "has a __dlpack_device__() that returned " + type_name(reported) +
                 ", not a (device_type, device_id) pair of ints");
      }
      if (device.first == kDLCUDA || device.first == kDLCUDAManaged) {
        producer_stream = stream.value;
      }
    }
    capsule = request_capsule(object, producer_stream);
    if (!PyCapsule_CheckExact(capsule.ptr())) {
      fail(kernel, argument,
           "has a __dlpack__() that returned " + type_name(capsule) + ", not a DLPack capsule");
    }
  }

  const char* name = PyCapsule_GetName(capsule.ptr());
  const std::string_view capsule_name = name != nullptr ? name : "";
  ImportedTensor imported;
  if (capsule_name == kVersionedCapsuleName) {
    auto* managed = static_cast<DLManagedTensorVersioned*>(
        PyCapsule_GetPointer(capsule.ptr(), kVersionedCapsuleName));
    if (managed == nullptr) throw py::error_already_set();
    // Consumed from here on: the capsule's destructor no longer frees it, we do.
    if (PyCapsule_SetName(capsule.ptr(), kUsedVersionedCapsuleName) != 0) {
      throw py::error_already_set();
    }
    imported.managed_ = managed;
    imported.versioned_ = true;
    if (managed->version.major > kMaxDLPackMajor) {
      fail(kernel, argument,
           "was exported with DLPack " + std::to_string(managed->version.major) + "." +
               std::to_string(managed->version.minor) + "; zerojit reads DLPack up to " +
               std::to_string(kMaxDLPackMajor) + "." + std::to_string(kMaxDLPackMinor));
    }
    imported.read_only_ = (managed->flags & kDLPackFlagReadOnly) != 0;
  } else if (capsule_name == kCapsuleName) {
    auto* managed =
        static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), kCapsuleName));
    if (managed == nullptr) throw py::error_already_set();
    if (PyCapsule_SetName(capsule.ptr(), kUsedCapsuleName) != 0) throw py::error_already_set();
    imported.managed_ = managed;
  } else {
    fail(kernel, argument,
         "is a capsule named '" + std::string(capsule_name) +
             "', not an unused DLPack capsule ('dltensor' or 'dltensor_versioned'); a capsule "
             "can be consumed only once");
  }

  const DLTensor& tensor =
      imported.versioned_ ? static_cast<DLManagedTensorVersioned*>(imported.managed_)->dl_tensor
                          : static_cast<DLManagedTensor*>(imported.managed_)->dl_tensor;
  imported.ref_ = tensor_ref_from_dltensor(&tensor, kernel, argument);
  return imported;
}

}  // namespace zerojit::python
