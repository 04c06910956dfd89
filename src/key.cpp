#include "zerojit/key.hpp"

#include <charconv>
#include <cstdio>
#include <limits>

namespace zerojit {
namespace detail {

void append_integer(std::string& out, std::int64_t value) {
  char buffer[24];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  out.append(buffer, result.ptr);
}

void append_unsigned(std::string& out, std::uint64_t value) {
  char buffer[24];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  out.append(buffer, result.ptr);
}

void append_double(std::string& out, double value) {
  char buffer[32];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  out.append(buffer, result.ptr);
}

void append_json_string(std::string& out, std::string_view text) {
  out += '"';
  for (char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char escaped[8];
          std::snprintf(escaped, sizeof escaped, "\\u%04x", c);
          out += escaped;
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

}  // namespace detail

std::string render_template_value(bool value) { return value ? "true" : "false"; }

std::string render_template_value(DType value) { return std::string(device_type_name(value)); }

std::string render_template_value(std::int64_t value) {
  std::string out;
  detail::append_integer(out, value);
  if (value > std::numeric_limits<int>::max() || value < std::numeric_limits<int>::min()) {
    out += "LL";
  }
  return out;
}

std::string render_macro_float(double value) {
  char buffer[48];
  std::snprintf(buffer, sizeof buffer, "(%a)", value);  // exact: hexadecimal float literal
  return buffer;
}

}  // namespace zerojit
