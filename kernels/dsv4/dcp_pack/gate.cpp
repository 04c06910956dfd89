#include "dsv4/dcp_pack/gate.hpp"

#include "dsv4/indexer_q/gate.hpp"

namespace zerojit::dsv4 {

std::optional<DcpPackGate> dcp_pack_gate(const Dsv4Config& config) {
  if (config.serving.dcp_world_size <= 1 || config.model.index_topk <= 0 ||
      !indexer_q_gate(config)) {
    return std::nullopt;
  }
  return DcpPackGate{
      .topk = config.model.index_topk,
      .dcp_world_size = config.serving.dcp_world_size,
      .cp_interleave = config.serving.cp_interleave,
  };
}

}  // namespace zerojit::dsv4
