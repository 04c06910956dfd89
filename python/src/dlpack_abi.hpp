// The DLPack ABI (dlpack.h 1.2), declared here rather than included: a stable C ABI of a few
// plain structs, and declaring it keeps the build free of one more dependency. Besides the
// tensor structs it holds the exchange API of DLPack 1.2 (DLPackExchangeAPI): a table of C
// functions a framework publishes on its tensor type as `__dlpack_c_exchange_api__`, through
// which a consumer reads a tensor's data pointer, shape and strides, asks for the framework's
// current stream and allocates tensors, with no Python call at all.
#pragma once

#include <cstdint>

namespace zerojit::python::dlpack {

struct DLDevice {
  std::int32_t device_type;
  std::int32_t device_id;
};
struct DLDataType {
  std::uint8_t code;
  std::uint8_t bits;
  std::uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  std::int32_t ndim;
  DLDataType dtype;
  std::int64_t* shape;
  std::int64_t* strides;  // in elements; null means compact row-major
  std::uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor* self);
};
struct DLPackVersion {
  std::uint32_t major;
  std::uint32_t minor;
};
struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(DLManagedTensorVersioned* self);
  std::uint64_t flags;
  DLTensor dl_tensor;
};

// The exchange API (DLPack 1.2). Every function is a C function: none throws; failures return
// non-zero (or null) with a Python exception set.
using ManagedTensorAllocator = int (*)(DLTensor* prototype, DLManagedTensorVersioned** out,
                                       void* error_context,
                                       void (*set_error)(void* error_context, const char* kind,
                                                         const char* message));
using ManagedTensorFromPyObjectNoSync = int (*)(void* py_object, DLManagedTensorVersioned** out);
using ManagedTensorToPyObjectNoSync = int (*)(DLManagedTensorVersioned* tensor,
                                              void** out_py_object);
// Fills a stack DLTensor that views the object's storage, valid while the object lives.
using DLTensorFromPyObjectNoSync = int (*)(void* py_object, DLTensor* out);
// The framework's current stream of a device (torch.cuda.current_stream for PyTorch).
using CurrentWorkStream = int (*)(std::int32_t device_type, std::int32_t device_id,
                                  void** out_current_stream);

struct DLPackExchangeAPIHeader {
  DLPackVersion version;
  DLPackExchangeAPIHeader* prev_api;
};
struct DLPackExchangeAPI {
  DLPackExchangeAPIHeader header;
  ManagedTensorAllocator managed_tensor_allocator;
  ManagedTensorFromPyObjectNoSync managed_tensor_from_py_object_no_sync;
  ManagedTensorToPyObjectNoSync managed_tensor_to_py_object_no_sync;
  DLTensorFromPyObjectNoSync dltensor_from_py_object_no_sync;  // may be null
  CurrentWorkStream current_work_stream;
};

inline constexpr std::int32_t kDLCPU = 1;
inline constexpr std::int32_t kDLCUDA = 2;
inline constexpr std::int32_t kDLCUDAHost = 3;
inline constexpr std::int32_t kDLCUDAManaged = 13;
inline constexpr std::uint64_t kDLPackFlagReadOnly = 1;
inline constexpr std::uint8_t kDLFloat4_e2m1fn = 17;
// The newest DLPack version this consumer reads; producers may answer with an older one.
inline constexpr std::uint32_t kMaxDLPackMajor = 1;
inline constexpr std::uint32_t kMaxDLPackMinor = 1;

inline constexpr const char* kCapsuleName = "dltensor";
inline constexpr const char* kUsedCapsuleName = "used_dltensor";
inline constexpr const char* kVersionedCapsuleName = "dltensor_versioned";
inline constexpr const char* kUsedVersionedCapsuleName = "used_dltensor_versioned";
inline constexpr const char* kExchangeApiCapsuleName = "dlpack_exchange_api";

}  // namespace zerojit::python::dlpack
