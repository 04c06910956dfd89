// Argument checks for kernel owners' plans. Each failed check throws InvalidArgument naming
// the kernel, the argument and what is wrong, before anything is launched. A passing check
// allocates nothing, so plans can run them on every launch.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include "zerojit/dtype.hpp"
#include "zerojit/error.hpp"
#include "zerojit/tensor.hpp"

namespace zerojit {

class ArgumentChecks {
 public:
  explicit ArgumentChecks(std::string_view kernel) : kernel_(kernel) {}

  std::string_view kernel() const { return kernel_; }
  [[noreturn]] void fail(std::string_view argument, const std::string& problem) const;

  // dtype is one of `allowed`, rank is `ndim`, no negative size, on a CUDA device, the base
  // address aligned to the element size.
  void tensor(const TensorDesc& t, std::string_view argument, std::initializer_list<DType> allowed,
              int ndim) const;
  void size(const TensorDesc& t, std::string_view argument, int dim, std::int64_t expected) const;
  void contiguous(const TensorDesc& t, std::string_view argument) const;
  void innermost_contiguous(const TensorDesc& t, std::string_view argument) const;
  void aligned(const TensorDesc& t, std::string_view argument, std::int64_t bytes) const;
  // stride(dim) * element size is a multiple of `bytes` (a dim of size <= 1 has any stride).
  void stride_bytes_multiple(const TensorDesc& t, std::string_view argument, int dim,
                             std::int64_t bytes) const;
  void same_device(const TensorDesc& t, std::string_view argument, const TensorDesc& first) const;
  // An output whose elements are all at distinct addresses: ordered by stride, each dim of size
  // > 1 steps past everything the dims inside it span (so no stride of 0, no overlapping rows).
  // Outputs written by several threads must not alias themselves.
  void distinct_elements(const TensorDesc& t, std::string_view argument) const;
  // A size that a key field or the device code holds as int32.
  void fits_int32(std::int64_t value, std::string_view argument, std::string_view what) const;
  void positive(std::int64_t value, std::string_view argument) const;
  // A size a caller passes next to the tensor it describes (vLLM's signatures repeat block
  // sizes): when given, it must equal tensor.shape[dim].
  void matches_size(std::optional<std::int64_t> value, std::string_view argument,
                    const TensorDesc& tensor, std::string_view tensor_name, int dim) const;
  // Likewise for a repeated stride: when given, it must equal tensor.stride(0).
  void matches_stride(std::optional<std::int64_t> value, std::string_view argument,
                      const TensorDesc& tensor, std::string_view tensor_name) const;
  // A flag a caller passes that states a tensor's layout by its dtype (vLLM's store_full_kv):
  // when given, it must be True exactly when the tensor's dtype is one of `dtypes`.
  void matches_dtype_flag(std::optional<bool> flag, std::string_view argument,
                          const TensorDesc& tensor, std::string_view tensor_name,
                          const DTypeSet& dtypes) const;

 private:
  std::string_view kernel_;
};

// Byte stride of a dimension.
inline std::int64_t stride_bytes(const TensorDesc& t, int dim) {
  return t.stride(dim) * dtype_size_bytes(t.dtype);
}

}  // namespace zerojit
