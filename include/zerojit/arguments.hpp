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
// in messages (describe), a binding's positional order (declaration order), the outputs a
// binding allocates when the caller passes none, and the operator schema a tracing framework
// registers (operator_schema, mutated outputs marked).
//
// A binding's signature (vLLM's, for the DSv4 kernels) may say more than the kernel takes, and
// the declaration says that too, where the signature has it:
//   - repeated_size / repeated_stride / dtype_flag: a value the caller passes beside the tensors
//     that restates one of them (a block size, a page stride, a "full rows" flag). The struct
//     has no member for it: a binding checks it against the tensor it describes, then drops it.
//   - implied(...): a field the call's route sets (a C4 store's compress ratio), never a caller;
//     bindings leave its default.
//   - input(..., unit_scale_when(tensor, dtype)): an optional input a binding fills with a
//     float32 [1] tensor of ones when the caller passes None (vLLM's default per-tensor scale).
//   - input(..., indexes(tensor, dims, "what")): an index tensor, whose values a binding that
//     reads them on the host (the CPU reference) checks against the tensor they index.
//   - output(..., allocated_like(...).with_like_rank(r).with_extent_divided(dim, d)): an
//     allocated output shaped by some extents of a tensor of another rank, or by a fraction of
//     one (MXFP4's D / 2 packed bytes and D / 32 scales).
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

#include "zerojit/checks.hpp"
#include "zerojit/dtype.hpp"
#include "zerojit/key.hpp"
#include "zerojit/tensor.hpp"

namespace zerojit {

enum class ArgumentRole : std::uint8_t {
  input,          // a tensor the kernel reads (std::optional<Tensor>: may be absent)
  output,         // a tensor the kernel writes
  scalar,         // a value passed by value
  launch_option,  // how to launch (e.g. programmatic dependent launch), never what to compute
  implied,        // a value the call's route sets, never its caller: bindings leave its default
  checked,        // a binding's value that restates a tensor's size, stride or dtype (no member)
};

// How a binding allocates an output its caller passed as None: `dtype`, shaped as the leading
// `leading_dims` extents of the argument named `like` (each divided by its divisor), then the
// `trailing` extents. `like` must have rank `like_rank` (leading_dims unless stated). An output
// without one must be passed.
struct OutputAllocation {
  DType dtype = DType::f32;
  std::string_view like;  // empty: not allocated
  int leading_dims = 0;
  std::array<std::int64_t, 2> trailing{};
  int trailing_count = 0;
  int like_rank = 0;
  std::array<std::int64_t, kMaxTensorDims> divisors{};  // 0: the whole extent

  // `like` has rank `rank`, more than the extents the output takes of it.
  constexpr OutputAllocation with_like_rank(int rank) const {
    if (rank < leading_dims || rank > kMaxTensorDims) {
      throw std::logic_error("an allocation takes more extents than its tensor's rank");
    }
    OutputAllocation out = *this;
    out.like_rank = rank;
    return out;
  }
  // The output's extent `dim` is `like`'s divided by `divisor`, which must divide it (two FP4
  // codes a byte: D / 2).
  constexpr OutputAllocation with_extent_divided(int dim, std::int64_t divisor) const {
    if (dim < 0 || dim >= leading_dims || divisor < 1) {
      throw std::logic_error("an allocation divides an extent it does not take");
    }
    OutputAllocation out = *this;
    out.divisors.at(static_cast<std::size_t>(dim)) = divisor;
    return out;
  }
  constexpr std::int64_t divisor(int dim) const {
    const std::int64_t value = divisors.at(static_cast<std::size_t>(dim));
    return value == 0 ? 1 : value;
  }
};

constexpr OutputAllocation allocated_like(DType dtype, std::string_view like, int leading_dims,
                                          std::initializer_list<std::int64_t> trailing = {}) {
  OutputAllocation allocation{};
  allocation.dtype = dtype;
  allocation.like = like;
  allocation.leading_dims = leading_dims;
  allocation.like_rank = leading_dims;
  for (const std::int64_t extent : trailing) {
    allocation.trailing.at(static_cast<std::size_t>(allocation.trailing_count++)) = extent;
  }
  if (leading_dims + allocation.trailing_count > kMaxTensorDims) {
    throw std::logic_error("an allocated output has more dimensions than a tensor can");
  }
  return allocation;
}

// What an index tensor holds, for a binding that reads its values on the host (the CPU
// reference; the CUDA kernels trust them, as vLLM's do): each value below the product of the
// leading `dims` extents of `tensor` (the `what` of that tensor, in messages), negative values
// being the kernels' "skip". With `read_where`, element i is read only where element i of that
// other index tensor is >= 0 (a position is read only for a token that writes).
struct IndexBound {
  std::string_view tensor;  // empty: not an index tensor
  int dims = 0;
  std::string_view what;
  std::string_view read_where_tensor;

  constexpr IndexBound read_where(std::string_view index_tensor) const {
    IndexBound out = *this;
    out.read_where_tensor = index_tensor;
    return out;
  }
};

constexpr IndexBound indexes(std::string_view tensor, int dims, std::string_view what) {
  return IndexBound{tensor, dims, what, {}};
}

// An optional input a binding fills when its caller passes None: a float32 [1] tensor of ones
// on the device of `tensor`, when `tensor` has dtype `dtype`; otherwise it stays absent.
struct UnitScaleDefault {
  std::string_view tensor;  // empty: no default
  DType dtype = DType::f32;
};

constexpr UnitScaleDefault unit_scale_when(std::string_view tensor, DType dtype) {
  return UnitScaleDefault{tensor, dtype};
}

// A field of an argument struct: a key's Field with its role (and, for an output, how a binding
// allocates it; for an input, what it indexes or how a binding fills it when absent).
template <class Owner, class Value>
struct ArgumentField : Field<Owner, Value> {
  ArgumentRole role = ArgumentRole::scalar;
  OutputAllocation allocation{};
  IndexBound bound{};
  UnitScaleDefault fallback{};
};

// What a checked parameter restates about the tensor it describes.
enum class RestatedProperty : std::uint8_t {
  size,    // tensor.shape[dim]
  stride,  // tensor.stride(0), in elements
  dtype,   // True exactly when the tensor's dtype is one of `dtypes`
};

// A value of a binding's signature that restates a tensor (no member of the struct holds it):
// None, or what the tensor says. A size or stride is an `int?` in the operator schema, a dtype
// flag a `bool?`.
struct CheckedParameter {
  std::string_view name;
  ArgumentRole role = ArgumentRole::checked;
  RestatedProperty property = RestatedProperty::size;
  std::string_view tensor;
  int dim = 0;
  DTypeSet dtypes{};
};

namespace detail {

template <class V>
inline constexpr bool is_tensor_field =
    std::is_same_v<V, TensorRef> || std::is_same_v<V, TensorDesc> ||
    std::is_same_v<V, std::optional<TensorRef>> || std::is_same_v<V, std::optional<TensorDesc>>;

template <class V>
inline constexpr bool is_optional_tensor_field =
    std::is_same_v<V, std::optional<TensorRef>> || std::is_same_v<V, std::optional<TensorDesc>>;

template <class Owner, class Value>
constexpr ArgumentField<Owner, Value> make_field(std::string_view name, Value Owner::*member,
                                                 ArgumentRole role) {
  ArgumentField<Owner, Value> entry{};
  entry.name = name;
  entry.member = member;
  entry.role = role;
  return entry;
}

}  // namespace detail

// An entry of fields() that is a field (a member of the struct), not a checked parameter.
template <class Entry>
inline constexpr bool is_argument_field = requires(const Entry& entry) {
  entry.member;
};

template <class Owner, class Value>
constexpr ArgumentField<Owner, Value> input(std::string_view name, Value Owner::*member,
                                            IndexBound bound = {}) {
  static_assert(detail::is_tensor_field<Value>, "an input is a tensor (or an optional one)");
  auto entry = detail::make_field(name, member, ArgumentRole::input);
  entry.bound = bound;
  return entry;
}

template <class Owner, class Value>
constexpr ArgumentField<Owner, Value> input(std::string_view name, Value Owner::*member,
                                            UnitScaleDefault fallback) {
  static_assert(detail::is_optional_tensor_field<Value>, "only an optional input has a default");
  auto entry = detail::make_field(name, member, ArgumentRole::input);
  entry.fallback = fallback;
  return entry;
}

template <class Owner, class Value>
constexpr ArgumentField<Owner, Value> output(std::string_view name, Value Owner::*member,
                                             OutputAllocation allocation = {}) {
  static_assert(detail::is_tensor_field<Value>, "an output is a tensor (or an optional one)");
  auto entry = detail::make_field(name, member, ArgumentRole::output);
  entry.allocation = allocation;
  return entry;
}

template <class Owner, class Value>
constexpr ArgumentField<Owner, Value> scalar(std::string_view name, Value Owner::*member) {
  static_assert(std::is_arithmetic_v<Value>, "a scalar is a bool, an integer or a float");
  return detail::make_field(name, member, ArgumentRole::scalar);
}

template <class Owner, class Value>
constexpr ArgumentField<Owner, Value> launch_option(std::string_view name, Value Owner::*member) {
  static_assert(std::is_arithmetic_v<Value>, "a launch option is a bool or a number");
  return detail::make_field(name, member, ArgumentRole::launch_option);
}

template <class Owner, class Value>
constexpr ArgumentField<Owner, Value> implied(std::string_view name, Value Owner::*member) {
  static_assert(std::is_arithmetic_v<Value>, "an implied field is a bool or a number");
  return detail::make_field(name, member, ArgumentRole::implied);
}

// `name` restates tensor.shape[dim] (vLLM's block sizes).
constexpr CheckedParameter repeated_size(std::string_view name, std::string_view tensor, int dim) {
  return CheckedParameter{name, ArgumentRole::checked, RestatedProperty::size, tensor, dim, {}};
}
// `name` restates tensor.stride(0) (a page stride).
constexpr CheckedParameter repeated_stride(std::string_view name, std::string_view tensor) {
  return CheckedParameter{name, ArgumentRole::checked, RestatedProperty::stride, tensor, 0, {}};
}
// `name` is True exactly when the tensor's dtype is one of `dtypes` (a layout flag).
constexpr CheckedParameter dtype_flag(std::string_view name, std::string_view tensor,
                                      std::initializer_list<DType> dtypes) {
  return CheckedParameter{name, ArgumentRole::checked, RestatedProperty::dtype, tensor,
                          0,    dtype_set(dtypes)};
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

// The number of entries of the declaration (fields and checked parameters).
template <DeclaredArguments Args>
inline constexpr std::size_t argument_count = std::tuple_size_v<decltype(Args::fields())>;

// The declaration as a constant. Code that runs per call reads the entries from here: a call of
// fields() outside a constant expression is evaluated at run time (the whole tuple, every name
// and rule), which cost a DSv4 op from Python about 1 us per call when each field's read built
// it again.
template <DeclaredArguments Args>
inline constexpr auto argument_fields = Args::fields();

// Calls visit(entry) for each declared entry, in declaration order: fields (entry.name,
// entry.role, entry.member, entry.allocation, entry.bound, entry.fallback) and checked
// parameters (entry.name, entry.role, entry.property, entry.tensor, ...); is_argument_field
// tells them apart.
template <DeclaredArguments Args, class Visitor>
constexpr void for_each_argument(Visitor&& visit) {
  std::apply([&](const auto&... entries) { (visit(entries), ...); }, argument_fields<Args>);
}

// Calls visit(std::integral_constant<std::size_t, I>{}) for each entry position I, for code that
// needs the entry as a constant (std::get<I>(Args::fields())).
template <DeclaredArguments Args, class Visitor>
constexpr void for_each_argument_index(Visitor&& visit) {
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (visit(std::integral_constant<std::size_t, I>{}), ...);
  }
  (std::make_index_sequence<argument_count<Args>>{});
}

// The position of the entry named `name` (argument_count<Args> when there is none), for what
// must be decided at compile time, such as the input an output is allocated like.
template <DeclaredArguments Args>
constexpr std::size_t argument_index(std::string_view name) {
  std::size_t index = 0;
  std::size_t found = argument_count<Args>;
  for_each_argument<Args>([&](const auto& entry) {
    if (entry.name == name && found == argument_count<Args>) found = index;
    ++index;
  });
  return found;
}

// The value of field I of `args` (an entry with a member), for code that finds I at compile time
// (argument_index).
template <std::size_t I, class Args>
requires DeclaredArguments<std::remove_const_t<Args>>
constexpr auto& field_value(Args& args) {
  return args.*(std::get<I>(argument_fields<std::remove_const_t<Args>>).member);
}

namespace detail {

// Whether the entry named `name` is a tensor field (a checked parameter, an allocation, a
// bound or a default can only name one).
template <DeclaredArguments Args>
constexpr bool names_tensor(std::string_view name) {
  bool found = false;
  for_each_argument<Args>([&](const auto& entry) {
    if constexpr (is_argument_field<std::remove_cvref_t<decltype(entry)>>) {
      using V = std::remove_cvref_t<decltype(std::declval<Args>().*(entry.member))>;
      found = found || (entry.name == name && is_tensor_field<V>);
    }
  });
  return found;
}

}  // namespace detail

// Whether every tensor the declaration names (an allocation's `like`, a checked parameter's
// tensor, a bound's tensors, a default's tensor) is a tensor field of it. KernelRow requires it.
template <DeclaredArguments Args>
constexpr bool references_resolve() {
  bool resolve = true;
  for_each_argument<Args>([&](const auto& entry) {
    if constexpr (is_argument_field<std::remove_cvref_t<decltype(entry)>>) {
      const auto named = [](std::string_view name) {
        return name.empty() || detail::names_tensor<Args>(name);
      };
      resolve = resolve && named(entry.allocation.like) && named(entry.bound.tensor) &&
                named(entry.bound.read_where_tensor) && named(entry.fallback.tensor);
    } else {
      resolve = resolve && detail::names_tensor<Args>(entry.tensor);
    }
  });
  return resolve;
}

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
    for_each_argument_index<Args>([&](auto index) {
      constexpr auto from = std::get<index.value>(Args::fields());
      if constexpr (is_argument_field<decltype(from)>) {
        constexpr auto to = std::get<index.value>(Descriptors::fields());
        detail::assign_descriptor(descriptors.*(to.member), args.*(from.member));
      }
    });
    return descriptors;
  }
}

// --- For bindings ------------------------------------------------------------------------------

// Refuses `like`, the tensor an output is allocated like, when its rank is not the rule's.
inline void check_allocation_source(const OutputAllocation& allocation, const TensorDesc& like,
                                    const ArgumentChecks& checks) {
  if (like.ndim != allocation.like_rank) {
    checks.fail(allocation.like, "must have " + std::to_string(allocation.like_rank) +
                                     " dimensions, got " + to_string(like));
  }
}

// The shape `allocation` gives the output `output` from `like` (whose rank was checked); its
// rank is returned. Refuses an extent of `like` that a divisor does not divide, naming `like`.
inline std::size_t allocated_shape(const OutputAllocation& allocation, const TensorDesc& like,
                                   std::string_view output, const ArgumentChecks& checks,
                                   std::array<std::int64_t, kMaxTensorDims>& shape) {
  std::size_t rank = 0;
  for (int dim = 0; dim < allocation.leading_dims; ++dim) {
    const std::int64_t divisor = allocation.divisor(dim);
    if (like.size(dim) % divisor != 0) {
      checks.fail(allocation.like, "size of dim " + std::to_string(dim) +
                                       " must be a multiple of " + std::to_string(divisor) + " (" +
                                       std::string(output) + " holds it divided by " +
                                       std::to_string(divisor) + "), got " + to_string(like));
    }
    shape.at(rank++) = like.size(dim) / divisor;
  }
  for (int i = 0; i < allocation.trailing_count; ++i) {
    shape.at(rank++) = allocation.trailing.at(static_cast<std::size_t>(i));
  }
  return rank;
}

// Refuses a value the caller passed for a checked parameter that the tensor it describes
// contradicts (nothing passed: nothing to check).
inline void check_restated(const CheckedParameter& parameter, std::optional<std::int64_t> value,
                           const TensorDesc& tensor, const ArgumentChecks& checks) {
  if (parameter.property == RestatedProperty::stride) {
    checks.matches_stride(value, parameter.name, tensor, parameter.tensor);
  } else {
    checks.matches_size(value, parameter.name, tensor, parameter.tensor, parameter.dim);
  }
}
inline void check_restated(const CheckedParameter& parameter, std::optional<bool> flag,
                           const TensorDesc& tensor, const ArgumentChecks& checks) {
  checks.matches_dtype_flag(flag, parameter.name, tensor, parameter.tensor, parameter.dtypes);
}

// The operator schema of the arguments in PyTorch's syntax, e.g.
// "(Tensor x, Tensor(a!) y, Tensor? mask, float alpha, bool pdl=False) -> ()": outputs are
// marked as mutated (a!, b!, ...) and nothing is returned, launch options carry their default,
// implied fields are left out and checked parameters are optional (int? or bool?).
template <DeclaredArguments Args>
std::string operator_schema() {
  std::string schema = "(";
  char alias = 'a';
  const CallArgs<Args> defaults{};
  for_each_argument<CallArgs<Args>>([&](const auto& entry) {
    if (entry.role == ArgumentRole::implied) return;
    if (schema.size() > 1) schema += ", ";
    if constexpr (!is_argument_field<std::remove_cvref_t<decltype(entry)>>) {
      schema += entry.property == RestatedProperty::dtype ? "bool? " : "int? ";
      schema += entry.name;
    } else {
      using V = std::remove_cvref_t<decltype(defaults.*(entry.member))>;
      if constexpr (detail::is_tensor_field<V>) {
        schema += "Tensor";
        if (entry.role == ArgumentRole::output) {
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
      schema += entry.name;
      if (entry.role == ArgumentRole::launch_option) {
        schema += '=';
        if constexpr (std::is_same_v<V, bool>) {
          schema += defaults.*(entry.member) ? "True" : "False";
        } else {
          detail::append_value(schema, defaults.*(entry.member));
        }
      }
    }
  });
  return schema + ") -> ()";
}

}  // namespace zerojit
