#include "dsv4/config/detail.hpp"

#include <algorithm>

namespace zerojit::dsv4::config_detail {

using nlohmann::json;

void fail_model(std::string_view source, std::string_view message) {
  std::string text = "DSv4 model config '";
  text.append(source).append("': ").append(message);
  throw ConfigError(text);
}

void fail_serving(std::string_view message) {
  std::string text = "DSv4 serving config: ";
  text.append(message);
  throw ConfigError(text);
}

std::string describe(const json& value) {
  constexpr std::size_t kMaxShown = 40;
  std::string shown = value.dump();
  if (shown.size() > kMaxShown) shown = shown.substr(0, kMaxShown) + "...";
  if (value.is_null()) return "null";
  return std::string(value.type_name()) + " " + shown;
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
