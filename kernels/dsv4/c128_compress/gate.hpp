// Whether a configuration runs the C128 compress kernel (spec section 5).
#pragma once

#include <optional>
#include <tuple>

#include "dsv4/config.hpp"
#include "zerojit/key.hpp"

namespace zerojit::dsv4 {

// Runs iff ratio 128 is present and head_dim == 512 (whatever the cache dtype: both C128
// stores consume its output).
struct C128CompressGate {
  int head_size;    // head_dim
  int state_width;  // head_dim: C128 state rows do not overlap

  bool operator==(const C128CompressGate&) const = default;
  static constexpr auto fields() {
    return std::tuple{field("head_size", &C128CompressGate::head_size),
                      field("state_width", &C128CompressGate::state_width)};
  }
};
std::optional<C128CompressGate> c128_compress_gate(const Dsv4Config& config);

}  // namespace zerojit::dsv4
