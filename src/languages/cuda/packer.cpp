#include "languages/cuda/packer.hpp"

#include <limits>
#include <vector>

#include "languages/record_json.hpp"
#include "zerojit/error.hpp"

namespace zerojit::languages {
namespace {

enum class ParamKind : std::uint8_t { tensor, i32, i64, u32, u64, f32, f64, boolean, pointer };

struct Param {
  std::string name;
  ParamKind kind = ParamKind::tensor;
};

ParamKind parse_kind(const std::string& kernel, const std::string& name, const std::string& kind) {
  static const std::pair<const char*, ParamKind> kinds[] = {
      {"tensor", ParamKind::tensor}, {"i32", ParamKind::i32},      {"i64", ParamKind::i64},
      {"u32", ParamKind::u32},       {"u64", ParamKind::u64},      {"f32", ParamKind::f32},
      {"f64", ParamKind::f64},       {"bool", ParamKind::boolean}, {"pointer", ParamKind::pointer},
  };
  for (const auto& [text, value] : kinds) {
    if (kind == text) return value;
  }
  throw InvalidArgument(
      kernel, name,
      "has no parameter kind '" + kind + "' (tensor, i32, i64, u32, u64, f32, f64, bool, pointer)");
}

// An integer argument within [low, high] (a bool counts as 0 or 1, as in Python).
template <class T>
T bounded(const CallValue& value, std::string_view name, PackFailure& failure) {
  constexpr auto low = std::numeric_limits<T>::min();
  constexpr auto high = std::numeric_limits<T>::max();
  const std::string range = "[" + std::to_string(low) + ", " + std::to_string(high) + "]";
  if (value.kind == CallValue::Kind::boolean) return static_cast<T>(value.flag ? 1 : 0);
  if (value.kind != CallValue::Kind::integer) {
    failure.fail(name, "must be an int in " + range + ", got " + kind_name(value.kind));
  }
  const bool fits =
      value.above_int64
          ? static_cast<unsigned long long>(high) >= value.unsigned_integer
          : value.integer >= static_cast<long long>(low) &&
                (value.integer < 0 || static_cast<unsigned long long>(value.integer) <=
                                          static_cast<unsigned long long>(high));
  if (!fits) {
    failure.fail(name,
                 "must be an int in " + range + ", got " + integer_text(value) + ", out of range");
  }
  return value.above_int64 ? static_cast<T>(value.unsigned_integer) : static_cast<T>(value.integer);
}

double number(const CallValue& value, std::string_view name, PackFailure& failure) {
  if (value.kind != CallValue::Kind::floating && value.kind != CallValue::Kind::integer) {
    failure.fail(name, "must be a number, got " + kind_name(value.kind));
  }
  if (value.kind == CallValue::Kind::floating) return value.number;
  return value.above_int64 ? static_cast<double>(value.unsigned_integer)
                           : static_cast<double>(value.integer);
}

// One parameter: ["x", "tensor"], as zerojit.Kernel.params lists it.
Param parse_param(const std::string& kernel, const OrderedJson& entry) {
  Param param{entry.at(0).get<std::string>(), ParamKind::tensor};
  param.kind = parse_kind(kernel, param.name, entry.at(1).get<std::string>());
  return param;
}

class CudaPacker final : public ArgumentPacker {
 public:
  explicit CudaPacker(std::string_view kernel) : specs_(kernel, &parse_param) {}

  // zerojit.Kernel.params, the same for every slot.
  void set_spec(std::int64_t slot, std::string_view spec_json) override {
    specs_.set(slot, spec_json);
    if (specs_[slot].size() > static_cast<std::size_t>(kMaxKernelParams)) {
      throw InvalidArgument(specs_.kernel(), "params",
                            std::to_string(specs_[slot].size()) +
                                " parameters; a kernel takes at most " +
                                std::to_string(kMaxKernelParams));
    }
  }
  bool has_spec(std::int64_t slot) const override { return specs_.has(slot); }

  // Every key of a CUDA C++ kernel packs the same parameters (zerojit.Kernel.params): what a
  // fallback's launch accepts is what its geometry and dispatch decide, not the packing.
  std::string covers(std::int64_t slot, std::int64_t fallback) const override {
    return specs_[slot].size() == specs_[fallback].size() ? std::string()
                                                          : std::string("the parameters differ");
  }

  void pack(const CallToPack& call, PackFailure& failure, PackedCall& out) override {
    const std::vector<Param>& params = specs_[call.slot];
    if (call.values.size() != params.size()) {
      failure.fail("args", "the launch takes " + std::to_string(params.size()) +
                               " arguments, one per parameter, got " +
                               std::to_string(call.values.size()));
    }
    for (std::size_t i = 0; i < params.size(); ++i) {
      const CallValue& value = call.values[i];
      const std::string& name = params[i].name;
      switch (params[i].kind) {
        case ParamKind::tensor:
          if (value.kind != CallValue::Kind::tensor) {
            failure.fail(name, "must be a tensor, got " + kind_name(value.kind));
          }
          out.args.push(value.tensor.data);
          break;
        case ParamKind::i32:
          out.args.push(bounded<std::int32_t>(value, name, failure));
          break;
        case ParamKind::i64:
          out.args.push(bounded<std::int64_t>(value, name, failure));
          break;
        case ParamKind::u32:
          out.args.push(bounded<std::uint32_t>(value, name, failure));
          break;
        case ParamKind::u64:
          out.args.push(bounded<std::uint64_t>(value, name, failure));
          break;
        case ParamKind::f32:
          out.args.push(static_cast<float>(number(value, name, failure)));
          break;
        case ParamKind::f64:
          out.args.push(number(value, name, failure));
          break;
        case ParamKind::boolean:
          if (value.kind != CallValue::Kind::boolean && value.kind != CallValue::Kind::integer) {
            failure.fail(name, "must be True or False, got " + kind_name(value.kind));
          }
          out.args.push(value.kind == CallValue::Kind::boolean ? value.flag : value.integer != 0);
          break;
        case ParamKind::pointer:
          out.args.push(reinterpret_cast<void*>(bounded<std::uintptr_t>(value, name, failure)));
          break;
      }
    }
  }

 private:
  SlotSpecs<Param> specs_;
};

}  // namespace

std::unique_ptr<ArgumentPacker> make_cuda_packer(std::string_view kernel) {
  return std::make_unique<CudaPacker>(kernel);
}

}  // namespace zerojit::languages
