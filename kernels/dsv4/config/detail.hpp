// Helpers the configuration's source files share: how errors are worded, and how the serving
// options read text and JSON values. Not part of the configuration's interface.
#pragma once

#include <charconv>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <system_error>

#include "dsv4/config/error.hpp"

namespace zerojit::dsv4::config_detail {

// "DSv4 model config '<source>': <message>".
[[noreturn]] void fail_model(std::string_view source, std::string_view message);
// "DSv4 serving config: <message>".
[[noreturn]] void fail_serving(std::string_view message);

// "string \"512\"", "number 4.5", "null": what a wrong value was, kept short for a message.
std::string describe(const nlohmann::json& value);

std::string join(std::span<const std::string_view> names);

template <typename Integer>
std::string to_text(Integer value) {
  return std::to_string(value);
}

// "block-size" -> "block_size".
std::string normalized_option(std::string_view option);

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

// Serving JSON values carry the option name in their messages, like the command line.
template <typename Integer>
Integer serving_json_integer(const nlohmann::json& value, std::string_view option) {
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

const std::string& serving_json_string(const nlohmann::json& value, std::string_view option);

// A ConfigError from a dtype parser, re-raised with the option it came from.
template <typename Parse>
auto parse_dtype_option(std::string_view option, std::string_view text, Parse parse) {
  try {
    return parse(text);
  } catch (const ConfigError& error) {
    fail_serving("option '" + std::string(option) + "': " + error.what());
  }
}

}  // namespace zerojit::dsv4::config_detail
