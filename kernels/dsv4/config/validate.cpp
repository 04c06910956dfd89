// Range and consistency checks of a configuration, whatever built it (a file, a preset,
// options, code).
#include <cmath>
#include <string>

#include "dsv4/config/detail.hpp"
#include "dsv4/config/dsv4_config.hpp"
#include "dsv4/config/geometry.hpp"

namespace zerojit::dsv4 {

using config_detail::fail_model;
using config_detail::fail_serving;
using config_detail::to_text;
using nlohmann::json;

void validate(const ModelConfig& model) {
  const std::string_view source = model.name;
  const auto require = [source](bool holds, std::string_view field, std::string_view rule,
                                const std::string& value) {
    if (!holds) {
      fail_model(source, "field '" + std::string(field) + "' must be " + std::string(rule) +
                             ", got " + value);
    }
  };
  require(model.num_hidden_layers >= 1, "num_hidden_layers", ">= 1",
          to_text(model.num_hidden_layers));
  require(model.num_nextn_predict_layers >= 0, "num_nextn_predict_layers", ">= 0",
          to_text(model.num_nextn_predict_layers));
  require(model.head_dim >= 1, "head_dim", ">= 1", to_text(model.head_dim));
  require(model.qk_rope_head_dim >= 0, "qk_rope_head_dim", ">= 0", to_text(model.qk_rope_head_dim));
  require(model.qk_rope_head_dim <= model.head_dim, "qk_rope_head_dim", "<= head_dim",
          to_text(model.qk_rope_head_dim));
  require(model.index_n_heads >= 0, "index_n_heads", ">= 0", to_text(model.index_n_heads));
  require(model.index_head_dim >= 0, "index_head_dim", ">= 0", to_text(model.index_head_dim));
  // The indexer rotates the last qk_rope_head_dim dims of its head.
  require(model.index_head_dim == 0 || model.qk_rope_head_dim <= model.index_head_dim,
          "qk_rope_head_dim", "<= index_head_dim", to_text(model.qk_rope_head_dim));
  require(model.index_topk >= 0, "index_topk", ">= 0", to_text(model.index_topk));
  require(model.sliding_window >= 0, "sliding_window", ">= 0", to_text(model.sliding_window));
  require(model.max_position_embeddings >= 1, "max_position_embeddings", ">= 1",
          to_text(model.max_position_embeddings));
  require(std::isfinite(model.rms_norm_eps) && model.rms_norm_eps > 0.0, "rms_norm_eps",
          "a positive finite number", json(model.rms_norm_eps).dump());
  require(std::isfinite(model.compress_rope_theta) && model.compress_rope_theta > 0.0,
          "compress_rope_theta", "a positive finite number",
          json(model.compress_rope_theta).dump());

  const auto layers = static_cast<std::size_t>(model.num_hidden_layers);
  const auto mtp_layers = static_cast<std::size_t>(model.num_nextn_predict_layers);
  if (model.compress_ratios.size() != layers) {
    fail_model(source, "field 'compress_ratios' has " + to_text(model.compress_ratios.size()) +
                           " decoder entries; expected num_hidden_layers = " + to_text(layers));
  }
  if (model.mtp_compress_ratios.size() != mtp_layers) {
    fail_model(source,
               "field 'compress_ratios' has " + to_text(model.mtp_compress_ratios.size()) +
                   " MTP entries; expected num_nextn_predict_layers = " + to_text(mtp_layers));
  }
  // Indices count as in config.json: decoder layers first, then the MTP layers.
  const auto check_ratio = [source](int ratio, std::size_t index) {
    if (ratio != kSlidingWindowOnlyRatio && ratio != kCsaCompressRatio &&
        ratio != kHcaCompressRatio) {
      fail_model(source, "field 'compress_ratios[" + to_text(index) + "]' is " + to_text(ratio) +
                             "; each compress ratio must be 0, 4 or 128");
    }
  };
  for (std::size_t index = 0; index < layers; ++index) {
    check_ratio(model.compress_ratios[index], index);
  }
  for (std::size_t index = 0; index < mtp_layers; ++index) {
    check_ratio(model.mtp_compress_ratios[index], layers + index);
  }
}

void validate(const ServingConfig& serving) {
  const auto require = [](bool holds, std::string_view option, std::string_view rule,
                          const std::string& value) {
    if (!holds) {
      fail_serving("option '" + std::string(option) + "' must be " + std::string(rule) + ", got " +
                   value);
    }
  };
  require(serving.block_size >= 0, "block_size", ">= 0 (0 = no KV cache)",
          to_text(serving.block_size));
  require(serving.block_size <= kMaxBlockSize, "block_size",
          "<= " + to_text(kMaxBlockSize) + " tokens per page (DSv4 serves with 64 or 256)",
          to_text(serving.block_size));
  require(serving.max_num_batched_tokens >= 1, "max_num_batched_tokens", ">= 1",
          to_text(serving.max_num_batched_tokens));
  require(serving.max_num_batched_tokens <= kMaxNumBatchedTokens, "max_num_batched_tokens",
          "<= " + to_text(kMaxNumBatchedTokens) +
              " (16 Mi tokens, 16 times DSv4's longest context; one forward pass holds fewer)",
          to_text(serving.max_num_batched_tokens));
  require(serving.dcp_world_size >= 1, "dcp_world_size", ">= 1 (1 = no DCP)",
          to_text(serving.dcp_world_size));
  require(serving.cp_interleave >= 1, "cp_interleave", ">= 1", to_text(serving.cp_interleave));

  const int sm_version = target_sm_version(serving.target_arch);
  // Older targets fail every dequant-gather key in NVRTC (its bf16x2 arithmetic is sm_90's),
  // and several others: say so once, up front, instead of one compile error a key.
  require(sm_version >= 90, "target_arch",
          "sm_90 or newer (the DSv4 kernels use Hopper's bf16x2 and FP8 instructions)",
          "'" + serving.target_arch + "'");
  // The MXFP4 indexer query feeds DeepGEMM's FP4 MQA logits, which exist only on SM100-class
  // GPUs; warming it for another target would compile keys no serving run can reach.
  if (serving.indexer_dtype == IndexerDtype::mxfp4 && (sm_version < 100 || sm_version > 109)) {
    fail_serving(
        "option 'indexer_dtype' = mxfp4 needs an sm_100-family target_arch (sm_100a, "
        "sm_100f, sm_103a, ...), got '" +
        serving.target_arch + "'; use indexer_dtype fp8 on this target");
  }

  if (serving.c128_page_stride_bytes) {
    const std::int64_t stride = *serving.c128_page_stride_bytes;
    const int rows = compressed_block_size(serving.block_size, kHcaCompressRatio);
    const std::int64_t minimum = static_cast<std::int64_t>(rows) * kDsMlaRowBytes;
    require(stride >= minimum, "c128_page_stride_bytes",
            ">= B_k * 584 = " + to_text(minimum) + " (B_k = " + to_text(rows) + ")",
            to_text(stride));
    require(stride <= kMaxC128PageStrideBytes, "c128_page_stride_bytes",
            "<= " + to_text(kMaxC128PageStrideBytes) + " (1 GiB; a page holds " + to_text(minimum) +
                " bytes)",
            to_text(stride));
    require(stride % kDsMlaPageStrideGranule == 0, "c128_page_stride_bytes",
            "a multiple of 32 (pages are copied in 32-byte aligned chunks)", to_text(stride));
  }
}

void validate(const Dsv4Config& config) {
  validate(config.model);
  validate(config.serving);
}

}  // namespace zerojit::dsv4
