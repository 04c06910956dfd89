#include "zerojit/checks.hpp"

#include <array>
#include <cstdint>
#include <utility>

namespace zerojit {

void ArgumentChecks::fail(std::string_view argument, const std::string& problem) const {
  throw InvalidArgument(std::string(kernel_), std::string(argument), problem);
}

void ArgumentChecks::tensor(const TensorDesc& t, std::string_view argument,
                            std::initializer_list<DType> allowed, int ndim) const {
  // Runs on every launch: nothing here allocates unless a check fails.
  bool dtype_ok = false;
  for (DType dtype : allowed) dtype_ok = dtype_ok || t.dtype == dtype;
  if (!dtype_ok) {
    std::string names;
    for (DType dtype : allowed)
      names += (names.empty() ? "" : " or ") + std::string(dtype_name(dtype));
    fail(argument, "dtype must be " + names + ", got " + to_string(t));
  }
  if (t.ndim != ndim) {
    fail(argument, "must have " + std::to_string(ndim) + " dimensions, got " + to_string(t));
  }
  if (t.device.kind != DeviceKind::cuda) {
    fail(argument, "must be on a CUDA device, got " + to_string(t.device));
  }
  for (int d = 0; d < t.ndim; ++d) {
    if (t.size(d) < 0) fail(argument, "has a negative size: " + to_string(t));
  }
  // The device code loads and stores whole elements: a byte-offset view of wider ones would
  // fault (a misaligned address ends the CUDA context).
  const int element = dtype_size_bytes(t.dtype);
  if (element > 1 && t.alignment % element != 0) {
    fail(argument, "base address must be aligned to its " + std::to_string(element) +
                       "-byte elements, got " + to_string(t));
  }
}

void ArgumentChecks::distinct_elements(const TensorDesc& t, std::string_view argument) const {
  std::array<int, kMaxTensorDims> dims{};
  int count = 0;
  for (int d = 0; d < t.ndim; ++d) {
    if (t.size(d) > 1) dims[static_cast<std::size_t>(count++)] = d;
  }
  const auto magnitude = [&](int d) { return t.stride(d) < 0 ? -t.stride(d) : t.stride(d); };
  // At most kMaxTensorDims dims: an insertion sort by stride magnitude.
  for (int i = 1; i < count; ++i) {
    for (int j = i; j > 0 && magnitude(dims[static_cast<std::size_t>(j)]) <
                                 magnitude(dims[static_cast<std::size_t>(j - 1)]);
         --j) {
      std::swap(dims[static_cast<std::size_t>(j)], dims[static_cast<std::size_t>(j - 1)]);
    }
  }
  std::int64_t spanned = 1;  // elements the dims inside span, from the first to past the last
  for (int i = 0; i < count; ++i) {
    const int d = dims[static_cast<std::size_t>(i)];
    if (magnitude(d) < spanned) {
      fail(argument, "is written, but its elements overlap (dim " + std::to_string(d) + " steps " +
                         std::to_string(t.stride(d)) + " elements, inside the " +
                         std::to_string(spanned) + " the dims within it span): " + to_string(t));
    }
    spanned = magnitude(d) * (t.size(d) - 1) + spanned;
  }
}

void ArgumentChecks::fits_int32(std::int64_t value, std::string_view argument,
                                std::string_view what) const {
  if (value > INT32_MAX || value < INT32_MIN) {
    fail(argument, std::string(what) + " must fit in 32 bits, got " + std::to_string(value));
  }
}

void ArgumentChecks::size(const TensorDesc& t, std::string_view argument, int dim,
                          std::int64_t expected) const {
  if (t.size(dim) != expected) {
    fail(argument, "size of dim " + std::to_string(dim) + " must be " + std::to_string(expected) +
                       ", got " + to_string(t));
  }
}

void ArgumentChecks::contiguous(const TensorDesc& t, std::string_view argument) const {
  if (!t.is_contiguous()) fail(argument, "must be contiguous, got " + to_string(t));
}

void ArgumentChecks::innermost_contiguous(const TensorDesc& t, std::string_view argument) const {
  if (!t.is_contiguous_inner(1)) {
    fail(argument, "its last dimension must have stride 1, got " + to_string(t));
  }
}

void ArgumentChecks::aligned(const TensorDesc& t, std::string_view argument,
                             std::int64_t bytes) const {
  if (t.alignment % bytes != 0) {
    fail(argument,
         "base address must be " + std::to_string(bytes) + "-byte aligned, got " + to_string(t));
  }
}

void ArgumentChecks::stride_bytes_multiple(const TensorDesc& t, std::string_view argument, int dim,
                                           std::int64_t bytes) const {
  if (t.size(dim) > 1 && stride_bytes(t, dim) % bytes != 0) {
    fail(argument, "stride of dim " + std::to_string(dim) + " must be a multiple of " +
                       std::to_string(bytes) + " bytes, got " + to_string(t));
  }
}

void ArgumentChecks::same_device(const TensorDesc& t, std::string_view argument,
                                 const TensorDesc& first) const {
  if (t.device != first.device) {
    fail(argument, "must be on " + to_string(first.device) + " like the other tensors, got " +
                       to_string(t.device));
  }
}

void ArgumentChecks::positive(std::int64_t value, std::string_view argument) const {
  if (value <= 0) fail(argument, "must be positive, got " + std::to_string(value));
}

void ArgumentChecks::matches_size(std::optional<std::int64_t> value, std::string_view argument,
                                  const TensorDesc& tensor, std::string_view tensor_name,
                                  int dim) const {
  if (!value || tensor.ndim <= dim || tensor.size(dim) == *value) return;
  fail(argument, "must equal " + std::string(tensor_name) + ".shape[" + std::to_string(dim) +
                     "] = " + std::to_string(tensor.size(dim)) + ", got " + std::to_string(*value));
}

void ArgumentChecks::matches_stride(std::optional<std::int64_t> value, std::string_view argument,
                                    const TensorDesc& tensor, std::string_view tensor_name) const {
  if (!value || tensor.ndim < 1 || tensor.stride(0) == *value) return;
  fail(argument, "must equal " + std::string(tensor_name) + ".stride(0) = " +
                     std::to_string(tensor.stride(0)) + ", got " + std::to_string(*value));
}

void ArgumentChecks::matches_dtype_flag(std::optional<bool> flag, std::string_view argument,
                                        const TensorDesc& tensor, std::string_view tensor_name,
                                        const DTypeSet& dtypes) const {
  if (!flag || *flag == dtypes.contains(tensor.dtype)) return;
  fail(argument, std::string(*flag ? "is True" : "is False") + ", but " + std::string(tensor_name) +
                     " has dtype " + std::string(dtype_name(tensor.dtype)) + " (True means " +
                     std::string(tensor_name) + " is " + to_string(dtypes) + ")");
}

}  // namespace zerojit
