#include "dsv4/config/geometry.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace zerojit::dsv4 {

int compressed_block_size(int block_size, int compress_ratio) {
  if (compress_ratio <= 0 || block_size < 0) {
    throw std::invalid_argument("compressed_block_size: needs block_size >= 0 (got " +
                                std::to_string(block_size) + ") and compress_ratio > 0 (got " +
                                std::to_string(compress_ratio) + ")");
  }
  return std::max(1, block_size / compress_ratio);
}

std::int64_t default_ds_mla_page_stride_bytes(int rows_per_page) {
  if (rows_per_page < 1) {
    throw std::invalid_argument(
        "default_ds_mla_page_stride_bytes: rows_per_page must be >= 1, "
        "got " +
        std::to_string(rows_per_page));
  }
  const std::int64_t used = static_cast<std::int64_t>(rows_per_page) * kDsMlaRowBytes;
  return (used + kDsMlaPageAlignment - 1) / kDsMlaPageAlignment * kDsMlaPageAlignment;
}

}  // namespace zerojit::dsv4
