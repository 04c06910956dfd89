// Helpers the configuration's source files share: how errors are worded, and how the serving
// options read text and JSON values. Not part of the configuration's interface.
#pragma once

#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <system_error>

#include "dsv4/config/error.hpp"

namespace zerojit::dsv4::config_detail {

// --- Text from outside, made safe to print ---------------------------------------------------
// Messages end up in JSON documents (`zerojit --json`, Python exceptions), which must be valid
// UTF-8, and on terminals; what a user passed may be neither, or very long.

// The offset of the first byte of `text` that is not part of a well-formed UTF-8 sequence
// (overlong forms, surrogates and code points past U+10FFFF included), or npos.
std::size_t first_invalid_utf8(std::string_view text);

// `text` with every byte that is not well-formed UTF-8 and every control character written as
// \xNN (\n, \t, \r as themselves), so it can go anywhere a string goes.
std::string printable(std::string_view text);

// printable(text), cut after about `max_bytes` bytes (never inside a character) with "...".
std::string excerpt(std::string_view text, std::size_t max_bytes = 48);

// "'" + excerpt(text) + "'": how messages quote a value they were given.
std::string quoted(std::string_view text, std::size_t max_bytes = 48);

// --- Messages --------------------------------------------------------------------------------

// "DSv4 model config '<source>': <message>" (the source printable and bounded).
[[noreturn]] void fail_model(std::string_view source, std::string_view message);
// "DSv4 serving config: <message>".
[[noreturn]] void fail_serving(std::string_view message);

// "string \"512\"", "number 4.5", "null", "array of 3 entries": what a wrong value was, kept
// short for a message. Containers are counted, never printed: a value nested 100,000 deep
// once overflowed the stack here being dumped.
std::string describe(const nlohmann::json& value);

// A JSON number as a message shows it: its JSON text, or inf / -inf / nan, which JSON lacks.
std::string number_text(const nlohmann::json& value);

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
    message.append(option).append("': expected an integer, got ").append(quoted(text));
    if (error == std::errc::result_out_of_range) message += " (out of range)";
    fail_serving(message);
  }
  return value;
}

// "(a 32-bit integer: -2147483648 to 2147483647)": the limits an out-of-range message cites.
template <typename Integer>
std::string integer_limits() {
  return "(a " + std::to_string(8 * sizeof(Integer)) +
         "-bit integer: " + std::to_string(std::numeric_limits<Integer>::min()) + " to " +
         std::to_string(std::numeric_limits<Integer>::max()) + ")";
}

// A whole number too large for Integer: JSON integers past 2^64 arrive as doubles (1e+20), and
// an out-of-range message says so rather than "must be an integer".
template <typename Integer>
bool is_integral_beyond(double value) {
  constexpr double kLowest = static_cast<double>(std::numeric_limits<Integer>::min());
  constexpr double kHighest = static_cast<double>(std::numeric_limits<Integer>::max());
  return value == std::trunc(value) && (value < kLowest || value > kHighest);
}

// Serving JSON values carry the option name in their messages, like the command line.
template <typename Integer>
Integer serving_json_integer(const nlohmann::json& value, std::string_view option) {
  const auto out_of_range = [&value, option]() {
    fail_serving("option '" + std::string(option) + "' is out of range: " + number_text(value) +
                 " " + integer_limits<Integer>());
  };
  if (value.is_number_float() && is_integral_beyond<Integer>(value.get<double>())) out_of_range();
  if (!value.is_number_integer()) {
    fail_serving("option '" + std::string(option) + "' must be an integer, got " + describe(value));
  }
  if (value.is_number_unsigned()) {
    const auto wide = value.get<std::uint64_t>();
    if (wide > static_cast<std::uint64_t>(std::numeric_limits<Integer>::max())) out_of_range();
    return static_cast<Integer>(wide);
  }
  const auto wide = value.get<std::int64_t>();
  if (wide < std::numeric_limits<Integer>::min() || wide > std::numeric_limits<Integer>::max()) {
    out_of_range();
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
