#include "dsv4/gates.hpp"

#include <algorithm>

namespace zerojit::dsv4 {
namespace {

bool has_kv_cache(const Dsv4Config& config) { return config.serving.block_size > 0; }

bool uses_ds_mla_cache(const Dsv4Config& config) {
  return config.serving.kv_cache_dtype == KvCacheDtype::fp8_ds_mla;
}

// The compressor path of a ratio: taken for head-512 models that have a cache and a layer
// with that ratio (spec §7 orchestration: CUDA, head_dim == 512).
bool runs_compressor(const Dsv4Config& config, int compress_ratio) {
  return has_kv_cache(config) && has_compress_ratio(config.model, compress_ratio) &&
         config.model.head_dim == kCompressorHeadDim;
}

bool stores_full_fp8(const Dsv4Config& config) {
  return config.serving.kv_cache_dtype == KvCacheDtype::fp8_e4m3;
}

}  // namespace

std::optional<IndexerQGate> indexer_q_gate(const Dsv4Config& config) {
  const ModelConfig& model = config.model;
  if (!has_kv_cache(config) || !has_compress_ratio(model, kCsaCompressRatio) ||
      model.index_n_heads <= 0 || model.index_head_dim <= 0 || model.qk_rope_head_dim <= 0) {
    return std::nullopt;
  }
  return IndexerQGate{
      .variant = config.serving.indexer_dtype,
      .head_dim = model.index_head_dim,
      .rope_dim = model.qk_rope_head_dim,
      .num_heads = model.index_n_heads,
      .cos_sin_dtype = FloatDtype::f32,
      .max_num_tokens = config.serving.max_num_batched_tokens,
  };
}

std::vector<DequantGatherCall> dequant_gather_gate(const Dsv4Config& config) {
  std::vector<DequantGatherCall> calls;
  if (!has_kv_cache(config)) return calls;
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

std::optional<C4DsMlaStoreGate> c4_ds_mla_store_gate(const Dsv4Config& config) {
  if (!runs_compressor(config, kCsaCompressRatio) || !uses_ds_mla_cache(config)) {
    return std::nullopt;
  }
  return C4DsMlaStoreGate{
      .head_dim = config.model.head_dim,
      .state_width = 2 * config.model.head_dim,
      .rope_head_dim = config.model.qk_rope_head_dim,
      .norm_weight_dtype = config.model.dtype,
  };
}

std::optional<C4FullStoreGate> c4_full_store_gate(const Dsv4Config& config) {
  if (!runs_compressor(config, kCsaCompressRatio) || uses_ds_mla_cache(config)) {
    return std::nullopt;
  }
  return C4FullStoreGate{
      .head_dim = config.model.head_dim,
      .state_width = 2 * config.model.head_dim,
      .rope_head_dim = config.model.qk_rope_head_dim,
      .store_full_fp8 = stores_full_fp8(config),
      .norm_weight_dtype = config.model.dtype,
  };
}

std::optional<C128CompressGate> c128_compress_gate(const Dsv4Config& config) {
  if (!runs_compressor(config, kHcaCompressRatio)) return std::nullopt;
  return C128CompressGate{
      .head_size = config.model.head_dim,
      .state_width = config.model.head_dim,
  };
}

std::optional<C128DsMlaStoreGate> c128_ds_mla_store_gate(const Dsv4Config& config) {
  if (!runs_compressor(config, kHcaCompressRatio) || !uses_ds_mla_cache(config)) {
    return std::nullopt;
  }
  return C128DsMlaStoreGate{
      .head_dim = config.model.head_dim,
      .rope_head_dim = config.model.qk_rope_head_dim,
      .kv_cache_block_size = compressed_block_size(config.serving.block_size, kHcaCompressRatio),
      .page_stride_bytes = effective_c128_page_stride_bytes(config.serving),
      .norm_weight_dtype = config.model.dtype,
  };
}

std::optional<C128FullStoreGate> c128_full_store_gate(const Dsv4Config& config) {
  if (!runs_compressor(config, kHcaCompressRatio) || uses_ds_mla_cache(config)) {
    return std::nullopt;
  }
  return C128FullStoreGate{
      .head_dim = config.model.head_dim,
      .rope_head_dim = config.model.qk_rope_head_dim,
      .store_full_fp8 = stores_full_fp8(config),
      .norm_weight_dtype = config.model.dtype,
  };
}

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
