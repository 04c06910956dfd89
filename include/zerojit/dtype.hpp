// Element types of the tensors zerojit kernels take, and their DLPack codes.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

namespace zerojit {

enum class DType : std::uint8_t {
  boolean,
  i8,
  i16,
  i32,
  i64,
  u8,
  u16,
  u32,
  u64,
  f16,
  bf16,
  f32,
  f64,
  e4m3,    // OCP FP8 E4M3FN
  e5m2,    // OCP FP8 E5M2
  e2m1x2,  // two FP4 E2M1 values packed in a byte, element 2k in the low nibble
  ue8m0,   // unsigned 8-bit power-of-two scale (E8M0FNU)
};

inline constexpr int kDTypeCount = static_cast<int>(DType::ue8m0) + 1;

// A small set of dtypes, usable in constant expressions (an argument declaration's "True for
// these dtypes", arguments.hpp).
struct DTypeSet {
  std::array<DType, kDTypeCount> values{};
  int count = 0;

  constexpr bool contains(DType dtype) const {
    for (int i = 0; i < count; ++i) {
      if (values.at(static_cast<std::size_t>(i)) == dtype) return true;
    }
    return false;
  }
};

constexpr DTypeSet dtype_set(std::initializer_list<DType> dtypes) {
  DTypeSet set{};
  for (const DType dtype : dtypes) {
    if (!set.contains(dtype)) set.values.at(static_cast<std::size_t>(set.count++)) = dtype;
  }
  return set;
}

// "bf16 or e4m3".
std::string to_string(const DTypeSet& dtypes);

// Lower-case name, e.g. "bf16"; also what parse_dtype accepts.
std::string_view dtype_name(DType dtype);
std::optional<DType> parse_dtype(std::string_view name);

// Storage size of one element (for e2m1x2: one byte holding two values).
int dtype_size_bytes(DType dtype);

// The type a kernel template sees for this dtype, e.g. "float" or "zj::bf16_t" (see
// zerojit/device/types.cuh, installed for kernels to include).
std::string_view device_type_name(DType dtype);

// DLPack's DLDataType triple.
struct DLPackDType {
  std::uint8_t code;
  std::uint8_t bits;
  std::uint16_t lanes;
  bool operator==(const DLPackDType&) const = default;
};

// Maps a DLPack dtype to ours; std::nullopt when zerojit has no such type (complex, vector
// lanes, fp6, ...). An e2m1 tensor (code kDLFloat4_e2m1fn, 4 bits) maps to e2m1x2: the packed
// byte storage zerojit kernels use.
std::optional<DType> dtype_from_dlpack(DLPackDType dl);
DLPackDType dtype_to_dlpack(DType dtype);

}  // namespace zerojit
