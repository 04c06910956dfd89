// The DeepSeek-V4 model fields the attention-side kernels depend on.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dsv4/config/dtypes.hpp"

namespace zerojit::dsv4 {

// The DeepSeek-V4 hf_config fields the attention-side kernels depend on. Field names follow
// the Hugging Face config.json; defaults are the DeepseekV4Config class defaults, which a
// config.json that omits a field gets.
struct ModelConfig {
  std::string name;  // preset name, or the path a config was loaded from
  int num_hidden_layers = 0;
  // Multi-token-prediction layers after the decoder layers. Their attention runs the same
  // kernels during speculative decoding, so their compress ratios count in the gates.
  int num_nextn_predict_layers = 1;
  int head_dim = 512;          // main attention head: 448 nope + 64 rope
  int qk_rope_head_dim = 64;   // rotated tail of a head (main attention and indexer)
  int index_n_heads = 64;      // Lightning Indexer query heads
  int index_head_dim = 128;    // Lightning Indexer head
  int index_topk = 512;        // compressed rows the indexer selects (512 Flash, 1024 Pro)
  int sliding_window = 128;    // raw window every layer keeps
  double rms_norm_eps = 1e-6;  // compressor RMSNorm epsilon
  double compress_rope_theta = 160000.0;
  std::int64_t max_position_embeddings = 1048576;
  // One entry per decoder layer (num_hidden_layers entries), each 0, 4 or 128.
  std::vector<int> compress_ratios;
  // One entry per MTP layer (num_nextn_predict_layers entries), each 0, 4 or 128. A
  // config.json lists them after the decoder layers; a file that lists only the decoder
  // layers gives them ratio 0, as vLLM does.
  std::vector<int> mtp_compress_ratios;
  FloatDtype dtype = FloatDtype::bf16;  // torch_dtype: the dtype of the RMSNorm weights

  bool operator==(const ModelConfig&) const = default;
};

// True when some decoder or MTP layer has this compress ratio.
bool has_compress_ratio(const ModelConfig& model, int compress_ratio);

// Throws ConfigError naming model.name and the field when a value is out of range.
void validate(const ModelConfig& model);

// Throws ConfigError "DSv4 model config '<model.name>': <message>": how a kernel's gate refuses
// a model field its kernel cannot build (the message names the field).
[[noreturn]] void refuse_model_field(const ModelConfig& model, const std::string& message);

}  // namespace zerojit::dsv4
