// A kernel family as one table: each row names a kernel owner and its gate, the function that
// says whether a configuration runs the kernel and with which compile-relevant parameters.
// Everything else is derived from the table, so a kernel is listed once:
//   - the decisions (every gate evaluated once per configuration);
//   - warmup registration: each kernel that runs, with the warmup space its gate implies
//     (owner.warmup_space(gate)) under the tag gate.tag() (or describe(gate));
//   - the list of the family's kernels;
//   - routing: a call's arguments go to the kernels of the table that take them (that can make
//     a launch spec of them) and that the configuration runs; runtime entry points and
//     dispatch-only planning share that one router, so they cannot disagree.
//
//   constexpr KernelTable kTable{"family", KernelRow<AddKernel, AddGate, Config>{&add_gate}, ...};
//   auto decisions = kTable.decide(config);
//   kTable.register_warmup(registry, decisions);
//   kTable.route(decisions, add_args, [](auto& kernel, const auto& args) { kernel(args); });
#pragma once

#include <concepts>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "zerojit/error.hpp"
#include "zerojit/kernel.hpp"
#include "zerojit/registry.hpp"

namespace zerojit {

// A kernel whose arguments are declared with roles (arguments.hpp), every tensor the declaration
// names being one of them.
template <class Kernel>
concept DeclaredArgumentsKernel = DeclaredArguments<typename Kernel::Descriptors> &&
    references_resolve<typename Kernel::Descriptors>();

// What a row's kernel must provide, checked where the row is written: declared arguments, a
// warmup space for its gate's answer and a plan for the key dispatch chose.
template <class Kernel, class Gate>
concept FamilyKernel = DeclaredArgumentsKernel<Kernel> &&
    requires(const Kernel& kernel, const Gate& gate, const typename Kernel::Key& key,
             const CallArgs<typename Kernel::Descriptors>& args) {
  { kernel.warmup_space(gate) } -> std::same_as<WarmupSpace<typename Kernel::Descriptors>>;
  kernel.plan(key, args);
};

// Which calls of a Python op that several rows share (one kernel per layout of a tensor, e.g. a
// store per K cache dtype) go to a row's kernel: those whose tensor `tensor` has one of `dtypes`.
struct OpVariant {
  std::string_view tensor;  // empty: the row's op is its alone
  DTypeSet dtypes{};
};

constexpr OpVariant when_dtype(std::string_view tensor, std::initializer_list<DType> dtypes) {
  return OpVariant{tensor, dtype_set(dtypes)};
}

template <class Kernel, class Gate, class Config>
requires FamilyKernel<Kernel, Gate>
struct KernelRow {
  using KernelType = Kernel;
  using GateType = Gate;
  using ConfigType = Config;
  std::optional<Gate> (*gate)(const Config&) = nullptr;
  // The name of the kernel's Python op (empty: none), bound from its declared arguments: the
  // launch path, the CPU reference and the traced operator of a Python binding. Rows whose
  // kernels take the same arguments may share one, each with the `variant` it takes.
  std::string_view python_op = {};
  OpVariant variant = {};
};

// The registration tag of a gate's answer: registrations with the same kernel and tag are the
// same warmup space (every layer of a kind), so distinct answers must give distinct tags.
template <class Gate>
std::string gate_tag(const Gate& gate) {
  if constexpr (requires { gate.tag(); }) {
    return gate.tag();
  } else {
    return describe(gate);
  }
}

// The rows must share one configuration type.
template <class FirstRow, class... Rows>
class KernelTable {
 public:
  using Config = typename FirstRow::ConfigType;
  static_assert((std::is_same_v<Config, typename Rows::ConfigType> && ...),
                "every row of a family decides from the same configuration");
  using RowTuple = std::tuple<FirstRow, Rows...>;
  using Decisions = std::tuple<std::optional<typename FirstRow::GateType>,
                               std::optional<typename Rows::GateType>...>;

  constexpr KernelTable(std::string_view family, FirstRow first, Rows... rows)
      : family_(family), rows_(first, rows...) {}

  std::string_view family() const { return family_; }

  // Every gate's answer for `config` (which the caller validated).
  Decisions decide(const Config& config) const {
    return std::apply([&](const auto&... rows) { return Decisions{rows.gate(config)...}; }, rows_);
  }

  // Registers each kernel that runs with its warmup space.
  void register_warmup(WarmupRegistry& registry, const Decisions& decisions) const {
    for_each_decision(decisions, [&](auto& kernel, const auto& decision) {
      if (!decision) return;
      const auto gate = *decision;
      registry.add(kernel, gate_tag(gate), [&kernel, gate] { return kernel.warmup_space(gate); });
    });
  }

  // Every kernel of the table, in table order.
  std::vector<KernelBase*> kernels() const {
    std::vector<KernelBase*> all;
    std::apply(
        [&](const auto&... rows) {
          (all.push_back(&std::remove_cvref_t<decltype(rows)>::KernelType::instance()), ...);
        },
        rows_);
    return all;
  }

  // Calls visit(kernel, args) for each kernel of the table that takes `args` and runs under
  // `decisions`, in table order. Throws zerojit::Error naming the family and the kernels when
  // the configuration runs none of the kernels that take these arguments.
  template <class Args, class Visitor>
  void route(const Decisions& decisions, const Args& args, Visitor&& visit) const {
    bool routed = false;
    std::string candidates;
    for_each_decision(decisions, [&](auto& kernel, const auto& decision) {
      if constexpr (requires { kernel.launch_spec(args); }) {
        if (decision) {
          visit(kernel, args);
          routed = true;
        } else {
          candidates += (candidates.empty() ? "" : " or ") + kernel.name();
        }
      }
    });
    if (!routed) {
      throw Error(
          std::string(family_) + ": this configuration does not run " +
          (candidates.empty() ? std::string("any kernel for these arguments") : candidates));
    }
  }

  static constexpr std::size_t row_count = std::tuple_size_v<RowTuple>;

  // Row I, as a constant (row<I>().python_op, row<I>().variant).
  template <std::size_t I>
  constexpr const auto& row() const {
    return std::get<I>(rows_);
  }

  // Calls visit(row) for each row, in table order (row.gate, row.python_op, row.variant; its
  // types name the kernel, gate and configuration).
  template <class Visitor>
  constexpr void for_each_row(Visitor&& visit) const {
    std::apply([&](const auto&... rows) { (visit(rows), ...); }, rows_);
  }

  // Whether the configuration runs `Kernel`.
  template <class Kernel>
  bool runs(const Decisions& decisions) const {
    bool found = false;
    for_each_decision(decisions, [&](auto& kernel, const auto& decision) {
      if constexpr (std::is_same_v<std::remove_cvref_t<decltype(kernel)>, Kernel>) {
        found = found || decision.has_value();
      }
    });
    return found;
  }

 private:
  template <class Visitor>
  void for_each_decision(const Decisions& decisions, Visitor&& visit) const {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (visit(std::tuple_element_t<I, RowTuple>::KernelType::instance(), std::get<I>(decisions)),
       ...);
    }
    (std::make_index_sequence<std::tuple_size_v<RowTuple>>{});
  }

  std::string_view family_;
  RowTuple rows_;
};

}  // namespace zerojit
