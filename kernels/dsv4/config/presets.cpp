#include "dsv4/config/presets.hpp"

#include <string>
#include <utility>

#include "dsv4/config/geometry.hpp"

namespace zerojit::dsv4 {
namespace {

// Both presets share every kernel-relevant value except depth, the ratio pattern and top-k.
ModelConfig dsv4_common(std::string name, int num_hidden_layers, int index_topk) {
  ModelConfig model;
  model.name = std::move(name);
  model.num_hidden_layers = num_hidden_layers;
  model.num_nextn_predict_layers = 1;
  model.head_dim = 512;
  model.qk_rope_head_dim = 64;
  model.index_n_heads = 64;
  model.index_head_dim = 128;
  model.index_topk = index_topk;
  model.sliding_window = 128;
  model.rms_norm_eps = 1e-6;
  model.compress_rope_theta = 160000.0;
  model.max_position_embeddings = 1048576;
  model.dtype = FloatDtype::bf16;
  // From layer 2 on both models alternate CSA (even layers) and HCA (odd layers); the one
  // MTP layer keeps only its sliding window.
  model.compress_ratios.resize(static_cast<std::size_t>(num_hidden_layers));
  for (int layer = 2; layer < num_hidden_layers; ++layer) {
    model.compress_ratios[static_cast<std::size_t>(layer)] =
        layer % 2 == 0 ? kCsaCompressRatio : kHcaCompressRatio;
  }
  model.mtp_compress_ratios = {kSlidingWindowOnlyRatio};
  return model;
}

}  // namespace

// The ratio patterns are those of the published config.json files of
// deepseek-ai/DeepSeek-V4-Flash ([0, 0, 4, 128, ..., 4, 128, 4, 0]: 44 entries, the last for
// the MTP layer) and deepseek-ai/DeepSeek-V4-Pro ([128, 128, 4, 128, ..., 4, 0]: 62 entries).
ModelConfig dsv4_flash() {
  ModelConfig model = dsv4_common("dsv4-flash", 43, 512);
  // Flash's first two layers are sliding-window only.
  model.compress_ratios[0] = kSlidingWindowOnlyRatio;
  model.compress_ratios[1] = kSlidingWindowOnlyRatio;
  return model;
}

ModelConfig dsv4_pro() {
  ModelConfig model = dsv4_common("dsv4-pro", 61, 1024);
  // Pro's first two layers are HCA.
  model.compress_ratios[0] = kHcaCompressRatio;
  model.compress_ratios[1] = kHcaCompressRatio;
  return model;
}

Dsv4Config default_config() { return Dsv4Config{dsv4_flash(), ServingConfig{}}; }

}  // namespace zerojit::dsv4
