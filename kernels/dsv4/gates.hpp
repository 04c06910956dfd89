// Gates: for each DSv4 kernel, whether a serving run with this configuration calls it, and the
// compile-relevant parameters it is called with.
//
// The runtime layer code and the warmup registration both call these functions, so the
// kernels warmed and the kernels the runtime reaches are decided in one place. A gate returns
// std::nullopt (or an empty list) when the kernel never runs; otherwise it returns what the
// kernel's compile key takes from the configuration. Runtime-only values (token counts,
// strides other than keyed ones, pointers) stay with the kernel's dispatch.
//
// Decisions (spec §2-§8, §11, §12):
//  - Nothing runs without a KV cache: block_size == 0 gives no kernel at all. A DSv4 attention
//    layer without a paged cache has no window to read and nowhere to store compressed rows,
//    so no forward pass reaches any of these kernels, and warming them would be wasted
//    compiles. (vLLM warms indexer-Q, C128 compress and the DCP pack regardless.)
//  - "Ratio r is present" counts the decoder and the MTP layers (has_compress_ratio), as
//    vLLM's compress_ratios does.
//  - The indexer's cos/sin cache and the compressors' cos/sin cache are FP32: only the dtype
//    the model's RoPE cache really has is warmed (spec §11).
//  - The compressor kernels exist for head_dim 512 only; another head size uses none of them.
//
// Every gate expects a configuration that passed validate(); it does not validate again.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "dsv4/config.hpp"

namespace zerojit::dsv4 {

// The head size the fused compressor kernels are written for (spec §3-§7).
inline constexpr int kCompressorHeadDim = 512;

// --- Indexer-Q RoPE + quant (spec §1) --------------------------------------------------------
// Runs iff some layer is CSA (ratio 4: the Lightning Indexer lives there) and index_n_heads,
// index_head_dim and qk_rope_head_dim are all > 0.
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
};
std::optional<IndexerQGate> indexer_q_gate(const Dsv4Config& config);

// --- Dequantize + gather K cache (spec §2) ---------------------------------------------------
// One entry per distinct way prefill calls it, in first-seen order: (block_size, true) for the
// sliding-window cache; (compressed_block_size(block_size, 4), false) when ratio 4 is present;
// (compressed_block_size(block_size, 128), false) when ratio 128 is present. Equal pairs
// appear once. Empty when block_size == 0.
struct DequantGatherCall {
  int block_size;        // rows per page of the cache it reads
  bool has_gather_lens;  // the sliding-window call passes gather_lens

  bool operator==(const DequantGatherCall&) const = default;
};
std::vector<DequantGatherCall> dequant_gather_gate(const Dsv4Config& config);

// --- C4 compress -> norm -> RoPE -> store (spec §3, §4) --------------------------------------
// The ds_mla store runs iff ratio 4 is present, kv_cache_dtype == fp8_ds_mla and head_dim ==
// 512; the full-cache store replaces it for the bf16 and fp8_e4m3 caches.
struct C4DsMlaStoreGate {
  int head_dim;                  // 512
  int state_width;               // 2 * head_dim: the C4 state rows overlap two windows
  int rope_head_dim;             // qk_rope_head_dim
  FloatDtype norm_weight_dtype;  // the model dtype (BF16 for DSv4)

  bool operator==(const C4DsMlaStoreGate&) const = default;
};
std::optional<C4DsMlaStoreGate> c4_ds_mla_store_gate(const Dsv4Config& config);

struct C4FullStoreGate {
  int head_dim;
  int state_width;
  int rope_head_dim;
  bool store_full_fp8;  // true for the fp8_e4m3 cache, false for bf16
  FloatDtype norm_weight_dtype;

  bool operator==(const C4FullStoreGate&) const = default;
};
std::optional<C4FullStoreGate> c4_full_store_gate(const Dsv4Config& config);

// --- C128 compress, block8 (spec §5) ---------------------------------------------------------
// Runs iff ratio 128 is present and head_dim == 512 (whatever the cache dtype: both C128
// stores consume its output).
struct C128CompressGate {
  int head_size;    // head_dim
  int state_width;  // head_dim: C128 state rows do not overlap

  bool operator==(const C128CompressGate&) const = default;
};
std::optional<C128CompressGate> c128_compress_gate(const Dsv4Config& config);

// --- C128 norm -> RoPE -> store (spec §6, §7) ------------------------------------------------
// The ds_mla store runs iff ratio 128 is present, kv_cache_dtype == fp8_ds_mla and head_dim ==
// 512; its page geometry is compile-time. The full-cache store replaces it for the other
// caches.
struct C128DsMlaStoreGate {
  int head_dim;
  int rope_head_dim;
  int kv_cache_block_size;         // B_k = compressed_block_size(block_size, 128)
  std::int64_t page_stride_bytes;  // effective_c128_page_stride_bytes(serving)
  FloatDtype norm_weight_dtype;

  bool operator==(const C128DsMlaStoreGate&) const = default;
};
std::optional<C128DsMlaStoreGate> c128_ds_mla_store_gate(const Dsv4Config& config);

struct C128FullStoreGate {
  int head_dim;
  int rope_head_dim;
  bool store_full_fp8;  // true for the fp8_e4m3 cache, false for bf16
  FloatDtype norm_weight_dtype;

  bool operator==(const C128FullStoreGate&) const = default;
};
std::optional<C128FullStoreGate> c128_full_store_gate(const Dsv4Config& config);

// --- DCP top-k candidate packing (spec §12.9) ------------------------------------------------
// Runs iff dcp_world_size > 1, index_topk > 0 and the indexer runs (indexer_q_gate). The rank
// is a runtime argument; decode calls it without row starts and prefill with them.
struct DcpPackGate {
  int topk;  // index_topk
  int dcp_world_size;
  int cp_interleave;
  std::array<bool, 2> has_row_starts_values = {false, true};

  bool operator==(const DcpPackGate&) const = default;
};
std::optional<DcpPackGate> dcp_pack_gate(const Dsv4Config& config);

}  // namespace zerojit::dsv4
