// What every DSv4 kernel owner includes: the kernel contract, the family's embedded device
// sources, and the configuration its gate reads.
#pragma once

#include <cstdint>
#include <string>

#include "dsv4/config.hpp"
#include "zerojit/embedded.hpp"
#include "zerojit/kernel.hpp"

namespace zerojit::dsv4 {

// The DSv4 device sources (every folder's .cu, .cuh and params headers), embedded at build time.
const EmbeddedFileSet& embedded_files();

// An fp8_ds_mla cache [pages, B, 584] u8 as the kernels address it: page p at p * stride(0),
// its B rows packed inside it (576 data bytes each, then B rows of 8 scale bytes), stride(1)
// unread. The tensor must therefore span that much: stride(1) >= 584 when B > 1 (the last page
// then holds B * 584 bytes), and, with several pages, stride(0) a multiple of `page_alignment`
// bytes holding B * 584 (in 64 bits: B may be large).
inline void check_ds_mla_pages(const ArgumentChecks& checks, const TensorDesc& cache,
                               std::int64_t page_alignment) {
  constexpr std::int64_t kRowBytes = 584;
  const std::int64_t rows = cache.size(1);
  if (rows > 1 && cache.stride(1) < kRowBytes) {
    checks.fail("k_cache",
                "row stride (stride(1)) must be at least 584 bytes, so that a page "
                "spans its B packed rows, got " +
                    to_string(cache));
  }
  if (cache.size(0) > 1 &&
      (cache.stride(0) % page_alignment != 0 || cache.stride(0) < rows * kRowBytes)) {
    checks.fail("k_cache", "page stride (stride(0)) must be a multiple of " +
                               std::to_string(page_alignment) + " bytes and at least " +
                               std::to_string(rows * kRowBytes) + " (B * 584), got " +
                               to_string(cache));
  }
}

// The configuration's float type as a tensor dtype.
inline DType to_dtype(FloatDtype dtype) {
  return dtype == FloatDtype::bf16 ? DType::bf16 : DType::f32;
}

}  // namespace zerojit::dsv4
