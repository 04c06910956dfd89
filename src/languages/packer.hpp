// A language's argument packer: the one language-specific step of the call path every kernel
// defined in Python takes (python/src/kernel_call.cpp). The call path reads the arguments once
// (CallValue), finds the key's slot and launch geometry in its memo, checks that the tensors
// are CUDA tensors on one device, and hands the values to the packer of the kernel's language,
// which checks each against what the slot's program compiled and packs the launch (PackedCall,
// launch.hpp) in its entry kind's form. Packers are plain C++: their specs come as JSON from the
// language's Python owner, once per slot.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "zerojit/error.hpp"
#include "zerojit/language.hpp"
#include "zerojit/launch.hpp"
#include "zerojit/tensor.hpp"

namespace zerojit::languages {

// One argument of a call, read once: a Python None, bool, int or float (numpy's scalars
// included) or a tensor of any DLPack producer.
struct CallValue {
  enum class Kind : std::uint8_t { none, boolean, integer, floating, tensor };
  Kind kind = Kind::none;
  bool flag = false;
  bool above_int64 = false;  // an integer in [2^63, 2^64): `unsigned_integer` holds it
  std::int64_t integer = 0;
  std::uint64_t unsigned_integer = 0;
  double number = 0.0;
  TensorRef tensor;
  // The type that produced a scalar (int, numpy.int64, bool, ...): the dispatch memo keeps
  // values that are equal across types apart, so dispatch sees each type at least once.
  const void* type = nullptr;
};

// "17", "None", "a tensor": for messages.
std::string integer_text(const CallValue& value);
std::string kind_name(CallValue::Kind kind);

// How a packer reports a call it cannot pack.
class PackFailure {
 public:
  virtual ~PackFailure() = default;
  // The call needs another specialization than the slot's program compiled (a dtype, an
  // alignment, a width, a constant): a monitor event, and always refused.
  [[noreturn]] virtual void refuse(std::string_view argument, const std::string& detail) = 0;
  // The value is no value of its parameter at all (a string for an int): InvalidArgument.
  [[noreturn]] virtual void fail(std::string_view argument, const std::string& problem) = 0;
};

// The call a packer packs: the slot's values in the order of the kernel's call parameters.
struct CallToPack {
  std::int64_t slot = -1;
  std::span<const std::string> names;
  std::span<const CallValue> values;
  cuda::Stream stream = nullptr;  // the stream the launch goes to (a host entry takes it)
};

// A packer's specifications by slot: each a JSON list, parsed once into one Argument per entry
// by `parse(kernel, entry)`; a malformed list is an InvalidArgument naming the kernel.
template <class Argument>
class SlotSpecs {
 public:
  using Parse = Argument (*)(const std::string& kernel, const nlohmann::ordered_json& entry);
  SlotSpecs(std::string_view kernel, Parse parse) : kernel_(kernel), parse_(parse) {}

  const std::string& kernel() const { return kernel_; }
  void set(std::int64_t slot, std::string_view spec_json) {
    std::vector<Argument> arguments;
    try {
      for (const nlohmann::ordered_json& entry : nlohmann::ordered_json::parse(spec_json)) {
        arguments.push_back(parse_(kernel_, entry));
      }
    } catch (const nlohmann::json::exception& error) {
      throw InvalidArgument(kernel_, "program",
                            std::string("malformed argument specification: ") + error.what());
    }
    if (slot < 0) throw Error("kernel " + kernel_ + ": no slot " + std::to_string(slot));
    const auto index = static_cast<std::size_t>(slot);
    if (index >= specs_.size()) specs_.resize(index + 1);
    specs_[index] = std::move(arguments);
    known_.resize(specs_.size());
    known_[index] = true;
  }
  bool has(std::int64_t slot) const {
    return slot >= 0 && static_cast<std::size_t>(slot) < known_.size() &&
           known_[static_cast<std::size_t>(slot)];
  }
  const std::vector<Argument>& operator[](std::int64_t slot) const {
    return specs_[static_cast<std::size_t>(slot)];
  }

 private:
  std::string kernel_;
  Parse parse_;
  std::vector<std::vector<Argument>> specs_;  // by slot
  std::vector<bool> known_;
};

class ArgumentPacker {
 public:
  virtual ~ArgumentPacker() = default;
  // The arguments of `slot`'s program as the language's Python owner describes them, a JSON
  // list; throws InvalidArgument naming the kernel and the argument at fault.
  virtual void set_spec(std::int64_t slot, std::string_view spec_json) = 0;
  virtual bool has_spec(std::int64_t slot) const = 0;
  // Checks every value against the slot's spec and packs the launch into `out` (whose geometry
  // the call path set). Reports through `failure`; never launches.
  virtual void pack(const CallToPack& call, PackFailure& failure, PackedCall& out) = 0;
  // Whether every call `slot`'s spec accepts is one `fallback`'s accepts too (a fallback key
  // serves the calls its key would): "" when it does, else the first argument it would refuse
  // and why. Both slots have specs.
  virtual std::string covers(std::int64_t slot, std::int64_t fallback) const = 0;
};

// The packer of a language whose specs are one Argument per parameter (each with a `name`),
// kept as SlotSpecs: a fallback covers a key where the two take as many arguments and each of
// the fallback's covers the key's (`argument_covers(key, wider)`: "" where it does, else why not).
template <class Argument>
class SpecPacker : public ArgumentPacker {
 public:
  using Covers = std::string (*)(const Argument& key, const Argument& wider);
  SpecPacker(std::string_view kernel, typename SlotSpecs<Argument>::Parse parse,
             Covers argument_covers)
      : specs_(kernel, parse), argument_covers_(argument_covers) {}

  void set_spec(std::int64_t slot, std::string_view spec_json) override {
    specs_.set(slot, spec_json);
  }
  bool has_spec(std::int64_t slot) const override { return specs_.has(slot); }

  std::string covers(std::int64_t slot, std::int64_t fallback) const override {
    const std::vector<Argument>& key = specs_[slot];
    const std::vector<Argument>& wider = specs_[fallback];
    if (key.size() != wider.size()) return "the two programs take different arguments";
    for (std::size_t i = 0; i < key.size(); ++i) {
      std::string why = argument_covers_(key[i], wider[i]);
      if (!why.empty()) return "argument '" + key[i].name + "' " + why;
    }
    return {};
  }

 protected:
  SlotSpecs<Argument> specs_;

 private:
  Covers argument_covers_;
};

}  // namespace zerojit::languages
