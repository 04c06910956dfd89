// Whether a configuration runs the DCP top-k candidate pack (spec section 12.9) and how.
#pragma once

#include <optional>
#include <tuple>

#include "dsv4/config.hpp"
#include "zerojit/key.hpp"

namespace zerojit::dsv4 {

// Runs iff dcp_world_size > 1, index_topk > 0 and the indexer runs (indexer_q_gate). The rank
// is a runtime argument; decode calls the kernel without row starts and prefill with them, so
// both are warmed.
struct DcpPackGate {
  int topk;  // index_topk
  int dcp_world_size;
  int cp_interleave;

  bool operator==(const DcpPackGate&) const = default;
  static constexpr auto fields() {
    return std::tuple{field("topk", &DcpPackGate::topk),
                      field("dcp_world_size", &DcpPackGate::dcp_world_size),
                      field("cp_interleave", &DcpPackGate::cp_interleave)};
  }
};
std::optional<DcpPackGate> dcp_pack_gate(const Dsv4Config& config);

}  // namespace zerojit::dsv4
