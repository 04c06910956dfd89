// Loading a model from a Hugging Face config.json (or a preset name).
#pragma once

#include <cstddef>
#include <filesystem>
#include <nlohmann/json_fwd.hpp>
#include <string_view>

#include "dsv4/config/model.hpp"

namespace zerojit::dsv4 {

// Bounds on a config.json: the published ones are a few kilobytes and nest 3 levels deep, so
// these refuse only what is no model config (and what would exhaust memory or the stack).
inline constexpr std::size_t kMaxConfigJsonBytes = std::size_t{16} << 20;  // 16 MiB
inline constexpr std::size_t kMaxConfigJsonDepth = 64;

// Reads a Hugging Face style config document (the top level or its "text_config" object).
// Accepts compress_ratios with num_hidden_layers or num_hidden_layers +
// num_nextn_predict_layers entries, or the upstream transformers form (layer_types +
// compress_rates). `source` names the document in errors and becomes the model's name unless
// the document has a string "name". The result is validated.
ModelConfig model_config_from_json(const nlohmann::json& document, std::string_view source);

// Parses config.json text and reads it as model_config_from_json does. Text that is not UTF-8,
// is larger or nests deeper than the bounds above, holds a number beyond a double (1e400) or
// is not JSON throws ConfigError naming `source` and where (byte, line and column, or field).
ModelConfig model_config_from_text(std::string_view text, std::string_view source);

// Loads and validates a config.json file (as model_config_from_text); errors name the file
// and the field.
ModelConfig load_model_config(const std::filesystem::path& config_file);

// "dsv4-flash" | "dsv4-pro" | a config.json path | a directory holding config.json.
ModelConfig model_from_name_or_path(std::string_view name_or_path);

}  // namespace zerojit::dsv4
