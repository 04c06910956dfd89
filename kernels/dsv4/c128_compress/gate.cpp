#include "dsv4/c128_compress/gate.hpp"

#include "dsv4/compressor/gate_common.hpp"

namespace zerojit::dsv4 {

std::optional<C128CompressGate> c128_compress_gate(const Dsv4Config& config) {
  if (!runs_compressor(config, kHcaCompressRatio)) return std::nullopt;
  return C128CompressGate{
      .head_size = config.model.head_dim,
      .state_width = config.model.head_dim,
      .max_num_tokens = config.serving.max_num_batched_tokens,
  };
}

}  // namespace zerojit::dsv4
