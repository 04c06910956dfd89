// The config.json reader. nlohmann's own parser takes any depth and throws errors whose text
// quotes the input: invalid UTF-8 there later broke every JSON document holding the message
// (type_error 316), and a 100,000-deep value blew the stack when printed. This reader checks
// the encoding first, builds the document through a SAX handler that refuses deep nesting and
// remembers which field it is in, and words each failure itself.
#include "dsv4/config/json_text.hpp"

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "dsv4/config/detail.hpp"
#include "dsv4/config/hf_json.hpp"

namespace zerojit::dsv4::config_detail {

namespace {

using nlohmann::json;

// "line 3, column 7": 1-based, in bytes, for the byte at `offset`.
std::string line_and_column(std::string_view text, std::size_t offset) {
  std::size_t line = 1;
  std::size_t line_start = 0;
  for (std::size_t at = 0; at < offset && at < text.size(); ++at) {
    if (text[at] == '\n') {
      ++line;
      line_start = at + 1;
    }
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(offset - line_start + 1);
}

// Builds the document as nlohmann's DOM parser does (a later duplicate key wins), refusing
// nesting past kMaxConfigJsonDepth, and keeps the path to the value being read for messages.
class BoundedDocument {
 public:
  using number_integer_t = json::number_integer_t;
  using number_unsigned_t = json::number_unsigned_t;
  using number_float_t = json::number_float_t;
  using string_t = json::string_t;
  using binary_t = json::binary_t;

  bool null() { return put(nullptr) != nullptr; }
  bool boolean(bool value) { return put(value) != nullptr; }
  bool number_integer(number_integer_t value) { return put(value) != nullptr; }
  bool number_unsigned(number_unsigned_t value) { return put(value) != nullptr; }
  bool number_float(number_float_t value, const string_t&) { return put(value) != nullptr; }
  bool string(string_t& value) { return put(std::move(value)) != nullptr; }
  bool binary(binary_t& value) { return put(json::binary(std::move(value))) != nullptr; }
  bool start_object(std::size_t) { return open(json::object()); }
  bool start_array(std::size_t) { return open(json::array()); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }

  bool key(string_t& name) {
    Frame& frame = frames_.back();
    frame.key = name;
    frame.member = &(*frame.value)[name];
    frame.member_done = false;
    return true;
  }

  bool parse_error(std::size_t position, const std::string&, const json::exception& error) {
    error_position_ = position;
    error_id_ = error.id;
    error_text_ = error.what();
    return false;
  }

  json take() { return std::move(root_); }

  // Why parsing stopped early, when this handler stopped it (too deep), else empty.
  const std::string& refusal() const { return refusal_; }
  std::size_t error_position() const { return error_position_; }
  int error_id() const { return error_id_; }
  const std::string& error_text() const { return error_text_; }

  // True when the innermost object has read its member whole: a syntax error then comes after
  // that field, not in it.
  bool after_member() const {
    return !frames_.empty() && frames_.back().value->is_object() && frames_.back().member_done;
  }

  // "text_config.compress_ratios[3]": where the value being read sits; a few levels at most.
  std::string path() const {
    constexpr std::size_t kMaxShownLevels = 6;
    std::string text;
    for (std::size_t level = 0; level < frames_.size(); ++level) {
      if (level == kMaxShownLevels) return text + "...";
      const Frame& frame = frames_[level];
      if (frame.value->is_array()) {
        // The innermost array is reading its next entry; an outer one holds the open child.
        const std::size_t entries = frame.value->size();
        const bool innermost = level + 1 == frames_.size();
        text += "[" + std::to_string(innermost || entries == 0 ? entries : entries - 1) + "]";
      } else if (frame.member != nullptr) {
        text += (text.empty() ? "" : ".") + excerpt(frame.key, 40);
      }
    }
    return text;
  }

 private:
  struct Frame {
    json* value = nullptr;
    std::string key;           // objects: the member being read (or last read)
    json* member = nullptr;    // objects: where that member goes
    bool member_done = false;  // objects: the member's value is complete
  };

  json* put(json value) {
    if (frames_.empty()) {
      root_ = std::move(value);
      return &root_;
    }
    Frame& frame = frames_.back();
    if (frame.value->is_array()) {
      frame.value->push_back(std::move(value));
      return &frame.value->back();
    }
    *frame.member = std::move(value);
    frame.member_done = !frame.member->is_structured();  // a container is done when closed
    return frame.member;
  }

  bool open(json empty) {
    if (frames_.size() >= kMaxConfigJsonDepth) {
      refusal_ =
          "nests arrays and objects deeper than " + std::to_string(kMaxConfigJsonDepth) + " levels";
      return false;
    }
    json* value = put(std::move(empty));
    frames_.push_back(Frame{value, {}, nullptr});
    return true;
  }

  bool close() {
    frames_.pop_back();
    if (!frames_.empty()) frames_.back().member_done = true;
    return true;
  }

  json root_;
  std::vector<Frame> frames_;
  std::string refusal_;
  std::size_t error_position_ = 0;
  int error_id_ = 0;
  std::string error_text_;
};

// nlohmann's message without its "[json.exception.parse_error.101] parse error at line 1,
// column 2: " prefix (this reader says where itself), bounded.
std::string parser_reason(const std::string& what) {
  std::string_view reason = what;
  if (const std::size_t bracket = reason.find("] "); bracket != std::string_view::npos) {
    reason.remove_prefix(bracket + 2);
  }
  if (reason.starts_with("parse error")) {
    if (const std::size_t colon = reason.find(": "); colon != std::string_view::npos) {
      reason.remove_prefix(colon + 2);
    }
  }
  return excerpt(reason, 160);
}

}  // namespace

json parse_config_json(std::string_view text, std::string_view source) {
  if (text.size() > kMaxConfigJsonBytes) {
    fail_model(source, "is " + std::to_string(text.size()) + " bytes, more than the " +
                           std::to_string(kMaxConfigJsonBytes) +
                           " a config.json may have; pass the model's config.json itself");
  }
  if (const std::size_t bad = first_invalid_utf8(text); bad != std::string_view::npos) {
    char byte[8];
    std::snprintf(byte, sizeof byte, "0x%02X",
                  static_cast<unsigned>(static_cast<unsigned char>(text[bad])));
    fail_model(source, "is not UTF-8 text: the bytes from offset " + std::to_string(bad) + " (" +
                           line_and_column(text, bad) + "; " + byte +
                           ") are no well-formed UTF-8 sequence; a config.json must be UTF-8 "
                           "(re-save it as UTF-8)");
  }
  BoundedDocument document;
  const bool parsed = json::sax_parse(text, &document);
  if (parsed) return document.take();

  const std::string path = document.path();
  const std::string where =
      path.empty() ? "" : (document.after_member() ? " after field '" : " in field '") + path + "'";
  if (!document.refusal().empty()) {
    fail_model(source,
               "field '" + path + "' " + document.refusal() + "; a config.json needs only a few");
  }
  // 406: a number past the range of a double (1e400); reported as "number overflow".
  if (document.error_id() == 406) {
    const std::string& what = document.error_text();
    const std::size_t open = what.find('\'');
    const std::size_t close = what.rfind('\'');
    const std::string number =
        open != std::string::npos && close > open
            ? excerpt(std::string_view(what).substr(open + 1, close - open - 1), 40)
            : "";
    fail_model(source, "field '" + path + "' is out of range: " + number +
                           " overflows a double (about -1.8e308 to 1.8e308); write a value "
                           "within that range");
  }
  // Positions count bytes read; the byte at fault is the last one read.
  const std::size_t offset = document.error_position() > 0 ? document.error_position() - 1 : 0;
  fail_model(source, "invalid JSON: parse error at " + line_and_column(text, offset) + " (offset " +
                         std::to_string(offset) + ")" + where + ": " +
                         parser_reason(document.error_text()));
}

}  // namespace zerojit::dsv4::config_detail
