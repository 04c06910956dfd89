#include "languages/record_json.hpp"

#include <algorithm>

namespace zerojit::languages {
namespace {

// The deepest nesting of arrays and objects in `text`, brackets inside strings skipped; stops
// counting (and returns more than `limit`) as soon as it passes `limit`.
int nesting_depth(std::string_view text, int limit) {
  int depth = 0;
  int deepest = 0;
  bool in_string = false;
  bool escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest > limit) return deepest;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

std::string type_name(const OrderedJson& value) { return value.type_name(); }

}  // namespace

OrderedJson parse_record_object(std::string_view text, std::string_view what) {
  const std::string subject(what);
  if (text.size() > kMaxRecordBytes) {
    throw RecordProblem(subject + " is " + std::to_string(text.size()) + " bytes, more than the " +
                        std::to_string(kMaxRecordBytes) + " any compiler of zerojit's writes");
  }
  if (nesting_depth(text, kMaxRecordDepth) > kMaxRecordDepth) {
    throw RecordProblem(subject + " nests deeper than " + std::to_string(kMaxRecordDepth) +
                        " levels");
  }
  OrderedJson json = OrderedJson::parse(text, nullptr, false);
  if (json.is_discarded()) {
    throw RecordProblem(subject + (text.empty() ? " is empty" : " is not JSON"));
  }
  if (!json.is_object()) throw RecordProblem(subject + " is not a JSON object");
  return json;
}

void require_only(const OrderedJson& object, std::initializer_list<std::string_view> known,
                  std::string_view what) {
  for (const auto& [key, value] : object.items()) {
    bool listed = false;
    for (const std::string_view name : known) listed = listed || name == key;
    if (!listed) throw RecordProblem(std::string(what) + " has an unknown field \"" + key + "\"");
  }
}

namespace {

const OrderedJson& field(const OrderedJson& object, const char* name, std::string_view what) {
  const auto found = object.find(name);
  if (found == object.end()) {
    throw RecordProblem(std::string(what) + " has no \"" + name + "\"");
  }
  return *found;
}

[[noreturn]] void wrong_type(const OrderedJson& value, const char* name, const char* wanted,
                             std::string_view what) {
  throw RecordProblem(std::string(what) + ": \"" + name + "\" is " + type_name(value) + ", not " +
                      wanted);
}

}  // namespace

std::string string_field(const OrderedJson& object, const char* name, std::string_view what) {
  const OrderedJson& value = field(object, name, what);
  if (!value.is_string()) wrong_type(value, name, "a string", what);
  return value.get<std::string>();
}

bool bool_field(const OrderedJson& object, const char* name, std::string_view what) {
  const OrderedJson& value = field(object, name, what);
  if (!value.is_boolean()) wrong_type(value, name, "true or false", what);
  return value.get<bool>();
}

std::int64_t integer_field(const OrderedJson& object, const char* name, std::int64_t low,
                           std::int64_t high, std::string_view what) {
  const OrderedJson& value = field(object, name, what);
  if (!value.is_number_integer()) wrong_type(value, name, "a whole number", what);
  // Past int64 an unsigned value does not fit; a negative one never passes `low` >= 0.
  if (value.is_number_unsigned() && value.get<std::uint64_t>() > static_cast<std::uint64_t>(high)) {
    throw RecordProblem(std::string(what) + ": \"" + name + "\" is " + value.dump() + ", outside " +
                        std::to_string(low) + ".." + std::to_string(high));
  }
  const auto number = value.get<std::int64_t>();
  if (number < low || number > high) {
    throw RecordProblem(std::string(what) + ": \"" + name + "\" is " + std::to_string(number) +
                        ", outside " + std::to_string(low) + ".." + std::to_string(high));
  }
  return number;
}

}  // namespace zerojit::languages
