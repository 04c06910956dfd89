// Launch records and compile requests are JSON written by zerojit's compile workers, but read
// back from any tier (disk, packs, Redis): parsed here with bounds (size, nesting, keys) before
// nlohmann::json sees them, since its parser recurses once a nesting level, and every field
// read strictly (the type it must have, no field it does not know).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace zerojit::languages {

using OrderedJson = nlohmann::ordered_json;

// What reading a record found wrong, in a sentence ("block_threads is 1073741824, ...").
class RecordProblem {
 public:
  explicit RecordProblem(std::string what) : what_(std::move(what)) {}
  const std::string& what() const { return what_; }

 private:
  std::string what_;
};

inline constexpr std::size_t kMaxRecordBytes = 64 * 1024;
inline constexpr int kMaxRecordDepth = 8;

// The object `text` holds; throws RecordProblem naming `what` ("the launch record") when it is
// larger than kMaxRecordBytes, nested deeper than kMaxRecordDepth, not JSON or not an object.
OrderedJson parse_record_object(std::string_view text, std::string_view what);

// Throws RecordProblem when `object` has a key outside `known`.
void require_only(const OrderedJson& object, std::initializer_list<std::string_view> known,
                  std::string_view what);

// The field `name` of `object`, of exactly this kind; throws RecordProblem when it is missing
// or of another type.
std::string string_field(const OrderedJson& object, const char* name, std::string_view what);
bool bool_field(const OrderedJson& object, const char* name, std::string_view what);
// A whole number in [low, high].
std::int64_t integer_field(const OrderedJson& object, const char* name, std::int64_t low,
                           std::int64_t high, std::string_view what);

}  // namespace zerojit::languages
