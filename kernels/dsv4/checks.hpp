// Argument checks shared by the DSv4 kernel owners. Each failed check throws InvalidArgument
// naming the kernel, the argument and what is wrong, before anything is launched.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include "zerojit/error.hpp"
#include "zerojit/tensor.hpp"

namespace zerojit::dsv4 {

class ArgumentChecks {
 public:
  explicit ArgumentChecks(std::string_view kernel) : kernel_(kernel) {}

  [[noreturn]] void fail(std::string_view argument, const std::string& problem) const;

  // dtype is one of `allowed`, rank is `ndim`, on a CUDA device.
  void tensor(const TensorDesc& t, std::string_view argument, std::initializer_list<DType> allowed,
              int ndim) const;
  void size(const TensorDesc& t, std::string_view argument, int dim, std::int64_t expected) const;
  void contiguous(const TensorDesc& t, std::string_view argument) const;
  void innermost_contiguous(const TensorDesc& t, std::string_view argument) const;
  void aligned(const TensorDesc& t, std::string_view argument, std::int64_t bytes) const;
  // stride(dim) * element size is a multiple of `bytes`.
  void stride_bytes_multiple(const TensorDesc& t, std::string_view argument, int dim,
                             std::int64_t bytes) const;
  void same_device(const TensorDesc& t, std::string_view argument, const TensorDesc& first) const;
  void positive(std::int64_t value, std::string_view argument) const;

 private:
  std::string_view kernel_;
};

// Byte stride of a dimension.
inline std::int64_t stride_bytes(const TensorDesc& t, int dim) {
  return t.stride(dim) * dtype_size_bytes(t.dtype);
}

}  // namespace zerojit::dsv4
