// Compile keys: plain structs that declare their fields once, and get hashing, printing,
// JSON and NVRTC rendering from that declaration.
//
//   struct AddKey {
//     int block = 128;
//     DType dtype = DType::f32;
//     bool vectorized = false;
//     static constexpr auto fields() {
//       return std::tuple{field("block", &AddKey::block), field("dtype", &AddKey::dtype),
//                         field("vectorized", &AddKey::vectorized)};
//     }
//     auto operator<=>(const AddKey&) const = default;
//   };
//
// A key holds only what the generated code specializes on. The same field machinery also
// prints runtime descriptor structs (which may hold TensorDescs) for error messages.
#pragma once

#include <bit>
#include <compare>
#include <concepts>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "zerojit/dtype.hpp"
#include "zerojit/tensor.hpp"

namespace zerojit {

template <class Owner, class Value>
struct Field {
  std::string_view name;
  Value Owner::*member;
};

template <class Owner, class Value>
constexpr Field<Owner, Value> field(std::string_view name, Value Owner::*member) {
  return {name, member};
}

// A struct that lists its fields with `static constexpr auto fields()`.
template <class T>
concept Described = requires {
  T::fields();
};

// A compile key: described, totally ordered, copyable.
template <class T>
concept CompileKey = Described<T> && std::totally_ordered<T> && std::copyable<T>;

// Calls visit(name, value) for each field of `object`. An entry of fields() without a member (an
// argument struct's checked parameter, arguments.hpp) is no field of the object and is skipped.
template <class T, class Visitor>
constexpr void for_each_field(const T& object, Visitor&& visit) {
  const auto visit_member = [&](const auto& entry) {
    if constexpr (requires { entry.member; }) visit(entry.name, object.*(entry.member));
  };
  std::apply([&](const auto&... entries) { (visit_member(entries), ...); }, T::fields());
}

namespace detail {

void append_integer(std::string& out, std::int64_t value);
void append_unsigned(std::string& out, std::uint64_t value);
void append_double(std::string& out, double value);  // shortest round-trip form
void append_json_string(std::string& out, std::string_view text);

template <class E>
concept PrintableEnum = std::is_enum_v<E> && requires(E e) {
  { to_string(e) } -> std::convertible_to<std::string_view>;
};

template <class V>
void append_value(std::string& out, const V& value) {
  if constexpr (std::is_same_v<V, bool>) {
    out += value ? "true" : "false";
  } else if constexpr (std::is_same_v<V, DType>) {
    out += dtype_name(value);
  } else if constexpr (PrintableEnum<V>) {
    out += to_string(value);
  } else if constexpr (std::is_integral_v<V> && std::is_signed_v<V>) {
    append_integer(out, static_cast<std::int64_t>(value));
  } else if constexpr (std::is_integral_v<V>) {
    append_unsigned(out, static_cast<std::uint64_t>(value));
  } else if constexpr (std::is_floating_point_v<V>) {
    append_double(out, static_cast<double>(value));
  } else if constexpr (std::is_same_v<V, TensorDesc>) {
    out += to_string(value);
  } else if constexpr (std::is_same_v<V, TensorRef>) {
    out += to_string(value.desc);
  } else if constexpr (std::is_convertible_v<V, std::string_view>) {
    out += std::string_view(value);
  } else if constexpr (requires {
                         value.has_value();
                         *value;
                       }) {
    if (value.has_value()) {
      append_value(out, *value);
    } else {
      out += "none";
    }
  } else {
    static_assert(sizeof(V) == 0, "field type has no printed form");
  }
}

template <class V>
void append_json_value(std::string& out, const V& value) {
  if constexpr (std::is_same_v<V, bool> || (std::is_arithmetic_v<V> && !std::is_same_v<V, char>)) {
    append_value(out, value);
  } else if constexpr (requires {
                         value.has_value();
                         *value;
                       }) {
    if (value.has_value()) {
      append_json_value(out, *value);
    } else {
      out += "null";
    }
  } else {
    std::string text;
    append_value(text, value);
    append_json_string(out, text);
  }
}

template <class V>
std::uint64_t field_hash_bits(const V& value) {
  if constexpr (std::is_floating_point_v<V>) {
    return std::bit_cast<std::uint64_t>(static_cast<double>(value));
  } else if constexpr (std::is_enum_v<V>) {
    return static_cast<std::uint64_t>(static_cast<std::underlying_type_t<V>>(value));
  } else if constexpr (std::is_integral_v<V>) {
    return static_cast<std::uint64_t>(value);
  } else {
    static_assert(sizeof(V) == 0, "compile-key fields must be scalars (int, bool, enum, DType)");
  }
}

// A 64-bit finalizer (from splitmix64): spreads every input bit over the output.
constexpr std::uint64_t mix64(std::uint64_t x) {
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ULL;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBULL;
  x ^= x >> 31;
  return x;
}

}  // namespace detail

// "head_dim=128, coarsen=4, cos_sin_dtype=f32"
template <Described T>
std::string describe(const T& object) {
  std::string out;
  for_each_field(object, [&](std::string_view name, const auto& value) {
    if (!out.empty()) out += ", ";
    out += name;
    out += '=';
    detail::append_value(out, value);
  });
  return out;
}

// {"head_dim":128,"coarsen":4,"cos_sin_dtype":"f32"}
template <Described T>
std::string to_json_text(const T& object) {
  std::string out = "{";
  bool first = true;
  for_each_field(object, [&](std::string_view name, const auto& value) {
    if (!first) out += ',';
    first = false;
    detail::append_json_string(out, name);
    out += ':';
    detail::append_json_value(out, value);
  });
  out += '}';
  return out;
}

// Cheap hash for the executor cache's hot path: no allocation, one mix per field.
template <CompileKey T>
std::uint64_t key_hash(const T& key) {
  std::uint64_t hash = 0x2545F4914F6CDD1DULL;
  for_each_field(key, [&](std::string_view, const auto& value) {
    hash = detail::mix64(hash ^ detail::field_hash_bits(value));
  });
  return hash;
}

// Template argument list in field order: "128, 64, 64, float, 4". DTypes render as device type
// names, bools as true/false; integers beyond int's range get an LL suffix. Floating fields
// cannot be C++17 template arguments and are rejected: render them as macros.
std::string render_template_value(bool value);
std::string render_template_value(DType value);
std::string render_template_value(std::int64_t value);

template <CompileKey T>
std::string template_arguments(const T& key) {
  std::string out;
  for_each_field(key, [&](std::string_view, const auto& value) {
    using V = std::decay_t<decltype(value)>;
    static_assert(!std::is_floating_point_v<V>, "render floating key fields as macros");
    if (!out.empty()) out += ", ";
    if constexpr (std::is_same_v<V, bool> || std::is_same_v<V, DType>) {
      out += render_template_value(value);
    } else if constexpr (std::is_enum_v<V>) {
      out += render_template_value(static_cast<std::int64_t>(value));
    } else {
      out += render_template_value(static_cast<std::int64_t>(value));
    }
  });
  return out;
}

std::string render_macro_float(double value);

// NVRTC options "-D<PREFIX><FIELD>=<value>" with the field name upper-cased. DTypes render as
// device type names, floating values as exact hexadecimal float literals.
template <CompileKey T>
std::vector<std::string> macro_definitions(const T& key, std::string_view prefix = "ZJ_") {
  std::vector<std::string> out;
  for_each_field(key, [&](std::string_view name, const auto& value) {
    using V = std::decay_t<decltype(value)>;
    std::string option = "-D";
    option += prefix;
    for (char c : name) option += static_cast<char>(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
    option += '=';
    if constexpr (std::is_same_v<V, bool> || std::is_same_v<V, DType>) {
      option += render_template_value(value);
    } else if constexpr (std::is_floating_point_v<V>) {
      option += render_macro_float(static_cast<double>(value));
    } else {
      option += render_template_value(static_cast<std::int64_t>(value));
    }
    out.push_back(std::move(option));
  });
  return out;
}

namespace detail {

// describe()'s text split into (name, value) pairs, in order. Throws zerojit::Error on a part
// without '='.
std::vector<std::pair<std::string_view, std::string_view>> split_description(std::string_view text);
// One printed value read back; each throws zerojit::Error naming `field` when `text` is not a
// value of its type.
void parse_field_value(std::string_view field, std::string_view text, bool& value);
void parse_field_value(std::string_view field, std::string_view text, DType& value);
void parse_field_value(std::string_view field, std::string_view text, std::int64_t& value);
void parse_field_value(std::string_view field, std::string_view text, double& value);
[[noreturn]] void fail_key_text(std::string_view text, std::string_view problem);

}  // namespace detail

// The inverse of describe() for a compile key: the key whose describe() is `text`. Fields must
// come in the key's order, each once; a key with an enum field cannot be read back (its printed
// name has no parser here). Throws zerojit::Error naming the text and the field at fault. Lets a
// tool or a test that holds only an artifact's key text (a cache entry, a load) get the typed key.
template <CompileKey T>
T key_from_text(std::string_view text) {
  const auto parts = detail::split_description(text);
  T key{};
  std::size_t index = 0;
  const auto read = [&](std::string_view name, auto& value) {
    using V = std::decay_t<decltype(value)>;
    static_assert(!std::is_enum_v<V> || std::is_same_v<V, DType>,
                  "key_from_text reads int, bool, float and DType fields");
    if (index >= parts.size() || parts[index].first != name) {
      detail::fail_key_text(text, "expected field '" + std::string(name) + "' at position " +
                                      std::to_string(index + 1));
    }
    const std::string_view printed = parts[index++].second;
    if constexpr (std::is_same_v<V, bool> || std::is_same_v<V, DType>) {
      detail::parse_field_value(name, printed, value);
    } else if constexpr (std::is_integral_v<V>) {
      std::int64_t wide = 0;
      detail::parse_field_value(name, printed, wide);
      if (wide < std::numeric_limits<V>::min() || wide > std::numeric_limits<V>::max()) {
        detail::fail_key_text(text, "field '" + std::string(name) + "' is out of range");
      }
      value = static_cast<V>(wide);
    } else {
      double wide = 0;
      detail::parse_field_value(name, printed, wide);
      value = static_cast<V>(wide);
    }
  };
  std::apply([&](const auto&... fields) { (read(fields.name, key.*(fields.member)), ...); },
             T::fields());
  if (index != parts.size()) {
    detail::fail_key_text(text, "unexpected field '" + std::string(parts[index].first) + "'");
  }
  return key;
}

// Whether key_from_text reads every field of T (an enum other than DType has no parser).
template <CompileKey T>
constexpr bool key_text_readable() {
  return std::apply(
      [](const auto&... fields) {
        return ((
            !std::is_enum_v<
                std::remove_cvref_t<decltype(std::declval<const T&>().*(fields.member))>> ||
            std::is_same_v<std::remove_cvref_t<decltype(std::declval<const T&>().*(fields.member))>,
                           DType>)&&...);
      },
      T::fields());
}

// Hash functor for unordered containers keyed by compile keys.
struct KeyHasher {
  template <CompileKey T>
  std::size_t operator()(const T& key) const {
    return static_cast<std::size_t>(key_hash(key));
  }
};

}  // namespace zerojit
