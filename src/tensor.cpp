#include "zerojit/tensor.hpp"

#include <bit>
#include <stdexcept>

namespace zerojit {

std::string to_string(Device device) {
  return device.kind == DeviceKind::cpu ? std::string("cpu")
                                        : "cuda:" + std::to_string(device.ordinal);
}

TensorDesc TensorDesc::contiguous(DType dtype, std::initializer_list<std::int64_t> shape,
                                  Device device) {
  return contiguous(dtype, std::span<const std::int64_t>(shape.begin(), shape.size()), device);
}

TensorDesc TensorDesc::contiguous(DType dtype, std::span<const std::int64_t> shape, Device device) {
  if (shape.size() > static_cast<std::size_t>(kMaxTensorDims)) {
    throw std::invalid_argument("zerojit tensors have at most " + std::to_string(kMaxTensorDims) +
                                " dimensions");
  }
  TensorDesc desc;
  desc.dtype = dtype;
  desc.ndim = static_cast<int>(shape.size());
  desc.device = device;
  std::int64_t stride = 1;
  for (std::size_t d = shape.size(); d-- > 0;) {
    desc.shape[d] = shape[d];
    desc.strides[d] = stride;
    stride *= shape[d] > 0 ? shape[d] : 1;
  }
  return desc;
}

TensorDesc TensorDesc::strided(DType dtype, std::span<const std::int64_t> shape,
                               std::span<const std::int64_t> strides, Device device) {
  if (shape.size() != strides.size()) {
    throw std::invalid_argument("shape and strides differ in length");
  }
  TensorDesc desc = contiguous(dtype, shape, device);
  for (std::size_t d = 0; d < strides.size(); ++d) desc.strides[d] = strides[d];
  return desc;
}

std::int64_t TensorDesc::numel() const {
  std::int64_t count = 1;
  for (int d = 0; d < ndim; ++d) count *= size(d);
  return count;
}

bool TensorDesc::is_contiguous() const { return is_contiguous_inner(ndim); }

bool TensorDesc::is_contiguous_inner(int count) const {
  std::int64_t expected = 1;
  for (int d = ndim - 1; d >= ndim - count && d >= 0; --d) {
    // Size-1 dimensions may carry any stride (PyTorch gives them arbitrary ones).
    if (size(d) != 1 && stride(d) != expected) return false;
    expected *= size(d);
  }
  return true;
}

std::string to_string(const TensorDesc& desc) {
  std::string text(dtype_name(desc.dtype));
  text += '[';
  for (int d = 0; d < desc.ndim; ++d) text += (d ? ", " : "") + std::to_string(desc.size(d));
  text += "] strides=[";
  for (int d = 0; d < desc.ndim; ++d) text += (d ? ", " : "") + std::to_string(desc.stride(d));
  text += "] align=" + std::to_string(desc.alignment) + " " + to_string(desc.device);
  return text;
}

std::int64_t pointer_alignment(const void* pointer) {
  const auto address = reinterpret_cast<std::uintptr_t>(pointer);
  if (address == 0) return 256;
  const auto lowest_bit = static_cast<std::int64_t>(address & (~address + 1));
  return lowest_bit > 256 ? 256 : lowest_bit;
}

TensorRef make_tensor_ref(void* data, TensorDesc desc) {
  desc.alignment = pointer_alignment(data);
  return TensorRef{desc, data};
}

}  // namespace zerojit
