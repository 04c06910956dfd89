// nlohmann::json conversions of the configuration (found by argument-dependent lookup:
// `json j = config;`, `j.get<Dsv4Config>()`). from_json validates and throws ConfigError.
//
// ModelConfig is written in config.json form: "name", the hf fields, "compress_ratios" with
// the decoder then the MTP entries, "torch_dtype". ServingConfig is written with its field
// names, dtypes as their canonical names and c128_page_stride_bytes as null when unset;
// reading it, a missing key keeps its default and an unknown key is an error. Dsv4Config is
// {"model": ..., "serving": ...}.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include "dsv4/config/dsv4_config.hpp"

namespace zerojit::dsv4 {

void to_json(nlohmann::json& out, const ModelConfig& model);
void from_json(const nlohmann::json& in, ModelConfig& model);
void to_json(nlohmann::json& out, const ServingConfig& serving);
void from_json(const nlohmann::json& in, ServingConfig& serving);
void to_json(nlohmann::json& out, const Dsv4Config& config);
void from_json(const nlohmann::json& in, Dsv4Config& config);

}  // namespace zerojit::dsv4
