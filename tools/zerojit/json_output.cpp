#include "json_output.hpp"

#include <algorithm>
#include <cstdio>
#include <initializer_list>

namespace zerojit::tool {

std::string valid_utf8(std::string_view text) {
  static constexpr std::string_view kReplacement = "\xEF\xBF\xBD";
  std::string out;
  out.reserve(text.size());
  std::size_t i = 0;
  while (i < text.size()) {
    const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
    const unsigned char lead = byte(i);
    std::size_t length = 0;
    unsigned char low = 0x80, high = 0xBF;  // the range of the second byte (RFC 3629)
    if (lead < 0x80) {
      length = 1;
    } else if (lead >= 0xC2 && lead <= 0xDF) {
      length = 2;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
      length = 3;
      if (lead == 0xE0) low = 0xA0;   // no overlong forms
      if (lead == 0xED) high = 0x9F;  // no surrogates
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      length = 4;
      if (lead == 0xF0) low = 0x90;
      if (lead == 0xF4) high = 0x8F;  // nothing above U+10FFFF
    }
    bool ok = length != 0 && i + length <= text.size();
    for (std::size_t k = 1; ok && k < length; ++k) {
      const unsigned char c = byte(i + k);
      ok = k == 1 ? c >= low && c <= high : c >= 0x80 && c <= 0xBF;
    }
    if (ok) {
      out.append(text.substr(i, length));
      i += length;
    } else {
      out.append(kReplacement);
      ++i;  // one replacement per byte that does not start a valid sequence
    }
  }
  return out;
}

nlohmann::json parse_library_json(std::string_view text) {
  return nlohmann::json::parse(valid_utf8(text));
}

nlohmann::json success_document(std::string_view command, nlohmann::json result) {
  return {{"schema", kJsonSchemaVersion},
          {"command", valid_utf8(command)},
          {"ok", true},
          {"exit_code", kExitOk},
          {"result", std::move(result)}};
}

nlohmann::json failure_document(std::string_view command, const ToolError& error,
                                std::optional<nlohmann::json> result) {
  nlohmann::json details = {
      {"code", error.exit_code}, {"message", error.message}, {"hint", error.hint}};
  if (!error.json_details.empty()) {
    // Details are made by the tool itself; a malformed one must not hide the failure.
    nlohmann::json extra = nlohmann::json::parse(valid_utf8(error.json_details), nullptr, false);
    if (extra.is_object()) details.update(extra);
  }
  nlohmann::json document = {{"schema", kJsonSchemaVersion},
                             {"command", valid_utf8(command)},
                             {"ok", false},
                             {"exit_code", error.exit_code},
                             {"error", std::move(details)}};
  if (result) document["result"] = std::move(*result);
  return document;
}

namespace {

std::string dump(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// An object with the fields `first` in that order, then the others (nlohmann sorts keys).
std::string dump_in_order(const nlohmann::json& object, std::initializer_list<const char*> first) {
  std::string out = "{";
  const auto add = [&out](const std::string& key, const std::string& value) {
    out += (out.size() > 1 ? "," : "") + dump(key) + ":" + value;
  };
  for (const char* field : first) {
    if (!object.contains(field)) continue;
    const nlohmann::json& value = object.at(field);
    add(field, std::string_view(field) == "error" && value.is_object()
                   ? dump_in_order(value, {"code", "message", "hint"})
                   : dump(value));
  }
  for (auto item = object.begin(); item != object.end(); ++item) {
    const std::string& key = item.key();
    const bool placed =
        std::any_of(first.begin(), first.end(), [&key](const char* field) { return key == field; });
    if (!placed) add(key, dump(item.value()));
  }
  return out + "}";
}

}  // namespace

std::string json_text(const nlohmann::json& document) {
  if (!document.is_object() || !document.contains("schema")) return dump(document);
  // An envelope reads in this order: what it is, whether it worked, why not, what it did.
  return dump_in_order(document, {"schema", "command", "ok", "exit_code", "error", "result"});
}

void print_json(const nlohmann::json& document) {
  const std::string text = json_text(document) + "\n";
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

}  // namespace zerojit::tool
