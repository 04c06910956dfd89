// A kernel's arguments, declared once. The argument struct is a template over the tensor type:
// with TensorRef it is what a caller fills (addresses and layouts), with TensorDesc it is the
// descriptors dispatch decides from (layouts only), so the two cannot drift apart. It lists its
// fields once, as keys do (key.hpp), each with its role:
//
//   template <class Tensor>
//   struct AxpyArguments {
//     Tensor x;
//     Tensor y;                       // written
//     std::optional<Tensor> mask;     // an optional input
//     float alpha = 1.0f;
//     bool pdl = false;
//     static constexpr auto fields() {
//       return std::tuple{input("x", &AxpyArguments::x),
//                         output("y", &AxpyArguments::y, allocated_like(DType::f32, "x", 1)),
//                         input("mask", &AxpyArguments::mask),
//                         scalar("alpha", &AxpyArguments::alpha),
//                         launch_option("pdl", &AxpyArguments::pdl)};
//     }
//   };
//   using AxpyArgs = AxpyArguments<TensorRef>;
//   using AxpyDescriptors = AxpyArguments<TensorDesc>;
//
// Derived from the declaration: descriptors_of(args) (what the base hands dispatch), their text
// in messages (describe), a binding's positional order (declaration order, launch options
// last), the outputs a binding allocates when the caller passes none, and the operator schema
// a tracing framework registers (operator_schema, mutated outputs marked).
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

#include "zerojit/dtype.hpp"
#include "zerojit/key.hpp"
#include "zerojit/tensor.hpp"

namespace zerojit {

enum class ArgumentRole : std::uint8_t {
  input,          // a tensor the kernel reads (std::optional<Tensor>: may be absent)
  output,         // a tensor the kernel writes
  scalar,         // a value passed by value
  launch_option,  // how to launch (e.g. programmatic dependent launch), never what to compute
};

// How a binding allocates an output its caller passed as None: `dtype`, shaped as the leading
// `leading_dims` extents of the argument named `like`, then the `trailing` extents. An output
// without one must be passed.
struct OutputAllocation {
  DType dtype = DType::f32;
  std::string_view like;  // empty: not allocated
  int leading_dims = 0;
  std::array<std::int64_t, 2> trailing{};
  int trailing_count = 0;
};

constexpr OutputAllocation allocated_like(DType dtype, std::string_view like, int leading_dims,
                                          std::initializer_list<std::int64_t> trailing = {}) {
  OutputAllocation allocation{dtype, like, leading_dims, {}, 0};
  for (const std::int64_t extent : trailing) {
    allocation.trailing.at(static_cast<std::size_t>(allocation.trailing_count++)) = extent;
  }
  return allocation;
}

// A field of an argument struct: a key's Field with its role (and, for an output, how a binding
// allocates it).
template <class Owner, class Value>
struct ArgumentField : Field<Owner, Value> {
  ArgumentRole role = ArgumentRole::scalar;
  OutputAllocation allocation{};
};

namespace detail {

template <class V>
inline constexpr bool is_tensor_field =
    std::is_same_v<V, TensorRef> || std::is_same_v<V, TensorDesc> ||
    std::is_same_v<V, std::optional<TensorRef>> || std::is_same_v<V, std::optional<TensorDesc>>;

template <class V>
inline constexpr bool is_optional_tensor_field =
    std::is_same_v<V, std::optional<TensorRef>> || std::is_same_v<V, std::optional<TensorDesc>>;

}  // namespace detail

template <class Owner, class Value>
constexpr ArgumentField<Owner, Value> input(std::string_view name, Value Owner::*member) {
  static_assert(detail::is_tensor_field<Value>, "an input is a tensor (or an optional one)");
  return {{name, member}, ArgumentRole::input, {}};
}

template <class Owner, class Value>
constexpr ArgumentField<Owner, Value> output(std::string_view name, Value Owner::*member,
                                             OutputAllocation allocation = {}) {
  static_assert(detail::is_tensor_field<Value>, "an output is a tensor (or an optional one)");
  return {{name, member}, ArgumentRole::output, allocation};
}

template <class Owner, class Value>
constexpr ArgumentField<Owner, Value> scalar(std::string_view name, Value Owner::*member) {
  static_assert(std::is_arithmetic_v<Value>, "a scalar is a bool, an integer or a float");
  return {{name, member}, ArgumentRole::scalar, {}};
}

template <class Owner, class Value>
constexpr ArgumentField<Owner, Value> launch_option(std::string_view name, Value Owner::*member) {
  static_assert(std::is_arithmetic_v<Value>, "a launch option is a bool or a number");
  return {{name, member}, ArgumentRole::launch_option, {}};
}

// Argument<TensorRef> -> Argument<TensorDesc>, for an argument struct template of one tensor
// type parameter whose fields are declared with roles.
template <class Args>
struct ArgumentTemplate {
  static constexpr bool declared = false;
};
template <template <class> class Arguments, class Tensor>
requires Described<Arguments<TensorRef>> && Described<Arguments<TensorDesc>>
struct ArgumentTemplate<Arguments<Tensor>> {
  static constexpr bool declared = true;
  template <class T>
  using With = Arguments<T>;
};

// An argument struct declared with roles, as its caller fills it (TensorRef) or as dispatch
// sees it (TensorDesc).
template <class Args>
concept DeclaredArguments = ArgumentTemplate<Args>::declared;

template <DeclaredArguments Args>
using CallArgs = typename ArgumentTemplate<Args>::template With<TensorRef>;
template <DeclaredArguments Args>
using DescriptorsOf = typename ArgumentTemplate<Args>::template With<TensorDesc>;

namespace detail {

inline void assign_descriptor(TensorDesc& to, const TensorRef& from) { to = from.desc; }
inline void assign_descriptor(std::optional<TensorDesc>& to, const std::optional<TensorRef>& from) {
  if (from) to = from->desc;
}
template <class V>
void assign_descriptor(V& to, const V& from) {
  to = from;
}

}  // namespace detail

// The descriptors of a call: each tensor's layout, every other field as given.
template <DeclaredArguments Args>
DescriptorsOf<Args> descriptors_of(const Args& args) {
  using Descriptors = DescriptorsOf<Args>;
  if constexpr (std::is_same_v<Args, Descriptors>) {
    return args;
  } else {
    Descriptors descriptors;
    constexpr auto from = Args::fields();
    constexpr auto to = Descriptors::fields();
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (detail::assign_descriptor(descriptors.*(std::get<I>(to).member),
                                 args.*(std::get<I>(from).member)),
       ...);
    }
    (std::make_index_sequence<std::tuple_size_v<decltype(from)>>{});
    return descriptors;
  }
}

// Calls visit(field) for each declared field, in declaration order (field.name, field.role,
// field.member, field.allocation).
template <DeclaredArguments Args, class Visitor>
constexpr void for_each_argument(Visitor&& visit) {
  std::apply([&](const auto&... fields) { (visit(fields), ...); }, Args::fields());
}

template <DeclaredArguments Args>
inline constexpr std::size_t argument_count = std::tuple_size_v<decltype(Args::fields())>;

// Calls visit(std::integral_constant<std::size_t, I>{}) for each field position I, for code that
// needs the field as a constant (std::get<I>(Args::fields())).
template <DeclaredArguments Args, class Visitor>
constexpr void for_each_argument_index(Visitor&& visit) {
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (visit(std::integral_constant<std::size_t, I>{}), ...);
  }
  (std::make_index_sequence<argument_count<Args>>{});
}

// The position of the field named `name` (argument_count<Args> when there is none), for what
// must be decided at compile time, such as the input an output is allocated like.
template <DeclaredArguments Args>
constexpr std::size_t argument_index(std::string_view name) {
  std::size_t index = 0;
  std::size_t found = argument_count<Args>;
  for_each_argument<Args>([&](const auto& field) {
    if (field.name == name && found == argument_count<Args>) found = index;
    ++index;
  });
  return found;
}

// The operator schema of the arguments in PyTorch's syntax, e.g.
// "(Tensor x, Tensor(a!) y, Tensor? mask, float alpha, bool pdl=False) -> ()": outputs are
// marked as mutated (a!, b!, ...) and nothing is returned, launch options carry their default.
template <DeclaredArguments Args>
std::string operator_schema() {
  std::string schema = "(";
  char alias = 'a';
  const CallArgs<Args> defaults{};
  for_each_argument<CallArgs<Args>>([&](const auto& field) {
    using V = std::remove_cvref_t<decltype(defaults.*(field.member))>;
    if (schema.size() > 1) schema += ", ";
    if constexpr (detail::is_tensor_field<V>) {
      schema += "Tensor";
      if (field.role == ArgumentRole::output) {
        schema += '(';
        schema += alias++;
        schema += "!)";
      }
      if (detail::is_optional_tensor_field<V>) schema += '?';
    } else if constexpr (std::is_same_v<V, bool>) {
      schema += "bool";
    } else if constexpr (std::is_integral_v<V>) {
      schema += "int";
    } else {
      schema += "float";
    }
    schema += ' ';
    schema += field.name;
    if (field.role == ArgumentRole::launch_option) {
      schema += '=';
      if constexpr (std::is_same_v<V, bool>) {
        schema += defaults.*(field.member) ? "True" : "False";
      } else {
        detail::append_value(schema, defaults.*(field.member));
      }
    }
  });
  return schema + ") -> ()";
}

}  // namespace zerojit
