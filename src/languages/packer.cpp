#include "languages/packer.hpp"

namespace zerojit::languages {

std::string integer_text(const CallValue& value) {
  return value.above_int64 ? std::to_string(value.unsigned_integer) : std::to_string(value.integer);
}

std::string kind_name(CallValue::Kind kind) {
  switch (kind) {
    case CallValue::Kind::none:
      return "None";
    case CallValue::Kind::boolean:
      return "a bool";
    case CallValue::Kind::integer:
      return "an int";
    case CallValue::Kind::floating:
      return "a float";
    case CallValue::Kind::tensor:
      return "a tensor";
  }
  return "?";
}

}  // namespace zerojit::languages
