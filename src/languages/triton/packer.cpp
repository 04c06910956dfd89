#include "languages/triton/packer.hpp"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <optional>
#include <vector>

#include "languages/record_json.hpp"
#include "languages/triton/launch_record.hpp"
#include "zerojit/dtype.hpp"
#include "zerojit/error.hpp"

namespace zerojit::languages {
namespace {

// How one argument of a call is checked and packed, as the key's program compiled it.
struct TritonArgument {
  enum class Kind : std::uint8_t { pointer, integer, floating, boolean, constant };
  std::string name;
  Kind kind = Kind::pointer;
  std::string type;                 // Triton's: "*fp32", "i32", "fp16", "i1"; "constexpr"
  std::optional<DType> pointee;     // pointer: the element type it was compiled for
  bool divisible_by_16 = false;     // pointer: 16-byte aligned base; integer: a multiple of 16
  bool constant_none = false;       // constant: compiled as None
  std::int64_t constant_value = 0;  // constant: compiled as this integer (Triton's "== 1")
};

TritonArgument parse_argument(const std::string& kernel, const OrderedJson& spec) {
  TritonArgument argument;
  argument.name = spec.at("name").get<std::string>();
  const auto kind = spec.at("kind").get<std::string>();
  argument.type = spec.at("type").get<std::string>();
  argument.divisible_by_16 = spec.at("divisible").get<bool>();
  argument.constant_none = spec.at("constant_none").get<bool>();
  argument.constant_value = spec.at("constant_value").get<std::int64_t>();
  static const std::pair<const char*, TritonArgument::Kind> kinds[] = {
      {"pointer", TritonArgument::Kind::pointer},   {"integer", TritonArgument::Kind::integer},
      {"floating", TritonArgument::Kind::floating}, {"boolean", TritonArgument::Kind::boolean},
      {"constant", TritonArgument::Kind::constant},
  };
  bool known = false;
  for (const auto& [text, value] : kinds) {
    if (kind == text) argument.kind = value, known = true;
  }
  if (!known) throw InvalidArgument(kernel, argument.name, "has no argument kind '" + kind + "'");
  const auto pointee = spec.at("pointee").get<std::string>();
  if (argument.kind == TritonArgument::Kind::pointer && !pointee.empty()) {
    argument.pointee = parse_dtype(pointee);
    if (!argument.pointee) {
      throw InvalidArgument(kernel, argument.name, "has no zerojit dtype '" + pointee + "'");
    }
  }
  if (argument.kind != TritonArgument::Kind::constant &&
      argument.kind != TritonArgument::Kind::pointer && triton_param_bytes(argument.type) == 0) {
    throw InvalidArgument(kernel, argument.name,
                          "has a type zerojit cannot pack: '" + argument.type + "'");
  }
  return argument;
}

// Whether an integer fits a Triton integer type.
bool fits(const CallValue& value, std::string_view type) {
  if (value.above_int64) return type == "u64";
  const std::int64_t v = value.integer;
  if (type == "i64") return true;
  if (type == "u64") return v >= 0;
  if (type == "i32") return v >= INT32_MIN && v <= INT32_MAX;
  if (type == "u32") return v >= 0 && v <= UINT32_MAX;
  if (type == "i16") return v >= INT16_MIN && v <= INT16_MAX;
  if (type == "u16") return v >= 0 && v <= UINT16_MAX;
  if (type == "i8") return v >= INT8_MIN && v <= INT8_MAX;
  if (type == "u8") return v >= 0 && v <= UINT8_MAX;
  return false;
}

void push_integer(const CallValue& value, std::string_view type, KernelArgs& args) {
  const auto v =
      value.above_int64 ? static_cast<std::int64_t>(value.unsigned_integer) : value.integer;
  if (type == "i64" || type == "u64") {
    args.push(v);
  } else if (type == "i32" || type == "u32") {
    args.push(static_cast<std::uint32_t>(v));
  } else if (type == "i16" || type == "u16") {
    args.push(static_cast<std::uint16_t>(v));
  } else {
    args.push(static_cast<std::uint8_t>(v));
  }
}

// IEEE half from a double, rounded to nearest even straight from the double, as Python's
// struct 'e' (PyFloat_Pack2, what Triton's launcher uses) rounds it; past the largest half it is
// infinity (where Python raises). Written out rather than through _Float16, whose conversion
// comes from a libgcc newer than the glibc floor allows.
std::uint16_t to_half(double value) {
  const auto bits = std::bit_cast<std::uint64_t>(value);
  const auto sign = static_cast<std::uint16_t>((bits >> 48) & 0x8000u);
  const std::uint64_t magnitude = bits & 0x7fffffffffffffffULL;
  if (magnitude >= 0x7ff0000000000000ULL) {  // infinity, NaN
    return sign | (magnitude > 0x7ff0000000000000ULL ? 0x7e00 : 0x7c00);
  }
  const int exponent = static_cast<int>(magnitude >> 52) - 1023;
  if (exponent > 15) return sign | 0x7c00;
  if (exponent < -25) return sign;  // under half the smallest subnormal
  const std::uint64_t mantissa =
      (magnitude & ((std::uint64_t{1} << 52) - 1)) | (std::uint64_t{1} << 52);
  // The half's last place: 2^(exponent - 10) for a normal half, 2^-24 for a subnormal one.
  const int shift = 42 + std::max(0, -14 - exponent);
  std::uint64_t rounded = mantissa >> shift;
  const std::uint64_t rest = mantissa & ((std::uint64_t{1} << shift) - 1);
  const std::uint64_t halfway = std::uint64_t{1} << (shift - 1);
  if (rest > halfway || (rest == halfway && (rounded & 1) != 0)) ++rounded;
  if (exponent < -14) return sign | static_cast<std::uint16_t>(rounded);
  // A carry out of the mantissa moves to the next exponent (and past the last, to infinity).
  return sign | static_cast<std::uint16_t>(((exponent + 14) << 10) + rounded);
}

// As Triton's launcher packs a Python number into a floating-point parameter (fp16 rounded to
// nearest, bf16 truncated from fp32), so that both launch bit-identical arguments.
void push_floating(double number, std::string_view type, KernelArgs& args) {
  if (type == "fp64") {
    args.push(number);
  } else if (type == "fp32") {
    args.push(static_cast<float>(number));
  } else if (type == "bf16") {
    args.push(
        static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(static_cast<float>(number)) >> 16));
  } else {
    args.push(to_half(number));
  }
}

// Whether every value `key`'s program accepts for an argument, `wider`'s accepts too: "" or why
// not. A constant covers only itself; a divisibility the key did not compile refuses values it
// accepts; an integer type covers narrower ones of its sign.
std::string argument_covers(const TritonArgument& key, const TritonArgument& wider) {
  using Kind = TritonArgument::Kind;
  if (wider.kind == Kind::constant) {
    const bool same = key.kind == Kind::constant && key.constant_none == wider.constant_none &&
                      key.constant_value == wider.constant_value;
    return same ? "" : "is compiled as a constant by the fallback only";
  }
  if (key.kind == Kind::constant) {
    if (key.constant_none || wider.kind != Kind::integer) {
      return "is a constant the fallback cannot take";
    }
    return wider.divisible_by_16 && key.constant_value % 16 != 0
               ? "is a constant the fallback's divisibility refuses"
               : "";
  }
  if (key.kind != wider.kind) return "is of another kind in the fallback";
  if (wider.divisible_by_16 && !key.divisible_by_16) {
    return "has divisibility 16 in the fallback only";
  }
  switch (key.kind) {
    case Kind::pointer:
      return !wider.pointee || wider.pointee == key.pointee ? "" : "points to another dtype";
    case Kind::integer: {
      const auto bits = [](const std::string& type) { return std::stoi(type.substr(1)); };
      const bool same_sign = key.type[0] == wider.type[0];
      return key.type == wider.type || (same_sign && bits(wider.type) >= bits(key.type))
                 ? ""
                 : "is " + key.type + ", which the fallback's " + wider.type + " does not hold";
    }
    default:
      return key.type == wider.type ? "" : "is " + key.type + " and " + wider.type;
  }
}

class TritonPacker final : public SpecPacker<TritonArgument> {
 public:
  explicit TritonPacker(std::string_view kernel)
      : SpecPacker(kernel, &parse_argument, &argument_covers) {}

  void pack(const CallToPack& call, PackFailure& failure, PackedCall& out) override {
    const std::vector<TritonArgument>& spec = specs_[call.slot];
    for (std::size_t i = 0; i < spec.size(); ++i) pack_one(spec[i], call.values[i], failure, out);
  }

 private:
  static void pack_one(const TritonArgument& argument, const CallValue& value, PackFailure& failure,
                       PackedCall& out) {
    const auto compiled_as = [&] { return ", and the program compiled it as " + argument.type; };
    switch (argument.kind) {
      case TritonArgument::Kind::constant:
        if (argument.constant_none ? value.kind != CallValue::Kind::none
                                   : value.kind != CallValue::Kind::integer || value.above_int64 ||
                                         value.integer != argument.constant_value) {
          failure.refuse(argument.name,
                         "is " +
                             (value.kind == CallValue::Kind::integer ? integer_text(value)
                                                                     : kind_name(value.kind)) +
                             ", and the program compiled it as the constant " +
                             (argument.constant_none ? std::string("None")
                                                     : std::to_string(argument.constant_value)));
        }
        return;  // a constant is no parameter of the compiled kernel
      case TritonArgument::Kind::pointer:
        if (value.kind != CallValue::Kind::tensor) {
          failure.refuse(argument.name, "is " + kind_name(value.kind) + compiled_as());
        }
        if (argument.pointee && value.tensor.desc.dtype != *argument.pointee) {
          failure.refuse(argument.name,
                         "is " + std::string(dtype_name(value.tensor.desc.dtype)) + compiled_as());
        }
        if (argument.divisible_by_16 &&
            reinterpret_cast<std::uintptr_t>(value.tensor.data) % 16 != 0) {
          failure.refuse(argument.name,
                         "has a data pointer that is not 16-byte aligned, and the program "
                         "compiled it as aligned (divisibility 16)");
        }
        out.args.push(value.tensor.data);
        return;
      case TritonArgument::Kind::integer:
        if (value.kind != CallValue::Kind::integer) {
          failure.refuse(argument.name, "is " + kind_name(value.kind) + compiled_as());
        }
        if (!fits(value, argument.type)) {
          failure.refuse(argument.name, "= " + integer_text(value) + " does not fit " +
                                            argument.type + ", the width the program compiled");
        }
        if (argument.divisible_by_16 &&
            (value.above_int64 ? value.unsigned_integer % 16 != 0 : value.integer % 16 != 0)) {
          failure.refuse(argument.name,
                         "= " + integer_text(value) +
                             " is not a multiple of 16, and the program compiled it as one "
                             "(divisibility 16)");
        }
        push_integer(value, argument.type, out.args);
        return;
      case TritonArgument::Kind::floating:
        if (value.kind == CallValue::Kind::floating) {
          push_floating(value.number, argument.type, out.args);
        } else if (value.kind == CallValue::Kind::integer) {  // a whole number for a float
          push_floating(value.above_int64 ? static_cast<double>(value.unsigned_integer)
                                          : static_cast<double>(value.integer),
                        argument.type, out.args);
        } else {
          failure.fail(argument.name,
                       "must be a number (" + argument.type + "), got " + kind_name(value.kind));
        }
        return;
      case TritonArgument::Kind::boolean:
        if (value.kind != CallValue::Kind::boolean) {
          failure.refuse(argument.name, "is " + kind_name(value.kind) + compiled_as());
        }
        out.args.push(static_cast<std::uint8_t>(value.flag ? 1 : 0));
        return;
    }
  }
};

}  // namespace

std::unique_ptr<ArgumentPacker> make_triton_packer(std::string_view kernel) {
  return std::make_unique<TritonPacker>(kernel);
}

}  // namespace zerojit::languages
