// What every DSv4 kernel owner includes: the kernel contract, the family's embedded device
// sources, and the configuration its gate reads.
#pragma once

#include "dsv4/config.hpp"
#include "zerojit/embedded.hpp"
#include "zerojit/zerojit.hpp"

namespace zerojit::dsv4 {

// The DSv4 device sources (every folder's .cu, .cuh and params headers), embedded at build time.
const EmbeddedFileSet& embedded_files();

// The configuration's float type as a tensor dtype.
inline DType to_dtype(FloatDtype dtype) {
  return dtype == FloatDtype::bf16 ? DType::bf16 : DType::f32;
}

}  // namespace zerojit::dsv4
