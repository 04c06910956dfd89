// Loading a model from a Hugging Face config.json (or a preset name).
#pragma once

#include <filesystem>
#include <nlohmann/json_fwd.hpp>
#include <string_view>

#include "dsv4/config/model.hpp"

namespace zerojit::dsv4 {

// Reads a Hugging Face style config document (the top level or its "text_config" object).
// Accepts compress_ratios with num_hidden_layers or num_hidden_layers +
// num_nextn_predict_layers entries, or the upstream transformers form (layer_types +
// compress_rates). `source` names the document in errors and becomes the model's name unless
// the document has a string "name". The result is validated.
ModelConfig model_config_from_json(const nlohmann::json& document, std::string_view source);

// Loads and validates a config.json file; errors name the file and the field.
ModelConfig load_model_config(const std::filesystem::path& config_file);

// "dsv4-flash" | "dsv4-pro" | a config.json path | a directory holding config.json.
ModelConfig model_from_name_or_path(std::string_view name_or_path);

}  // namespace zerojit::dsv4
