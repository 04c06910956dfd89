#include "zerojit/dtype.hpp"

#include <array>

namespace zerojit {
namespace {

struct DTypeInfo {
  DType dtype;
  std::string_view name;
  int size_bytes;
  std::string_view device_type;
  DLPackDType dlpack;
};

// DLPack type codes (dlpack.h, v1.1).
constexpr std::uint8_t kDLInt = 0;
constexpr std::uint8_t kDLUInt = 1;
constexpr std::uint8_t kDLFloat = 2;
constexpr std::uint8_t kDLBfloat = 4;
constexpr std::uint8_t kDLBool = 6;
constexpr std::uint8_t kDLFloat8_e4m3fn = 10;
constexpr std::uint8_t kDLFloat8_e5m2 = 12;
constexpr std::uint8_t kDLFloat8_e8m0fnu = 14;
constexpr std::uint8_t kDLFloat4_e2m1fn = 17;

constexpr std::array<DTypeInfo, kDTypeCount> kTable = {{
    {DType::boolean, "bool", 1, "bool", {kDLBool, 8, 1}},
    {DType::i8, "i8", 1, "zj::i8", {kDLInt, 8, 1}},
    {DType::i16, "i16", 2, "short", {kDLInt, 16, 1}},
    {DType::i32, "i32", 4, "int", {kDLInt, 32, 1}},
    {DType::i64, "i64", 8, "long long", {kDLInt, 64, 1}},
    {DType::u8, "u8", 1, "zj::u8", {kDLUInt, 8, 1}},
    {DType::u16, "u16", 2, "zj::u16", {kDLUInt, 16, 1}},
    {DType::u32, "u32", 4, "zj::u32", {kDLUInt, 32, 1}},
    {DType::u64, "u64", 8, "zj::u64", {kDLUInt, 64, 1}},
    {DType::f16, "f16", 2, "zj::f16_t", {kDLFloat, 16, 1}},
    {DType::bf16, "bf16", 2, "zj::bf16_t", {kDLBfloat, 16, 1}},
    {DType::f32, "f32", 4, "float", {kDLFloat, 32, 1}},
    {DType::f64, "f64", 8, "double", {kDLFloat, 64, 1}},
    {DType::e4m3, "e4m3", 1, "zj::u8", {kDLFloat8_e4m3fn, 8, 1}},
    {DType::e5m2, "e5m2", 1, "zj::u8", {kDLFloat8_e5m2, 8, 1}},
    {DType::e2m1x2, "e2m1x2", 1, "zj::u8", {kDLFloat4_e2m1fn, 4, 1}},
    {DType::ue8m0, "ue8m0", 1, "zj::u8", {kDLFloat8_e8m0fnu, 8, 1}},
}};

const DTypeInfo& info(DType dtype) { return kTable[static_cast<std::size_t>(dtype)]; }

}  // namespace

std::string_view dtype_name(DType dtype) { return info(dtype).name; }

std::string to_string(const DTypeSet& dtypes) {
  std::string text;
  for (int i = 0; i < dtypes.count; ++i) {
    if (i > 0) text += " or ";
    text += dtype_name(dtypes.values.at(static_cast<std::size_t>(i)));
  }
  return text;
}

std::optional<DType> parse_dtype(std::string_view name) {
  for (const auto& entry : kTable) {
    if (entry.name == name) return entry.dtype;
  }
  // Common spellings from other libraries.
  if (name == "float32" || name == "float") return DType::f32;
  if (name == "bfloat16") return DType::bf16;
  if (name == "float16" || name == "half") return DType::f16;
  if (name == "int32") return DType::i32;
  if (name == "int64") return DType::i64;
  if (name == "uint8") return DType::u8;
  if (name == "float8_e4m3fn") return DType::e4m3;
  return std::nullopt;
}

int dtype_size_bytes(DType dtype) { return info(dtype).size_bytes; }

std::string_view device_type_name(DType dtype) { return info(dtype).device_type; }

std::optional<DType> dtype_from_dlpack(DLPackDType dl) {
  if (dl.lanes != 1) return std::nullopt;
  // PyTorch exports packed fp4 (float4_e2m1fn_x2) as 8-bit kDLFloat4_e2m1fn; accept both.
  if (dl.code == kDLFloat4_e2m1fn && (dl.bits == 4 || dl.bits == 8)) return DType::e2m1x2;
  for (const auto& entry : kTable) {
    if (entry.dlpack == dl) return entry.dtype;
  }
  return std::nullopt;
}

DLPackDType dtype_to_dlpack(DType dtype) { return info(dtype).dlpack; }

}  // namespace zerojit
