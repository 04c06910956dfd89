// Serving through a miss: a kernel may name, for a key, a fallback key whose program serves the
// same calls less specialized (runtime extents instead of template ones, a smaller coarsening):
//
//   std::optional<Key> fallback(const Key& key) const;   // in the owner, beside dispatch
//
// Warmup warms every fallback its space's keys name (registry.hpp), after checking that the
// fallback's plan accepts every call of the space its key accepts; in the monitor's fallback
// mode, a call whose key missed launches the fallback at once while the key compiles in the
// background (kernel.hpp, JitKernel::operator()).
#pragma once

#include <concepts>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>

#include "zerojit/arguments.hpp"
#include "zerojit/error.hpp"
#include "zerojit/key.hpp"
#include "zerojit/tensor.hpp"

namespace zerojit {

// A kernel that declares fallbacks (its owner's `fallback(key)`).
template <class KernelT>
concept HasFallback = requires(const KernelT& kernel, const typename KernelT::Key& key) {
  { kernel.fallback(key) } -> std::same_as<std::optional<typename KernelT::Key>>;
};

// A call over `descriptors`: each tensor at its own placeholder address (distinct, aligned to
// 2^36), every other field as the descriptors hold it. What plan() needs to check and pack a
// call; it never dereferences an address, so nothing may launch it.
template <DeclaredArguments Descriptors>
CallArgs<Descriptors> placeholder_call(const Descriptors& descriptors) {
  using Args = CallArgs<Descriptors>;
  Args args;
  std::uintptr_t next = std::uintptr_t{1} << 40;
  const auto place = [&next](const TensorDesc& desc) {
    const TensorRef ref = make_tensor_ref(reinterpret_cast<void*>(next), desc);
    next += std::uintptr_t{1} << 36;
    return ref;
  };
  for_each_argument_index<Args>([&](auto index) {
    constexpr auto to = std::get<index.value>(Args::fields());
    constexpr auto from = std::get<index.value>(Descriptors::fields());
    if constexpr (is_argument_field<decltype(from)>) {  // a checked parameter holds no value
      const auto& value = descriptors.*(from.member);
      using Value = std::decay_t<decltype(value)>;
      if constexpr (std::is_same_v<Value, TensorDesc>) {
        args.*(to.member) = place(value);
      } else if constexpr (std::is_same_v<Value, std::optional<TensorDesc>>) {
        if (value) args.*(to.member) = place(*value);
      } else {
        args.*(to.member) = value;
      }
    }
  });
  return args;
}

// Why `fallback` would refuse the call at `point` that `key` accepts: the refusal's message, or
// "" when the fallback serves it (or when `key` itself refuses it: no call to serve). Needs the
// kernel's arguments declared with roles (arguments.hpp), which makes a call of any point.
template <class KernelT, class Descriptors>
std::string fallback_refusal(const KernelT& kernel, const typename KernelT::Key& key,
                             const typename KernelT::Key& fallback, const Descriptors& point) {
  static_assert(DeclaredArguments<Descriptors>,
                "a kernel with fallbacks declares its arguments with roles (arguments.hpp), so "
                "that warmup can check a fallback serves every call of its key");
  const auto call = placeholder_call(point);
  try {
    (void)kernel.plan(key, call);
  } catch (const InvalidArgument&) {
    return {};
  }
  try {
    (void)kernel.plan(fallback, call);
  } catch (const InvalidArgument& error) {
    return error.what();
  }
  return {};
}

}  // namespace zerojit
