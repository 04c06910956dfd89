// The types a compile key's dtype renders as in device code (zerojit::device_type_name), for a
// kernel templated on its element type: zj::bf16_t for DType::bf16, zj::u8 for the FP8 and FP4
// storage types, and so on (docs/CONSUMING.md has the whole table). Include it from a kernel as
// "zerojit/device/types.cuh"; zerojit_embed(... DEVICE_HEADERS) embeds it with the kernel.
//
// Compiled by NVRTC from memory: nothing here comes from the CUDA toolkit.
#pragma once

namespace zj {

typedef signed char i8;
typedef unsigned char u8;
typedef unsigned short u16;
typedef int i32;
typedef unsigned int u32;
typedef long long i64;
typedef unsigned long long u64;

// Storage of the 16-bit floats: the bits only, so that a kernel loads them as it chooses
// (zerojit/device/numerics.cuh converts them to and from float).
struct bf16_t {
  u16 bits;
};
struct f16_t {
  u16 bits;
};

}  // namespace zj
