// Models from Hugging Face config.json documents and files, and from preset names.
#include "dsv4/config/hf_json.hpp"

#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <system_error>
#include <utility>

#include "dsv4/config/detail.hpp"
#include "dsv4/config/geometry.hpp"
#include "dsv4/config/json_text.hpp"
#include "dsv4/config/presets.hpp"

namespace zerojit::dsv4 {

using config_detail::describe;
using config_detail::fail_model;
using config_detail::to_text;
using nlohmann::json;

namespace {

// --- Reading JSON fields ---------------------------------------------------------------------

template <typename Integer>
Integer json_to_integer(const json& value, std::string_view source, std::string_view field) {
  const auto out_of_range = [&value, source, field]() {
    fail_model(source, "field '" + std::string(field) +
                           "' is out of range: " + config_detail::number_text(value) + " " +
                           config_detail::integer_limits<Integer>());
  };
  if (value.is_number_float() && config_detail::is_integral_beyond<Integer>(value.get<double>())) {
    out_of_range();
  }
  if (!value.is_number_integer()) {
    fail_model(source,
               "field '" + std::string(field) + "' must be an integer, got " + describe(value));
  }
  if (value.is_number_unsigned()) {
    if (value.get<std::uint64_t>() >
        static_cast<std::uint64_t>(std::numeric_limits<Integer>::max())) {
      out_of_range();
    }
    return static_cast<Integer>(value.get<std::uint64_t>());
  }
  const auto wide = value.get<std::int64_t>();
  if (wide < std::numeric_limits<Integer>::min() || wide > std::numeric_limits<Integer>::max()) {
    out_of_range();
  }
  return static_cast<Integer>(wide);
}

int json_to_int(const json& value, std::string_view source, std::string_view field) {
  return json_to_integer<int>(value, source, field);
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
    target = json_to_integer<std::int64_t>(*found, source, field);
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
      const std::string rate_field = "compress_rates." + config_detail::excerpt(name);
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
      fail_model(source, "field '" + field + "' is " + config_detail::quoted(name) +
                             ", which is neither 'sliding_attention' nor a key of "
                             "'compress_rates'");
    }
  }
  return ratios;
}

// The object that describes the model: the document, or its text_config where a multimodal
// wrapper keeps the language model's fields there (vLLM reads hf_text_config).
const json& model_fields(const json& document, std::string_view source) {
  if (!document.is_object()) {
    fail_model(source, "expected a JSON object, got " + describe(document));
  }
  if (const auto text_config = document.find("text_config"); text_config != document.end()) {
    if (!text_config->is_object()) {
      fail_model(source, "field 'text_config' must be an object, got " + describe(*text_config));
    }
    return *text_config;
  }
  return document;
}

// The model's name: the last 'name' of the document and its fields, else the source. It is
// printed, in JSON too: a path that is not UTF-8 is shown escaped.
std::string model_name(const json& document, const json& fields, std::string_view source) {
  std::string name_text = config_detail::printable(source);
  for (const json* holder : {&document, &fields}) {
    if (const auto name = holder->find("name"); name != holder->end()) {
      if (!name->is_string()) {
        fail_model(source, "field 'name' must be a string, got " + describe(*name));
      }
      name_text = config_detail::printable(name->get_ref<const std::string&>());
    }
  }
  return name_text;
}

// transformers >= 5 writes "dtype", earlier versions "torch_dtype".
void read_model_dtype(const json& object, std::string_view source, ModelConfig& model) {
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
}

// The decoder's and the MTP layers' compress ratios, from 'compress_ratios' or from
// 'layer_types' + 'compress_rates', checked against the depths (which must make sense first).
void read_compress_ratios(const json& object, std::string_view source, ModelConfig& model) {
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
}

}  // namespace

ModelConfig model_config_from_json(const json& document, std::string_view source) {
  const json& object = model_fields(document, source);
  ModelConfig model;
  model.name = model_name(document, object, source);

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
  read_model_dtype(object, source, model);
  read_compress_ratios(object, source, model);

  // Range errors must still name the file even when the document carries its own name.
  ModelConfig named = model;
  named.name = std::string(source);
  validate(named);
  return model;
}

ModelConfig model_config_from_text(std::string_view text, std::string_view source) {
  return model_config_from_json(config_detail::parse_config_json(text, source), source);
}

ModelConfig load_model_config(const std::filesystem::path& config_file) {
  const std::string source = config_file.string();
  std::ifstream stream(config_file, std::ios::binary);
  if (!stream) fail_model(source, "cannot open the file");
  // Reading stops one chunk past the bound, however large (or endless) the file is.
  std::string text;
  char chunk[1 << 16];
  while (text.size() <= kMaxConfigJsonBytes && stream.read(chunk, sizeof chunk).gcount() > 0) {
    text.append(chunk, static_cast<std::size_t>(stream.gcount()));
  }
  if (stream.bad()) fail_model(source, "cannot read the file");
  return model_config_from_text(text, source);
}

ModelConfig model_from_name_or_path(std::string_view name_or_path) {
  if (name_or_path == "dsv4-flash") return dsv4_flash();
  if (name_or_path == "dsv4-pro") return dsv4_pro();
  std::filesystem::path path{std::string(name_or_path)};
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) path /= "config.json";
  if (!std::filesystem::is_regular_file(path, error)) {
    throw ConfigError("unknown DSv4 model " + config_detail::quoted(name_or_path, 1024) +
                      ": expected dsv4-flash, dsv4-pro, a config.json file or a directory "
                      "holding one");
  }
  return load_model_config(path);
}

}  // namespace zerojit::dsv4
