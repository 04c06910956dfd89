#include "zerojit/key.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <limits>
#include <locale>
#include <sstream>

#include "zerojit/error.hpp"

namespace zerojit {
namespace detail {

std::vector<std::pair<std::string_view, std::string_view>> split_description(
    std::string_view text) {
  std::vector<std::pair<std::string_view, std::string_view>> parts;
  while (!text.empty()) {
    const std::size_t end = std::min(text.find(", "), text.size());
    const std::string_view part = text.substr(0, end);
    const std::size_t equals = part.find('=');
    if (equals == std::string_view::npos) {
      fail_key_text(text, "'" + std::string(part) + "' is not name=value");
    }
    parts.emplace_back(part.substr(0, equals), part.substr(equals + 1));
    text.remove_prefix(std::min(end + 2, text.size()));
  }
  return parts;
}

namespace {

template <class Number>
void parse_number(std::string_view field, std::string_view text, Number& value) {
  const auto result = std::from_chars(text.data(), text.data() + text.size(), value);
  if (result.ec != std::errc() || result.ptr != text.data() + text.size()) {
    throw Error("key text: field '" + std::string(field) + "' has no number: '" +
                std::string(text) + "'");
  }
}

}  // namespace

void parse_field_value(std::string_view field, std::string_view text, bool& value) {
  if (text != "true" && text != "false") {
    throw Error("key text: field '" + std::string(field) + "' must be true or false, got '" +
                std::string(text) + "'");
  }
  value = text == "true";
}

void parse_field_value(std::string_view field, std::string_view text, DType& value) {
  const std::optional<DType> dtype = parse_dtype(text);
  if (!dtype) {
    throw Error("key text: field '" + std::string(field) + "' names no dtype: '" +
                std::string(text) + "'");
  }
  value = *dtype;
}

void parse_field_value(std::string_view field, std::string_view text, std::int64_t& value) {
  parse_number(field, text, value);
}

void parse_field_value(std::string_view field, std::string_view text, double& value) {
  // Not std::from_chars: libstdc++'s floating-point overload pulls in <memory_resource>, whose
  // locks need glibc 2.34 (above the floor everything zerojit ships keeps). A classic-locale
  // stream reads the shortest round-trip text exactly too (glibc's strtod rounds correctly).
  std::istringstream in{std::string(text)};
  in.imbue(std::locale::classic());
  in >> value;
  if (text.empty() || in.fail() || in.peek() != std::char_traits<char>::eof()) {
    throw Error("key text: field '" + std::string(field) + "' has no number: '" +
                std::string(text) + "'");
  }
}

void fail_key_text(std::string_view text, std::string_view problem) {
  throw Error("key text '" + std::string(text) + "': " + std::string(problem));
}

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
