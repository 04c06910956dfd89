#include "dsv4/config/detail.hpp"

#include <algorithm>
#include <cstdio>

namespace zerojit::dsv4::config_detail {

using nlohmann::json;

namespace {

// The length of the well-formed UTF-8 sequence at text[offset], or 0 (RFC 3629, Table 3-7 of
// the Unicode standard: no overlong forms, no surrogates, nothing past U+10FFFF).
std::size_t utf8_sequence_length(std::string_view text, std::size_t offset) {
  const auto byte = [&text](std::size_t at) { return static_cast<unsigned char>(text[at]); };
  const unsigned char lead = byte(offset);
  if (lead < 0x80) return 1;
  std::size_t length = 0;
  unsigned char low = 0x80;
  unsigned char high = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) low = 0xA0;   // overlong below U+0800
    if (lead == 0xED) high = 0x9F;  // U+D800..U+DFFF are surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) low = 0x90;   // overlong below U+10000
    if (lead == 0xF4) high = 0x8F;  // past U+10FFFF
  } else {
    return 0;
  }
  if (offset + length > text.size()) return 0;
  if (byte(offset + 1) < low || byte(offset + 1) > high) return 0;
  for (std::size_t next = 2; next < length; ++next) {
    if (byte(offset + next) < 0x80 || byte(offset + next) > 0xBF) return 0;
  }
  return length;
}

void append_hex_byte(std::string& out, unsigned char byte) {
  char escaped[5];
  std::snprintf(escaped, sizeof escaped, "\\x%02X", static_cast<unsigned>(byte));
  out += escaped;
}

// Appends the printable form of the character at text[offset]; returns the bytes it took.
std::size_t append_printable(std::string& out, std::string_view text, std::size_t offset) {
  const std::size_t length = utf8_sequence_length(text, offset);
  const auto byte = static_cast<unsigned char>(text[offset]);
  if (length == 0) {
    append_hex_byte(out, byte);
    return 1;
  }
  if (length == 1 && (byte < 0x20 || byte == 0x7F)) {
    if (byte == '\n') {
      out += "\\n";
    } else if (byte == '\t') {
      out += "\\t";
    } else if (byte == '\r') {
      out += "\\r";
    } else {
      append_hex_byte(out, byte);
    }
    return 1;
  }
  out.append(text.substr(offset, length));
  return length;
}

}  // namespace

std::size_t first_invalid_utf8(std::string_view text) {
  for (std::size_t offset = 0; offset < text.size();) {
    const std::size_t length = utf8_sequence_length(text, offset);
    if (length == 0) return offset;
    offset += length;
  }
  return std::string_view::npos;
}

std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t offset = 0; offset < text.size();) offset += append_printable(out, text, offset);
  return out;
}

std::string excerpt(std::string_view text, std::size_t max_bytes) {
  std::string out;
  for (std::size_t offset = 0; offset < text.size();) {
    if (out.size() >= max_bytes) return out + "...";
    offset += append_printable(out, text, offset);
  }
  return out;
}

std::string quoted(std::string_view text, std::size_t max_bytes) {
  return "'" + excerpt(text, max_bytes) + "'";
}

void fail_model(std::string_view source, std::string_view message) {
  // A path is worth showing whole; the bound only stops a pathological one.
  constexpr std::size_t kMaxSourceBytes = 1024;
  std::string text = "DSv4 model config '";
  text.append(excerpt(source, kMaxSourceBytes)).append("': ").append(message);
  throw ConfigError(text);
}

void fail_serving(std::string_view message) {
  std::string text = "DSv4 serving config: ";
  text.append(message);
  throw ConfigError(text);
}

std::string number_text(const json& value) {
  if (value.is_number_float()) {
    const double number = value.get<double>();
    if (std::isnan(number)) return "nan";
    if (std::isinf(number)) return number > 0 ? "inf" : "-inf";
  }
  return value.dump();
}

std::string describe(const json& value) {
  switch (value.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::string:
      return "string \"" + excerpt(value.get_ref<const std::string&>()) + "\"";
    case json::value_t::array:
      return "array of " + std::to_string(value.size()) + " entries";
    case json::value_t::object:
      return "object of " + std::to_string(value.size()) + " keys";
    case json::value_t::boolean:
      return value.get<bool>() ? "boolean true" : "boolean false";
    case json::value_t::binary:
      return "binary of " + std::to_string(value.get_binary().size()) + " bytes";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
    case json::value_t::number_float:
    case json::value_t::discarded:
      break;
  }
  if (value.is_number()) return "number " + number_text(value);
  return std::string(value.type_name());
}

std::string join(std::span<const std::string_view> names) {
  std::string text;
  for (std::size_t index = 0; index < names.size(); ++index) {
    if (index > 0) text += ", ";
    text += names[index];
  }
  return text;
}

std::string normalized_option(std::string_view option) {
  std::string name(option);
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

const std::string& serving_json_string(const json& value, std::string_view option) {
  if (!value.is_string()) {
    fail_serving("option '" + std::string(option) + "' must be a string, got " + describe(value));
  }
  return value.get_ref<const std::string&>();
}

}  // namespace zerojit::dsv4::config_detail
