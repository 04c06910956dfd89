// Reads config.json text into a JSON document within bounds, so that no input crashes the
// reader or what prints its errors (see json_text.cpp). Internal to the configuration.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

namespace zerojit::dsv4::config_detail {

// Throws ConfigError naming `source` when the text is not UTF-8, is larger than
// kMaxConfigJsonBytes, nests deeper than kMaxConfigJsonDepth, holds a number no double holds
// (1e400) or is not JSON; each message says where (byte, line and column, or the field).
nlohmann::json parse_config_json(std::string_view text, std::string_view source);

}  // namespace zerojit::dsv4::config_detail
