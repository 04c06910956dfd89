#include "terminal.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "option_values.hpp"

namespace zerojit::tool {
namespace {

// Visible width: skips ANSI escape sequences; counts UTF-8 code points.
std::size_t visible_width(std::string_view text) {
  std::size_t width = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\033') {
      while (i < text.size() && text[i] != 'm') ++i;
      continue;
    }
    if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) ++width;
  }
  return width;
}

}  // namespace

Style Style::for_stream(std::FILE* stream) {
  const char* no_color = std::getenv("NO_COLOR");
  if (no_color != nullptr && no_color[0] != '\0') return Style(false);
  return Style(isatty(fileno(stream)) == 1);
}

std::string Style::wrap(std::string_view code, std::string_view text) const {
  if (!enabled_) return std::string(text);
  return "\033[" + std::string(code) + "m" + std::string(text) + "\033[0m";
}

void Table::print(std::FILE* stream, const Style& style) const {
  std::vector<std::size_t> widths(columns_.size(), 0);
  const auto measure = [&](const std::vector<std::string>& cells) {
    for (std::size_t c = 0; c < cells.size() && c < widths.size(); ++c) {
      widths[c] = std::max(widths[c], visible_width(cells[c]));
    }
  };
  std::vector<std::string> titles;
  for (const auto& column : columns_) titles.push_back(column.title);
  measure(titles);
  for (const auto& row : rows_) measure(row);
  for (const auto& row : footer_) measure(row);
  const auto line = [&](const std::vector<std::string>& cells, bool header) {
    std::string out;
    for (std::size_t c = 0; c < columns_.size(); ++c) {
      const std::string cell = c < cells.size() ? cells[c] : std::string();
      const std::size_t pad = widths[c] - visible_width(cell);
      const bool last = c + 1 == columns_.size();
      if (c > 0) out += "  ";
      if (columns_[c].align == Align::right) {
        out += std::string(pad, ' ') + cell;
      } else {
        out += cell;
        if (!last) out += std::string(pad, ' ');
      }
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    std::fprintf(stream, "%s\n", header ? style.bold(out).c_str() : out.c_str());
  };
  line(titles, true);
  for (std::size_t r = 0; r < rows_.size(); ++r) {
    line(rows_[r], false);
    if (!notes_[r].empty()) std::fprintf(stream, "%s\n", style.dim(notes_[r]).c_str());
  }
  if (!footer_.empty()) {
    std::size_t total = 0;
    for (std::size_t c = 0; c < widths.size(); ++c) total += widths[c] + (c > 0 ? 2 : 0);
    std::fprintf(stream, "%s\n", style.dim(std::string(total, '-')).c_str());
    for (const auto& row : footer_) line(row, false);
  }
}

void print_error(std::string_view message, std::string_view hint) {
  const Style style = Style::for_stream(stderr);
  std::fprintf(stderr, "%s %.*s\n", style.red(program_name() + ": error:").c_str(),
               static_cast<int>(message.size()), message.data());
  if (!hint.empty()) {
    std::fprintf(stderr, "  %s %.*s\n", style.bold("what to do:").c_str(),
                 static_cast<int>(hint.size()), hint.data());
  }
}

void print_warning(std::string_view message) {
  const Style style = Style::for_stream(stderr);
  std::fprintf(stderr, "%s %.*s\n", style.yellow(program_name() + ": warning:").c_str(),
               static_cast<int>(message.size()), message.data());
}

void print_note(std::string_view message) {
  const Style style = Style::for_stream(stderr);
  std::fprintf(stderr, "%s %.*s\n", style.cyan(program_name() + ": note:").c_str(),
               static_cast<int>(message.size()), message.data());
}

std::string fixed(double value, int decimals) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, value);
  return buffer;
}

std::string bytes_text(double bytes) {
  const char* units[] = {"B", "kB", "MB", "GB", "TB"};
  int unit = 0;
  while (bytes >= 1000.0 && unit < 4) {
    bytes /= 1000.0;
    ++unit;
  }
  return fixed(bytes, unit == 0 ? 0 : 2) + " " + units[unit];
}

std::string with_separators(long long value) {
  std::string digits = std::to_string(value < 0 ? -value : value);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return value < 0 ? "-" + out : out;
}

}  // namespace zerojit::tool
