// Tensor descriptors: what dispatch and validation look at (dtype, shape, strides, alignment,
// device), with no storage. A TensorRef adds the pointer a launch needs.
//
// Shapes live in fixed-size arrays so that building descriptors on the launch path never
// allocates.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>

#include "zerojit/dtype.hpp"

namespace zerojit {

inline constexpr int kMaxTensorDims = 6;

enum class DeviceKind : std::uint8_t { cpu, cuda };

struct Device {
  DeviceKind kind = DeviceKind::cuda;
  int ordinal = 0;

  static constexpr Device cpu() { return {DeviceKind::cpu, 0}; }
  static constexpr Device cuda(int ordinal) { return {DeviceKind::cuda, ordinal}; }
  bool operator==(const Device&) const = default;
};

std::string to_string(Device device);

struct TensorDesc {
  DType dtype = DType::f32;
  int ndim = 0;
  std::array<std::int64_t, kMaxTensorDims> shape{};
  std::array<std::int64_t, kMaxTensorDims> strides{};  // in elements
  std::int64_t alignment = 256;                        // bytes the base address is aligned to
  Device device{};

  // Contiguous (row-major) descriptor. Throws std::invalid_argument past kMaxTensorDims.
  static TensorDesc contiguous(DType dtype, std::initializer_list<std::int64_t> shape,
                               Device device = Device::cuda(0));
  static TensorDesc contiguous(DType dtype, std::span<const std::int64_t> shape,
                               Device device = Device::cuda(0));
  // Arbitrary strides (in elements).
  static TensorDesc strided(DType dtype, std::span<const std::int64_t> shape,
                            std::span<const std::int64_t> strides, Device device = Device::cuda(0));

  std::int64_t size(int dim) const { return shape[static_cast<std::size_t>(dim)]; }
  std::int64_t stride(int dim) const { return strides[static_cast<std::size_t>(dim)]; }
  std::int64_t numel() const;
  bool is_contiguous() const;
  // Whether the last `count` dims are contiguous (stride 1 innermost, packed above it).
  bool is_contiguous_inner(int count) const;

  bool operator==(const TensorDesc&) const = default;
};

// "bf16[8192, 64, 128] strides=[8192, 128, 1] align=256 cuda:0"
std::string to_string(const TensorDesc& desc);

// Largest power of two (capped at 256) dividing the address; 256 for null.
std::int64_t pointer_alignment(const void* pointer);

// A descriptor plus the pointer of its first element.
struct TensorRef {
  TensorDesc desc;
  void* data = nullptr;

  template <class T>
  T* as() const {
    return static_cast<T*>(data);
  }
};

// A TensorRef whose descriptor's alignment is taken from the pointer.
TensorRef make_tensor_ref(void* data, TensorDesc desc);

}  // namespace zerojit
