#include "dsv4/config.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <system_error>
#include <utility>

namespace zerojit::dsv4 {
namespace {

using nlohmann::json;

// --- Messages --------------------------------------------------------------------------------

[[noreturn]] void fail_model(std::string_view source, std::string_view message) {
  std::string text = "DSv4 model config '";
  text.append(source).append("': ").append(message);
  throw ConfigError(text);
}

[[noreturn]] void fail_serving(std::string_view message) {
  std::string text = "DSv4 serving config: ";
  text.append(message);
  throw ConfigError(text);
}

// "string \"512\"", "number 4.5", "null": what a wrong value was, kept short for a message.
std::string describe(const json& value) {
  constexpr std::size_t kMaxShown = 40;
  std::string shown = value.dump();
  if (shown.size() > kMaxShown) shown = shown.substr(0, kMaxShown) + "...";
  if (value.is_null()) return "null";
  return std::string(value.type_name()) + " " + shown;
}

std::string join(std::span<const std::string_view> names) {
  std::string text;
  for (std::size_t index = 0; index < names.size(); ++index) {
    if (index > 0) text += ", ";
    text += names[index];
  }
  return text;
}

template <typename Integer>
std::string to_text(Integer value) {
  return std::to_string(value);
}

// --- Reading JSON fields ---------------------------------------------------------------------

std::int64_t json_to_int64(const json& value, std::string_view source, std::string_view field) {
  if (!value.is_number_integer()) {
    fail_model(source,
               "field '" + std::string(field) + "' must be an integer, got " + describe(value));
  }
  if (value.is_number_unsigned() &&
      value.get<std::uint64_t>() >
          static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
    fail_model(source, "field '" + std::string(field) + "' is out of range: " + value.dump());
  }
  return value.get<std::int64_t>();
}

int json_to_int(const json& value, std::string_view source, std::string_view field) {
  const std::int64_t wide = json_to_int64(value, source, field);
  if (wide < std::numeric_limits<int>::min() || wide > std::numeric_limits<int>::max()) {
    fail_model(source, "field '" + std::string(field) + "' is out of range: " + value.dump());
  }
  return static_cast<int>(wide);
}

// Fields absent from a config.json keep the ModelConfig default, as the DeepseekV4Config class
// default applies to Hugging Face configs that omit them.
void read_int(const json& object, std::string_view source, const char* field, int& target) {
  if (const auto found = object.find(field); found != object.end()) {
    target = json_to_int(*found, source, field);
  }
}

void read_int64(const json& object, std::string_view source, const char* field,
                std::int64_t& target) {
  if (const auto found = object.find(field); found != object.end()) {
    target = json_to_int64(*found, source, field);
  }
}

void read_double(const json& object, std::string_view source, const char* field, double& target) {
  if (const auto found = object.find(field); found != object.end()) {
    if (!found->is_number()) {
      fail_model(source,
                 "field '" + std::string(field) + "' must be a number, got " + describe(*found));
    }
    target = found->get<double>();
  }
}

std::vector<int> read_ratio_list(const json& value, std::string_view source) {
  if (!value.is_array()) {
    fail_model(source,
               "field 'compress_ratios' must be an array of integers, got " + describe(value));
  }
  std::vector<int> ratios;
  ratios.reserve(value.size());
  for (std::size_t index = 0; index < value.size(); ++index) {
    ratios.push_back(json_to_int(value[index], source, "compress_ratios[" + to_text(index) + "]"));
  }
  return ratios;
}

// The upstream transformers form: layer_types[i] names a key of compress_rates, or
// "sliding_attention" for a window-only layer. It lists the decoder layers only.
std::vector<int> read_layer_types(const json& object, std::string_view source) {
  const json& layer_types = object.at("layer_types");
  if (!layer_types.is_array()) {
    fail_model(source,
               "field 'layer_types' must be an array of strings, got " + describe(layer_types));
  }
  const auto rates = object.find("compress_rates");
  if (rates == object.end()) {
    fail_model(source, "field 'layer_types' needs 'compress_rates' (layer type -> ratio)");
  }
  if (!rates->is_object()) {
    fail_model(source,
               "field 'compress_rates' must be an object of integers, got " + describe(*rates));
  }
  std::vector<int> ratios;
  ratios.reserve(layer_types.size());
  for (std::size_t index = 0; index < layer_types.size(); ++index) {
    const std::string field = "layer_types[" + to_text(index) + "]";
    const json& type = layer_types[index];
    if (!type.is_string()) {
      fail_model(source, "field '" + field + "' must be a string, got " + describe(type));
    }
    const auto& name = type.get_ref<const std::string&>();
    if (const auto rate = rates->find(name); rate != rates->end()) {
      const std::string rate_field = "compress_rates." + name;
      const int ratio = json_to_int(*rate, source, rate_field);
      if (ratio != kSlidingWindowOnlyRatio && ratio != kCsaCompressRatio &&
          ratio != kHcaCompressRatio) {
        fail_model(source, "field '" + rate_field + "' is " + to_text(ratio) +
                               "; each compress ratio must be 0, 4 or 128");
      }
      ratios.push_back(ratio);
    } else if (name == "sliding_attention") {
      ratios.push_back(kSlidingWindowOnlyRatio);
    } else {
      fail_model(source, "field '" + field + "' is '" + name +
                             "', which is neither 'sliding_attention' nor a key of "
                             "'compress_rates'");
    }
  }
  return ratios;
}

// --- Integer text ----------------------------------------------------------------------------

template <typename Integer>
Integer parse_integer_option(std::string_view option, std::string_view text) {
  Integer value{};
  const char* const end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  if (text.empty() || error != std::errc{} || stop != end) {
    std::string message = "option '";
    message.append(option).append("': expected an integer, got '").append(text).append("'");
    if (error == std::errc::result_out_of_range) message += " (out of range)";
    fail_serving(message);
  }
  return value;
}

constexpr std::array<std::string_view, 8> kServingOptionNames = {
    "block_size",  "kv_cache_dtype", "indexer_dtype", "max_num_batched_tokens",
    "target_arch", "dcp_world_size", "cp_interleave", "c128_page_stride_bytes",
};

std::string normalized_option(std::string_view option) {
  std::string name(option);
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

// Serving JSON values carry the option name in their messages, like the command line.
template <typename Integer>
Integer serving_json_integer(const json& value, std::string_view option) {
  if (!value.is_number_integer()) {
    fail_serving("option '" + std::string(option) + "' must be an integer, got " + describe(value));
  }
  if (value.is_number_unsigned()) {
    const auto wide = value.get<std::uint64_t>();
    if (wide > static_cast<std::uint64_t>(std::numeric_limits<Integer>::max())) {
      fail_serving("option '" + std::string(option) + "' is out of range: " + value.dump());
    }
    return static_cast<Integer>(wide);
  }
  const auto wide = value.get<std::int64_t>();
  if (wide < std::numeric_limits<Integer>::min() || wide > std::numeric_limits<Integer>::max()) {
    fail_serving("option '" + std::string(option) + "' is out of range: " + value.dump());
  }
  return static_cast<Integer>(wide);
}

const std::string& serving_json_string(const json& value, std::string_view option) {
  if (!value.is_string()) {
    fail_serving("option '" + std::string(option) + "' must be a string, got " + describe(value));
  }
  return value.get_ref<const std::string&>();
}

// A ConfigError from a dtype parser, re-raised with the option it came from.
template <typename Parse>
auto parse_dtype_option(std::string_view option, std::string_view text, Parse parse) {
  try {
    return parse(text);
  } catch (const ConfigError& error) {
    fail_serving("option '" + std::string(option) + "': " + error.what());
  }
}

}  // namespace

// --- Dtypes ----------------------------------------------------------------------------------

std::string_view to_string(FloatDtype dtype) {
  return dtype == FloatDtype::f32 ? "float32" : "bfloat16";
}

std::string_view to_string(KvCacheDtype dtype) {
  switch (dtype) {
    case KvCacheDtype::fp8_ds_mla:
      return "fp8_ds_mla";
    case KvCacheDtype::bf16:
      return "bf16";
    case KvCacheDtype::fp8_e4m3:
      return "fp8_e4m3";
  }
  return "unknown";
}

std::string_view to_string(IndexerDtype dtype) {
  return dtype == IndexerDtype::fp8 ? "fp8" : "mxfp4";
}

KvCacheDtype parse_kv_cache_dtype(std::string_view text) {
  if (text == "fp8_ds_mla") return KvCacheDtype::fp8_ds_mla;
  // vLLM's "auto" means the model dtype, which is BF16 for every DSv4 checkpoint.
  if (text == "bf16" || text == "auto") return KvCacheDtype::bf16;
  if (text == "fp8" || text == "fp8_e4m3") return KvCacheDtype::fp8_e4m3;
  throw ConfigError("unknown KV cache dtype '" + std::string(text) +
                    "'; valid: fp8_ds_mla, bf16, auto, fp8, fp8_e4m3");
}

IndexerDtype parse_indexer_dtype(std::string_view text) {
  if (text == "fp8") return IndexerDtype::fp8;
  if (text == "mxfp4") return IndexerDtype::mxfp4;
  throw ConfigError("unknown indexer dtype '" + std::string(text) + "'; valid: fp8, mxfp4");
}

FloatDtype parse_model_dtype(std::string_view text) {
  if (text == "bfloat16") return FloatDtype::bf16;
  if (text == "float32") return FloatDtype::f32;
  // The compressor kernels load RMSNorm weights as BF16 or FP32 only (spec §3).
  throw ConfigError("unsupported model dtype '" + std::string(text) +
                    "'; valid: bfloat16, float32");
}

// --- Page geometry ---------------------------------------------------------------------------

int compressed_block_size(int block_size, int compress_ratio) {
  if (compress_ratio <= 0 || block_size < 0) {
    throw std::invalid_argument("compressed_block_size: needs block_size >= 0 (got " +
                                to_text(block_size) + ") and compress_ratio > 0 (got " +
                                to_text(compress_ratio) + ")");
  }
  return std::max(1, block_size / compress_ratio);
}

std::int64_t default_ds_mla_page_stride_bytes(int rows_per_page) {
  if (rows_per_page < 1) {
    throw std::invalid_argument(
        "default_ds_mla_page_stride_bytes: rows_per_page must be >= 1, "
        "got " +
        to_text(rows_per_page));
  }
  const std::int64_t used = static_cast<std::int64_t>(rows_per_page) * kDsMlaRowBytes;
  return (used + kDsMlaPageAlignment - 1) / kDsMlaPageAlignment * kDsMlaPageAlignment;
}

// --- Model -----------------------------------------------------------------------------------

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

bool has_compress_ratio(const ModelConfig& model, int compress_ratio) {
  const auto contains = [compress_ratio](const std::vector<int>& ratios) {
    return std::find(ratios.begin(), ratios.end(), compress_ratio) != ratios.end();
  };
  return contains(model.compress_ratios) || contains(model.mtp_compress_ratios);
}

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

ModelConfig model_config_from_json(const json& document, std::string_view source) {
  if (!document.is_object()) {
    fail_model(source, "expected a JSON object, got " + describe(document));
  }
  // Multimodal wrappers keep the language model's fields in text_config (vLLM reads
  // hf_text_config), so that object alone describes the model.
  const json* fields = &document;
  if (const auto text_config = document.find("text_config"); text_config != document.end()) {
    if (!text_config->is_object()) {
      fail_model(source, "field 'text_config' must be an object, got " + describe(*text_config));
    }
    fields = &*text_config;
  }
  const json& object = *fields;

  ModelConfig model;
  model.name = std::string(source);
  for (const json* holder : {&document, fields}) {
    if (const auto name = holder->find("name"); name != holder->end()) {
      if (!name->is_string()) {
        fail_model(source, "field 'name' must be a string, got " + describe(*name));
      }
      model.name = name->get<std::string>();
    }
  }

  if (!object.contains("num_hidden_layers")) {
    fail_model(source, "missing field 'num_hidden_layers'");
  }
  read_int(object, source, "num_hidden_layers", model.num_hidden_layers);
  read_int(object, source, "num_nextn_predict_layers", model.num_nextn_predict_layers);
  read_int(object, source, "head_dim", model.head_dim);
  read_int(object, source, "qk_rope_head_dim", model.qk_rope_head_dim);
  read_int(object, source, "index_n_heads", model.index_n_heads);
  read_int(object, source, "index_head_dim", model.index_head_dim);
  read_int(object, source, "index_topk", model.index_topk);
  read_int(object, source, "sliding_window", model.sliding_window);
  read_double(object, source, "rms_norm_eps", model.rms_norm_eps);
  read_double(object, source, "compress_rope_theta", model.compress_rope_theta);
  read_int64(object, source, "max_position_embeddings", model.max_position_embeddings);

  // transformers >= 5 writes "dtype", earlier versions "torch_dtype".
  for (const char* field : {"torch_dtype", "dtype"}) {
    const auto found = object.find(field);
    if (found == object.end() || found->is_null()) continue;
    if (!found->is_string()) {
      fail_model(source,
                 "field '" + std::string(field) + "' must be a string, got " + describe(*found));
    }
    try {
      model.dtype = parse_model_dtype(found->get_ref<const std::string&>());
    } catch (const ConfigError& error) {
      fail_model(source, "field '" + std::string(field) + "': " + error.what());
    }
  }

  // The ratio list is checked against the depths, so those must make sense first.
  if (model.num_hidden_layers < 1) {
    fail_model(source,
               "field 'num_hidden_layers' must be >= 1, got " + to_text(model.num_hidden_layers));
  }
  if (model.num_nextn_predict_layers < 0) {
    fail_model(source, "field 'num_nextn_predict_layers' must be >= 0, got " +
                           to_text(model.num_nextn_predict_layers));
  }

  std::vector<int> ratios;
  bool lists_decoder_layers_only = false;
  if (const auto found = object.find("compress_ratios"); found != object.end()) {
    ratios = read_ratio_list(*found, source);
  } else if (object.contains("layer_types")) {
    ratios = read_layer_types(object, source);
    lists_decoder_layers_only = true;
  } else {
    fail_model(source, "missing field 'compress_ratios' (or 'layer_types' + 'compress_rates')");
  }
  // The published checkpoints list the MTP layers after the decoder layers; configs written
  // by transformers list the decoder layers only. Anything else is a broken file.
  const auto layers = static_cast<std::size_t>(model.num_hidden_layers);
  const auto mtp_layers = static_cast<std::size_t>(model.num_nextn_predict_layers);
  const std::string_view list_name = lists_decoder_layers_only ? "layer_types" : "compress_ratios";
  if (ratios.size() == layers) {
    model.compress_ratios = std::move(ratios);
    model.mtp_compress_ratios.assign(mtp_layers, kSlidingWindowOnlyRatio);
  } else if (!lists_decoder_layers_only && mtp_layers > 0 && ratios.size() == layers + mtp_layers) {
    model.compress_ratios.assign(ratios.begin(),
                                 ratios.begin() + static_cast<std::ptrdiff_t>(layers));
    model.mtp_compress_ratios.assign(ratios.begin() + static_cast<std::ptrdiff_t>(layers),
                                     ratios.end());
  } else {
    std::string expected = "num_hidden_layers = " + to_text(layers);
    if (!lists_decoder_layers_only && mtp_layers > 0) {
      expected +=
          " or num_hidden_layers + num_nextn_predict_layers = " + to_text(layers + mtp_layers);
    }
    fail_model(source, "field '" + std::string(list_name) + "' has " + to_text(ratios.size()) +
                           " entries; expected " + expected);
  }

  // Range errors must still name the file even when the document carries its own name.
  ModelConfig named = model;
  named.name = std::string(source);
  validate(named);
  return model;
}

ModelConfig load_model_config(const std::filesystem::path& config_file) {
  const std::string source = config_file.string();
  std::ifstream stream(config_file, std::ios::binary);
  if (!stream) fail_model(source, "cannot open the file");
  json document;
  try {
    document = json::parse(stream);
  } catch (const json::parse_error& error) {
    fail_model(source, std::string("invalid JSON: ") + error.what());
  }
  return model_config_from_json(document, source);
}

ModelConfig model_from_name_or_path(std::string_view name_or_path) {
  if (name_or_path == "dsv4-flash") return dsv4_flash();
  if (name_or_path == "dsv4-pro") return dsv4_pro();
  std::filesystem::path path{std::string(name_or_path)};
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) path /= "config.json";
  if (!std::filesystem::is_regular_file(path, error)) {
    throw ConfigError("unknown DSv4 model '" + std::string(name_or_path) +
                      "': expected dsv4-flash, dsv4-pro, a config.json file or a directory "
                      "holding one");
  }
  return load_model_config(path);
}

// --- Serving ---------------------------------------------------------------------------------

std::span<const std::string_view> serving_option_names() { return kServingOptionNames; }

void set_serving_option(ServingConfig& serving, std::string_view option, std::string_view value) {
  const std::string name = normalized_option(option);
  if (name == "block_size") {
    serving.block_size = parse_integer_option<int>(name, value);
  } else if (name == "kv_cache_dtype") {
    serving.kv_cache_dtype = parse_dtype_option(name, value, parse_kv_cache_dtype);
  } else if (name == "indexer_dtype") {
    serving.indexer_dtype = parse_dtype_option(name, value, parse_indexer_dtype);
  } else if (name == "max_num_batched_tokens") {
    serving.max_num_batched_tokens = parse_integer_option<std::int64_t>(name, value);
  } else if (name == "target_arch") {
    serving.target_arch = std::string(value);
  } else if (name == "dcp_world_size") {
    serving.dcp_world_size = parse_integer_option<int>(name, value);
  } else if (name == "cp_interleave") {
    serving.cp_interleave = parse_integer_option<int>(name, value);
  } else if (name == "c128_page_stride_bytes") {
    if (value == "auto") {
      serving.c128_page_stride_bytes.reset();
    } else {
      serving.c128_page_stride_bytes = parse_integer_option<std::int64_t>(name, value);
    }
  } else {
    fail_serving("unknown option '" + std::string(option) +
                 "'; valid: " + join(kServingOptionNames));
  }
}

int target_sm_version(std::string_view target_arch) {
  const auto malformed = [target_arch]() {
    fail_serving(
        "option 'target_arch' must look like sm_90a or sm_100a (sm_<version> with an "
        "optional 'a' or 'f'), got '" +
        std::string(target_arch) + "'");
  };
  constexpr std::string_view kPrefix = "sm_";
  if (!target_arch.starts_with(kPrefix)) malformed();
  std::string_view digits = target_arch.substr(kPrefix.size());
  if (!digits.empty() && (digits.back() == 'a' || digits.back() == 'f')) {
    digits.remove_suffix(1);
  }
  if (digits.size() < 2 || digits.size() > 3) malformed();
  int version = 0;
  const auto [stop, error] = std::from_chars(digits.data(), digits.data() + digits.size(), version);
  if (error != std::errc{} || stop != digits.data() + digits.size()) malformed();
  return version;
}

std::int64_t effective_c128_page_stride_bytes(const ServingConfig& serving) {
  if (serving.c128_page_stride_bytes) return *serving.c128_page_stride_bytes;
  return default_ds_mla_page_stride_bytes(
      compressed_block_size(serving.block_size, kHcaCompressRatio));
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
  require(serving.max_num_batched_tokens >= 1, "max_num_batched_tokens", ">= 1",
          to_text(serving.max_num_batched_tokens));
  require(serving.dcp_world_size >= 1, "dcp_world_size", ">= 1 (1 = no DCP)",
          to_text(serving.dcp_world_size));
  require(serving.cp_interleave >= 1, "cp_interleave", ">= 1", to_text(serving.cp_interleave));

  const int sm_version = target_sm_version(serving.target_arch);
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
    require(stride % kDsMlaPageStrideGranule == 0, "c128_page_stride_bytes",
            "a multiple of 32 (pages are copied in 32-byte aligned chunks)", to_text(stride));
  }
}

// --- Both ------------------------------------------------------------------------------------

Dsv4Config default_config() { return Dsv4Config{dsv4_flash(), ServingConfig{}}; }

void validate(const Dsv4Config& config) {
  validate(config.model);
  validate(config.serving);
}

// --- JSON ------------------------------------------------------------------------------------

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
      fail_serving("unknown option '" + key + "'; valid: " + join(kServingOptionNames));
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
      throw ConfigError("DSv4 config: unknown key '" + key + "'; valid: model, serving");
    }
  }
  Dsv4Config parsed;
  parsed.model = model_config_from_json(in.at("model"), "json");
  from_json(in.at("serving"), parsed.serving);
  config = std::move(parsed);
}

}  // namespace zerojit::dsv4
