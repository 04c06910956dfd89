#include "zerojit/bytes.hpp"

#include <cctype>
#include <limits>

#include "zerojit/error.hpp"

namespace zerojit {
namespace {

// 128 bits hold a whole 64-bit number times the largest unit (2^60) and a 19-digit fraction
// times it, so overflow is checked once, on the exact result.
__extension__ using Wide = unsigned __int128;

constexpr std::uint64_t kMaxSize = std::numeric_limits<std::uint64_t>::max();
constexpr int kMaxFractionDigits = 19;

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// log2 of the unit named by `suffix`, or -1 when it names none.
int unit_shift(std::string_view suffix) {
  const std::string unit = lower(suffix);
  if (unit.empty() || unit == "b") return 0;
  static constexpr const char* kUnits = "kmgtpe";
  for (int i = 0; kUnits[i] != '\0'; ++i) {
    if (unit == std::string(1, kUnits[i]) || unit == std::string(1, kUnits[i]) + "ib") {
      return 10 * (i + 1);
    }
  }
  return -1;
}

std::optional<std::uint64_t> fail(std::string* problem, std::string why) {
  if (problem != nullptr) *problem = std::move(why);
  return std::nullopt;
}

}  // namespace

std::optional<std::uint64_t> parse_byte_size(std::string_view text, std::string* problem) {
  if (text.empty()) return fail(problem, "it is empty");
  if (text.front() == '-') return fail(problem, "a size cannot be negative");
  std::size_t i = 0;
  Wide whole = 0;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
    whole = whole * 10 + static_cast<unsigned>(text[i] - '0');
    if (whole > kMaxSize) return fail(problem, "it is more than 2^64 - 1 bytes");
  }
  if (i == 0) return fail(problem, "it does not start with a digit");
  Wide fraction = 0;
  Wide fraction_scale = 1;
  bool has_fraction = false;
  if (i < text.size() && text[i] == '.') {
    has_fraction = true;
    const std::size_t first = ++i;
    for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
      if (i - first == kMaxFractionDigits) {
        return fail(problem, "its fraction has more than 19 digits");
      }
      fraction = fraction * 10 + static_cast<unsigned>(text[i] - '0');
      fraction_scale *= 10;
    }
    if (i == first) return fail(problem, "a digit must follow the decimal point");
  }
  const std::string_view suffix = text.substr(i);
  const int shift = unit_shift(suffix);
  if (shift < 0) {
    const std::string unit = lower(suffix);
    if (unit.size() == 2 && unit[1] == 'b' && unit_shift(unit.substr(0, 1)) > 0) {
      const std::string letter(1, static_cast<char>(std::toupper(unit[0])));
      return fail(problem, "\"" + std::string(suffix) +
                               "\" could mean powers of 1000 or of 1024: write " + letter + " or " +
                               letter + "iB (powers of 1024)");
    }
    return fail(problem, "\"" + std::string(suffix) + "\" is not a unit");
  }
  if (has_fraction && shift == 0) {
    return fail(problem, "a number of bytes cannot have a fraction");
  }
  const Wide scale = Wide{1} << shift;
  const Wide bytes = whole * scale + fraction * scale / fraction_scale;
  if (bytes > kMaxSize) return fail(problem, "it is more than 2^64 - 1 bytes");
  return static_cast<std::uint64_t>(bytes);
}

std::uint64_t parse_byte_size_or_throw(std::string_view text, std::string_view what) {
  std::string problem;
  if (const auto bytes = parse_byte_size(text, &problem)) return *bytes;
  throw Error(std::string(what) + " \"" + std::string(text) +
              "\" is not a size in bytes: " + problem +
              " (write e.g. 1073741824, 512M or 1.5G; K, M, G, T, P, E are powers of 1024)");
}

}  // namespace zerojit
