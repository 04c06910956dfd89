// A call of one of the DSv4 family's Python ops, read from Python objects by its kernel's
// declared arguments (zerojit/arguments.hpp), for the launch path (fast_ops.cpp) and the CPU
// references (reference_ops.cpp) alike:
//   - FamilyOp: the op's rows of the family table (one kernel, or one per dtype of a tensor:
//     the C4 and C128 stores, by the K cache's dtype) and the kernel a call goes to;
//   - the op's positional signature: the declared entries in order, implied fields left out,
//     launch options on the launch path only;
//   - DeclaredReader: each entry from its object. A tensor is followed at once by what restates
//     it (a checked parameter, the rank an allocation rule needs of it), so the first bad
//     argument named is the one closest to its tensor; an absent optional input with a default
//     gets it.
#pragma once

#include <Python.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "arguments.hpp"
#include "dsv4/family.hpp"

namespace zerojit::python {

// Which entries an op's signature holds.
enum class Binding {
  launch,     // the launch path: launch options too (the stream comes after them)
  reference,  // the CPU reference, which launches nothing: no launch options
};

template <Binding B, class Entry>
constexpr bool in_signature(const Entry& entry) {
  return entry.role != ArgumentRole::implied &&
         (B == Binding::launch || entry.role != ArgumentRole::launch_option);
}

// The number of positional arguments of the signature.
template <class Args, Binding B>
constexpr std::size_t signature_size() {
  std::size_t size = 0;
  for_each_argument<Args>([&](const auto& entry) { size += in_signature<B>(entry) ? 1 : 0; });
  return size;
}

// The position of entry I in the signature.
template <class Args, Binding B, std::size_t I>
constexpr std::size_t signature_position() {
  std::size_t position = 0;
  std::size_t index = 0;
  for_each_argument<Args>([&](const auto& entry) {
    if (index++ < I && in_signature<B>(entry)) ++position;
  });
  return position;
}

// The Python op of the family row `Row` (the first row naming it): the rows that share it and
// which one's kernel takes a call.
template <std::size_t Row>
struct FamilyOp {
  using Table = std::remove_cvref_t<decltype(dsv4::kFamily)>;
  template <std::size_t I>
  using KernelOf = typename std::tuple_element_t<I, typename Table::RowTuple>::KernelType;
  using Args = CallArgs<typename KernelOf<Row>::Descriptors>;

  static constexpr std::string_view name = dsv4::kFamily.row<Row>().python_op;

  static constexpr std::size_t row_count = [] {
    std::size_t count = 0;
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      ((count += dsv4::kFamily.row<I>().python_op == name ? 1 : 0), ...);
    }
    (std::make_index_sequence<Table::row_count>{});
    return count;
  }();

  // The op's rows, in table order: rows[variant].
  static constexpr std::array<std::size_t, row_count> rows = [] {
    std::array<std::size_t, row_count> out{};
    std::size_t next = 0;
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      ((dsv4::kFamily.row<I>().python_op == name ? (out.at(next++) = I, 0) : 0), ...);
    }
    (std::make_index_sequence<Table::row_count>{});
    return out;
  }();

  // Whether Row is the op's first row (the one that binds it).
  static constexpr bool first = rows[0] == Row;

  // The tensor whose dtype picks the kernel (empty for an op of one kernel).
  static constexpr std::string_view selector = dsv4::kFamily.row<Row>().variant.tensor;
  static constexpr std::size_t selector_index = argument_index<Args>(selector);

  static constexpr bool consistent = [] {
    bool same = true;
    [&]<std::size_t... V>(std::index_sequence<V...>) {
      ((same = same && std::is_same_v<CallArgs<typename KernelOf<rows[V]>::Descriptors>, Args> &&
               dsv4::kFamily.row<rows[V]>().variant.tensor == selector),
       ...);
    }
    (std::make_index_sequence<row_count>{});
    return same && (row_count == 1) == selector.empty();
  }();
  static_assert(consistent,
                "rows sharing a Python op take the same arguments, each with the dtypes of one "
                "tensor that pick it (when_dtype); an op of one row has no variant");

  static std::string_view kernel_name(std::size_t variant) {
    std::string_view out;
    with_kernel(variant, [&](const auto& kernel) { out = kernel.name(); });
    return out;
  }

  // The variant whose dtypes hold the selector tensor's; refuses another dtype, naming the
  // tensor and, for each kernel, its dtypes.
  static std::size_t select(const TensorDesc& tensor, const ArgumentChecks& checks) {
    std::size_t chosen = row_count;
    [&]<std::size_t... V>(std::index_sequence<V...>) {
      ((chosen == row_count && dsv4::kFamily.row<rows[V]>().variant.dtypes.contains(tensor.dtype)
            ? (chosen = V, 0)
            : 0),
       ...);
    }
    (std::make_index_sequence<row_count>{});
    if (chosen == row_count) refuse_dtype(tensor, checks);
    return chosen;
  }

  [[noreturn]] static void refuse_dtype(const TensorDesc& tensor, const ArgumentChecks& checks) {
    std::string taken;
    [&]<std::size_t... V>(std::index_sequence<V...>) {
      ((taken += (V == 0 ? "" : ", or ") + to_string(dsv4::kFamily.row<rows[V]>().variant.dtypes) +
                 " (" + KernelOf<rows[V]>::instance().name() + ")"),
       ...);
    }
    (std::make_index_sequence<row_count>{});
    checks.fail(selector, "dtype must be " + taken + ", got " + to_string(tensor));
  }

  // visit(kernel) with the kernel of rows[variant]; returns what visit returns.
  template <class Visit>
  static auto with_kernel(std::size_t variant, Visit&& visit) {
    return [&]<std::size_t... V>(std::index_sequence<V...>) {
      using Result = decltype(visit(KernelOf<rows[0]>::instance()));
      if constexpr (std::is_void_v<Result>) {
        ((variant == V ? (visit(KernelOf<rows[V]>::instance()), 0) : 0), ...);
      } else {
        Result result{};
        ((variant == V ? (result = visit(KernelOf<rows[V]>::instance()), 0) : 0), ...);
        return result;
      }
    }
    (std::make_index_sequence<row_count>{});
  }
};

// The first row of the family table whose Python op is `op`.
constexpr std::size_t family_op_row(std::string_view op) {
  using Table = std::remove_cvref_t<decltype(dsv4::kFamily)>;
  std::size_t found = Table::row_count;
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    ((found == Table::row_count && dsv4::kFamily.row<I>().python_op == op ? (found = I, 0) : 0),
     ...);
  }
  (std::make_index_sequence<Table::row_count>{});
  return found;
}

// Reads the entries of a declared call (Args) from `objects`, one per position of the op's
// signature. `Source` is how the binding takes what only it knows how to take:
//   std::string_view kernel() const;  void set_kernel(std::string_view);
//   ArgumentChecks checks() const;
//   TensorRef input(PyObject*, std::string_view);  TensorRef output(PyObject*, std::string_view);
//   std::optional<TensorRef> optional_input(PyObject*, std::string_view);
//   TensorRef unit_scale(PyObject* like, std::string_view argument);
//   static constexpr bool allocates: an output with an allocation rule is the op's to take after
//   the reading (it may be None), not the reader's.
template <class Args, Binding B, class Source>
class DeclaredReader {
 public:
  DeclaredReader(Source& source, Args& args, PyObject* const* objects)
      : source_(source), args_(args), objects_(objects) {}

  // Entry I, once: a field's value and then what restates it; a checked parameter with (and
  // after) its tensor.
  template <std::size_t I>
  void read() {
    constexpr auto entry = std::get<I>(Args::fields());
    if constexpr (!in_signature<B>(entry)) {
      return;
    } else if constexpr (!is_argument_field<decltype(entry)>) {
      constexpr std::size_t tensor = argument_index<Args>(entry.tensor);
      static_assert(!left_to_the_op<tensor>(), "a value restates an output the op allocates");
      read<tensor>();  // which checks this parameter
    } else {
      if (!read_[I]) {
        read_[I] = true;
        read_value<I>();
      }
      if (!completed_[I]) {
        completed_[I] = true;
        check_restating<I>();
      }
    }
  }

  // Tensor entry I alone, for an op whose kernel it picks: what restates it is checked by the
  // next read<I>(), under the kernel's name.
  template <std::size_t I>
  const TensorRef& read_tensor_first() {
    constexpr auto entry = std::get<I>(Args::fields());
    static_assert(std::is_same_v<std::remove_cvref_t<decltype(args_.*(entry.member))>, TensorRef>);
    if (!read_[I]) {
      read_[I] = true;
      read_value<I>();
    }
    return args_.*(entry.member);
  }

  // Every entry of the signature, in order (none twice).
  void read_all() {
    for_each_argument_index<Args>([&](auto index) { read<index.value>(); });
  }

  // Entry I was set by the caller (what one op hands the next): it is not read.
  template <std::size_t I>
  void preset() {
    read_[I] = completed_[I] = true;
  }

  template <std::size_t I>
  PyObject* object() const {
    return objects_[signature_position<Args, B, I>()];
  }

 private:
  template <std::size_t I>
  static constexpr bool left_to_the_op() {
    constexpr auto entry = std::get<I>(Args::fields());
    return Source::allocates && entry.role == ArgumentRole::output &&
           !entry.allocation.like.empty();
  }

  template <std::size_t I>
  void read_value() {
    constexpr auto entry = std::get<I>(Args::fields());
    auto& value = args_.*(entry.member);
    using V = std::remove_cvref_t<decltype(value)>;
    PyObject* given = object<I>();
    if constexpr (std::is_same_v<V, TensorRef>) {
      if constexpr (left_to_the_op<I>()) {
        return;
      } else if constexpr (entry.role == ArgumentRole::output) {
        value = source_.output(given, entry.name);
      } else {
        value = source_.input(given, entry.name);
      }
    } else if constexpr (std::is_same_v<V, std::optional<TensorRef>>) {
      static_assert(entry.role == ArgumentRole::input, "an optional tensor is an input");
      value = source_.optional_input(given, entry.name);
      if constexpr (!entry.fallback.tensor.empty()) {
        if (!value) value = fallback<I>();
      }
    } else if constexpr (std::is_same_v<V, bool>) {
      value = optional_flag_argument(source_.kernel(), given, entry.name).value_or(value);
    } else if constexpr (std::is_same_v<V, int>) {
      value = int32_argument(source_.kernel(), given, entry.name);
    } else if constexpr (std::is_integral_v<V>) {
      value = integer_argument(source_.kernel(), given, entry.name);
    } else {
      value = static_cast<V>(number_argument(source_.kernel(), given, entry.name));
    }
  }

  // The default of optional input I, absent: a unit scale when its tensor has the dtype.
  template <std::size_t I>
  std::optional<TensorRef> fallback() {
    constexpr auto rule = std::get<I>(Args::fields()).fallback;
    constexpr std::size_t tensor = argument_index<Args>(rule.tensor);
    read<tensor>();
    if (field_value<tensor>(args_).desc.dtype != rule.dtype) return std::nullopt;
    return source_.unit_scale(object<tensor>(), std::get<I>(Args::fields()).name);
  }

  // What restates tensor I: its checked parameters, and the rank outputs allocated like it need.
  template <std::size_t I>
  void check_restating() {
    constexpr auto entry = std::get<I>(Args::fields());
    using V = std::remove_cvref_t<decltype(args_.*(entry.member))>;
    if constexpr (std::is_same_v<V, TensorRef> && !left_to_the_op<I>()) {
      const TensorDesc& tensor = (args_.*(entry.member)).desc;
      for_each_argument_index<Args>([&](auto index) {
        constexpr auto other = std::get<index.value>(Args::fields());
        if constexpr (!is_argument_field<decltype(other)>) {
          if constexpr (other.tensor == entry.name) check_parameter<index.value>(tensor);
        } else if constexpr (other.role == ArgumentRole::output &&
                             other.allocation.like == entry.name) {
          check_allocation_source(other.allocation, tensor, source_.checks());
        }
      });
    }
  }

  template <std::size_t J>
  void check_parameter(const TensorDesc& tensor) {
    constexpr auto parameter = std::get<J>(Args::fields());
    PyObject* given = object<J>();
    if constexpr (parameter.property == RestatedProperty::dtype) {
      check_restated(parameter, optional_flag_argument(source_.kernel(), given, parameter.name),
                     tensor, source_.checks());
    } else {
      check_restated(parameter, optional_integer_argument(source_.kernel(), given, parameter.name),
                     tensor, source_.checks());
    }
  }

  Source& source_;
  Args& args_;
  PyObject* const* objects_;
  std::array<bool, argument_count<Args>> read_{};       // the value is in args_
  std::array<bool, argument_count<Args>> completed_{};  // and what restates it was checked
};

// The variant of `Op` a call goes to (0 for an op of one kernel): its selector tensor is read
// first, the kernel it picks named in every later error, then what restates the tensor checked.
template <class Op, class Reader, class Source>
std::size_t pick_kernel(Reader& reader, Source& source) {
  if constexpr (Op::row_count == 1) {
    return 0;
  } else {
    const TensorRef& tensor = reader.template read_tensor_first<Op::selector_index>();
    const std::size_t variant = Op::select(tensor.desc, source.checks());
    source.set_kernel(Op::kernel_name(variant));
    reader.template read<Op::selector_index>();
    return variant;
  }
}

// "logits, topk_indices, packed|None, dcp_rank, ..., pdl|None": the signature for a docstring
// (|None: the binding takes None), and the outputs it returns (allocatable ones, on the launch
// path).
template <class Args, Binding B>
std::pair<std::string, std::string> signature_text() {
  std::string arguments;
  std::string returns;
  for_each_argument<Args>([&](const auto& entry) {
    if (!in_signature<B>(entry)) return;
    arguments += (arguments.empty() ? "" : ", ") + std::string(entry.name);
    bool optional =
        entry.role == ArgumentRole::launch_option || entry.role == ArgumentRole::checked;
    if constexpr (is_argument_field<std::remove_cvref_t<decltype(entry)>>) {
      using V = std::remove_cvref_t<decltype(std::declval<Args>().*(entry.member))>;
      const bool allocated = B == Binding::launch && entry.role == ArgumentRole::output &&
                             !entry.allocation.like.empty();
      if (allocated) returns += (returns.empty() ? "" : ", ") + std::string(entry.name);
      optional = optional || allocated || std::is_same_v<V, std::optional<TensorRef>>;
    }
    if (optional) arguments += "|None";
  });
  return {arguments, returns};
}

}  // namespace zerojit::python
