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
  // The largest token count of one call (max_num_batched_tokens). Dispatch picks the decode or
  // the prefill scan from it, so a warmup space of T up to this reaches every scan the runtime
  // can (the prefill one only above 1024 tokens).
  std::int64_t max_num_tokens;

  bool operator==(const C128CompressGate&) const = default;
  static constexpr auto fields() {
    return std::tuple{field("head_size", &C128CompressGate::head_size),
                      field("state_width", &C128CompressGate::state_width),
                      field("max_num_tokens", &C128CompressGate::max_num_tokens)};
  }
};
std::optional<C128CompressGate> c128_compress_gate(const Dsv4Config& config);

}  // namespace zerojit::dsv4
