#include "dsv4/dcp_pack/gate.hpp"

#include <string>

#include "dsv4/indexer_q/gate.hpp"

namespace zerojit::dsv4 {

std::optional<DcpPackGate> dcp_pack_gate(const Dsv4Config& config) {
  if (config.serving.dcp_world_size <= 1 || config.model.index_topk <= 0 ||
      !indexer_q_gate(config)) {
    return std::nullopt;
  }
  // The kernel is instantiated for the top-k sizes DSv4's indexer selects.
  const int topk = config.model.index_topk;
  if (topk != 512 && topk != 1024 && topk != 2048) {
    refuse_model_field(config.model,
                       "field 'index_topk' must be 512, 1024 or 2048 when decode context "
                       "parallelism packs the indexer's top-k (serving option dcp_world_size " +
                           std::to_string(config.serving.dcp_world_size) + "), got " +
                           std::to_string(topk) + "; or serve with dcp_world_size 1");
  }
  return DcpPackGate{
      .topk = config.model.index_topk,
      .dcp_world_size = config.serving.dcp_world_size,
      .cp_interleave = config.serving.cp_interleave,
  };
}

}  // namespace zerojit::dsv4
