// The nlohmann::json conversions of the configuration.
#include "dsv4/config/json.hpp"

#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "dsv4/config/detail.hpp"
#include "dsv4/config/hf_json.hpp"

namespace zerojit::dsv4 {

using config_detail::describe;
using config_detail::fail_serving;
using config_detail::parse_dtype_option;
using config_detail::serving_json_integer;
using config_detail::serving_json_string;
using nlohmann::json;

void to_json(json& out, const ModelConfig& model) {
  std::vector<int> all_ratios = model.compress_ratios;
  all_ratios.insert(all_ratios.end(), model.mtp_compress_ratios.begin(),
                    model.mtp_compress_ratios.end());
  out = json{
      {"name", model.name},
      {"num_hidden_layers", model.num_hidden_layers},
      {"num_nextn_predict_layers", model.num_nextn_predict_layers},
      {"head_dim", model.head_dim},
      {"qk_rope_head_dim", model.qk_rope_head_dim},
      {"index_n_heads", model.index_n_heads},
      {"index_head_dim", model.index_head_dim},
      {"index_topk", model.index_topk},
      {"sliding_window", model.sliding_window},
      {"rms_norm_eps", model.rms_norm_eps},
      {"compress_rope_theta", model.compress_rope_theta},
      {"max_position_embeddings", model.max_position_embeddings},
      {"compress_ratios", all_ratios},
      {"torch_dtype", to_string(model.dtype)},
  };
}

void from_json(const json& in, ModelConfig& model) { model = model_config_from_json(in, "json"); }

void to_json(json& out, const ServingConfig& serving) {
  out = json{
      {"block_size", serving.block_size},
      {"kv_cache_dtype", to_string(serving.kv_cache_dtype)},
      {"indexer_dtype", to_string(serving.indexer_dtype)},
      {"max_num_batched_tokens", serving.max_num_batched_tokens},
      {"target_arch", serving.target_arch},
      {"dcp_world_size", serving.dcp_world_size},
      {"cp_interleave", serving.cp_interleave},
      {"c128_page_stride_bytes",
       serving.c128_page_stride_bytes ? json(*serving.c128_page_stride_bytes) : json(nullptr)},
  };
}

void from_json(const json& in, ServingConfig& serving) {
  if (!in.is_object()) fail_serving("expected a JSON object, got " + describe(in));
  ServingConfig parsed;
  for (const auto& [key, value] : in.items()) {
    if (key == "block_size") {
      parsed.block_size = serving_json_integer<int>(value, key);
    } else if (key == "kv_cache_dtype") {
      parsed.kv_cache_dtype =
          parse_dtype_option(key, serving_json_string(value, key), parse_kv_cache_dtype);
    } else if (key == "indexer_dtype") {
      parsed.indexer_dtype =
          parse_dtype_option(key, serving_json_string(value, key), parse_indexer_dtype);
    } else if (key == "max_num_batched_tokens") {
      parsed.max_num_batched_tokens = serving_json_integer<std::int64_t>(value, key);
    } else if (key == "target_arch") {
      parsed.target_arch = serving_json_string(value, key);
    } else if (key == "dcp_world_size") {
      parsed.dcp_world_size = serving_json_integer<int>(value, key);
    } else if (key == "cp_interleave") {
      parsed.cp_interleave = serving_json_integer<int>(value, key);
    } else if (key == "c128_page_stride_bytes") {
      if (value.is_null()) {
        parsed.c128_page_stride_bytes.reset();
      } else {
        parsed.c128_page_stride_bytes = serving_json_integer<std::int64_t>(value, key);
      }
    } else {
      fail_serving("unknown option " + config_detail::quoted(key) +
                   "; valid: " + config_detail::join(serving_option_names()));
    }
  }
  validate(parsed);
  serving = std::move(parsed);
}

void to_json(json& out, const Dsv4Config& config) {
  out = json{{"model", config.model}, {"serving", config.serving}};
}

void from_json(const json& in, Dsv4Config& config) {
  if (!in.is_object() || !in.contains("model") || !in.contains("serving")) {
    throw ConfigError("DSv4 config: expected a JSON object with 'model' and 'serving'");
  }
  for (const auto& [key, value] : in.items()) {
    if (key != "model" && key != "serving") {
      throw ConfigError("DSv4 config: unknown key " + config_detail::quoted(key) +
                        "; valid: model, serving");
    }
  }
  Dsv4Config parsed;
  parsed.model = model_config_from_json(in.at("model"), "json");
  from_json(in.at("serving"), parsed.serving);
  config = std::move(parsed);
}

}  // namespace zerojit::dsv4
