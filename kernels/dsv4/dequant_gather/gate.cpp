#include "dsv4/dequant_gather/gate.hpp"

#include <algorithm>

namespace zerojit::dsv4 {

std::vector<DequantGatherCall> dequant_gather_calls(const Dsv4Config& config) {
  std::vector<DequantGatherCall> calls;
  if (config.serving.block_size <= 0) return calls;
  const int block_size = config.serving.block_size;
  const auto add = [&calls](DequantGatherCall call) {
    if (std::find(calls.begin(), calls.end(), call) == calls.end()) calls.push_back(call);
  };
  add({block_size, true});
  for (const int ratio : {kCsaCompressRatio, kHcaCompressRatio}) {
    if (has_compress_ratio(config.model, ratio)) {
      add({compressed_block_size(block_size, ratio), false});
    }
  }
  return calls;
}

std::string DequantGatherGate::tag() const {
  std::string tag = "prefill";
  for (const auto& call : calls) {
    tag += " " + std::to_string(call.block_size) + (call.has_gather_lens ? "+lens" : "");
  }
  return tag;
}

std::optional<DequantGatherGate> dequant_gather_gate(const Dsv4Config& config) {
  DequantGatherGate gate{dequant_gather_calls(config)};
  if (gate.calls.empty()) return std::nullopt;
  return gate;
}

}  // namespace zerojit::dsv4
