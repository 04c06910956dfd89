// Whether a configuration runs the indexer-Q kernels (spec section 1) and with what.
#pragma once

#include <cstdint>
#include <optional>
#include <tuple>

#include "dsv4/config.hpp"
#include "zerojit/key.hpp"

namespace zerojit::dsv4 {

// Runs iff the configuration has a KV cache, some layer is CSA (ratio 4: the Lightning Indexer
// lives there) and index_n_heads, index_head_dim and qk_rope_head_dim are all > 0.
struct IndexerQGate {
  IndexerDtype variant;      // FP8 or MXFP4 kernel, from serving.indexer_dtype
  int head_dim;              // D = index_head_dim
  int rope_dim;              // R = qk_rope_head_dim
  int num_heads;             // H = index_n_heads
  FloatDtype cos_sin_dtype;  // always f32 (spec §11)
  // The largest token count T of one call (max_num_batched_tokens). Dispatch picks coarsen
  // from T, so a warmup space of T in {1, max_num_tokens} reaches every coarsen the runtime
  // can (coarsen 4 only when max_num_tokens >= 512) without restating dispatch's threshold.
  std::int64_t max_num_tokens;

  bool operator==(const IndexerQGate&) const = default;
  static constexpr auto fields() {
    return std::tuple{field("variant", &IndexerQGate::variant),
                      field("head_dim", &IndexerQGate::head_dim),
                      field("rope_dim", &IndexerQGate::rope_dim),
                      field("num_heads", &IndexerQGate::num_heads),
                      field("cos_sin_dtype", &IndexerQGate::cos_sin_dtype),
                      field("max_num_tokens", &IndexerQGate::max_num_tokens)};
  }
};
std::optional<IndexerQGate> indexer_q_gate(const Dsv4Config& config);

// The gate of each variant: indexer_q_gate when its variant is the configured one.
std::optional<IndexerQGate> indexer_q_fp8_gate(const Dsv4Config& config);
std::optional<IndexerQGate> indexer_q_mxfp4_gate(const Dsv4Config& config);

}  // namespace zerojit::dsv4
