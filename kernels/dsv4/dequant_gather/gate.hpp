// Whether a configuration runs the dequantize-and-gather kernel (spec section 2) and how.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "dsv4/config.hpp"

namespace zerojit::dsv4 {

// One distinct way prefill calls it.
struct DequantGatherCall {
  int block_size;        // rows per page of the cache it reads
  bool has_gather_lens;  // the sliding-window call passes gather_lens

  bool operator==(const DequantGatherCall&) const = default;
};

// The calls in first-seen order: (block_size, true) for the sliding-window cache;
// (compressed_block_size(block_size, 4), false) when ratio 4 is present;
// (compressed_block_size(block_size, 128), false) when ratio 128 is present. Equal pairs
// appear once. Empty when block_size == 0.
std::vector<DequantGatherCall> dequant_gather_calls(const Dsv4Config& config);

struct DequantGatherGate {
  std::vector<DequantGatherCall> calls;

  bool operator==(const DequantGatherGate&) const = default;
  // "prefill 256+lens 64 2"
  std::string tag() const;
};
// The calls, or nothing when there are none.
std::optional<DequantGatherGate> dequant_gather_gate(const Dsv4Config& config);

}  // namespace zerojit::dsv4
