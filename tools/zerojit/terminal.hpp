// What the tool prints for people: colour only on a terminal (never with NO_COLOR), aligned
// tables, and errors that say what to do next.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace zerojit::tool {

// ANSI styling for one output stream, or none.
class Style {
 public:
  // Enabled when `stream` is a terminal and NO_COLOR is unset or empty.
  static Style for_stream(std::FILE* stream);
  static Style plain() { return Style(false); }

  bool enabled() const { return enabled_; }
  std::string bold(std::string_view text) const { return wrap("1", text); }
  std::string dim(std::string_view text) const { return wrap("2", text); }
  std::string red(std::string_view text) const { return wrap("1;31", text); }
  std::string green(std::string_view text) const { return wrap("32", text); }
  std::string yellow(std::string_view text) const { return wrap("33", text); }
  std::string cyan(std::string_view text) const { return wrap("36", text); }

 private:
  explicit Style(bool enabled) : enabled_(enabled) {}
  std::string wrap(std::string_view code, std::string_view text) const;
  bool enabled_;
};

// An aligned text table. Cells may carry colour codes: widths count visible characters.
class Table {
 public:
  enum class Align { left, right };
  struct Column {
    std::string title;
    Align align = Align::left;
  };

  explicit Table(std::vector<Column> columns) : columns_(std::move(columns)) {}
  void add_row(std::vector<std::string> cells) {
    rows_.push_back(std::move(cells));
    notes_.emplace_back();
  }
  // A line of its own under the last row, across the columns (not measured into their widths).
  void add_note(std::string text) {
    if (!notes_.empty()) notes_.back() = std::move(text);
  }
  // A line under the rows (totals), separated by a rule.
  void add_footer(std::vector<std::string> cells) { footer_.push_back(std::move(cells)); }
  bool empty() const { return rows_.empty(); }
  void print(std::FILE* stream, const Style& style) const;

 private:
  std::vector<Column> columns_;
  std::vector<std::vector<std::string>> rows_;
  std::vector<std::string> notes_;  // per row; empty: none
  std::vector<std::vector<std::string>> footer_;
};

// "zerojit: error: <message>" and an indented "<hint>" on standard error.
void print_error(std::string_view message, std::string_view hint);
void print_warning(std::string_view message);
void print_note(std::string_view message);

// Number formatting for tables.
std::string fixed(double value, int decimals);
std::string bytes_text(double bytes);          // "1.5 GB" (decimal units, as bandwidths are)
std::string with_separators(long long value);  // 12,345

}  // namespace zerojit::tool
