#include "zerojit/log.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

#include "environment.hpp"

namespace zerojit {
namespace {

struct LogState {
  std::mutex mutex;
  LogHandler handler;
  std::string source = "zerojit";  // what the default handler starts each line with
  std::atomic<LogLevel> level{LogLevel::info};

  LogState() {
    if (const char* text = detail::environment_text("ZEROJIT_LOG_LEVEL")) {
      if (auto parsed = parse_log_level(text)) {
        level.store(*parsed);
      } else {
        std::fprintf(stderr,
                     "zerojit: warning: ignoring ZEROJIT_LOG_LEVEL=%s (expected debug, info, "
                     "warning, error or off)\n",
                     text);
      }
    }
  }
};

LogState& state() {
  static LogState instance;
  return instance;
}

void write_to_standard_error(const std::string& source, const LogRecord& record) {
  std::string line = source;
  if (!record.component.empty()) {
    line += ' ';
    line += record.component;
  }
  line += ": ";
  if (record.level != LogLevel::info) {
    line += to_string(record.level);
    line += ": ";
  }
  line += record.message;
  line += '\n';
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

}  // namespace

std::string_view to_string(LogLevel level) {
  switch (level) {
    case LogLevel::debug:
      return "debug";
    case LogLevel::info:
      return "info";
    case LogLevel::warning:
      return "warning";
    case LogLevel::error:
      return "error";
    case LogLevel::off:
      return "off";
  }
  return "?";
}

std::optional<LogLevel> parse_log_level(std::string_view text) {
  std::string lower;
  for (char c : text) lower += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  if (lower == "debug") return LogLevel::debug;
  if (lower == "info") return LogLevel::info;
  if (lower == "warning" || lower == "warn") return LogLevel::warning;
  if (lower == "error") return LogLevel::error;
  if (lower == "off" || lower == "none") return LogLevel::off;
  return std::nullopt;
}

void set_log_handler(LogHandler handler) {
  LogState& s = state();
  std::lock_guard lock(s.mutex);
  s.handler = std::move(handler);
}

void set_log_source(std::string_view name) {
  LogState& s = state();
  std::lock_guard lock(s.mutex);
  s.source = name.empty() ? "zerojit" : std::string(name);
}

void set_log_level(LogLevel level) { state().level.store(level, std::memory_order_relaxed); }

LogLevel log_level() { return state().level.load(std::memory_order_relaxed); }

void log(LogLevel level, std::string_view component, std::string_view message) {
  LogState& s = state();
  if (level == LogLevel::off || level < s.level.load(std::memory_order_relaxed)) return;
  LogHandler handler;
  std::string source;
  {
    std::lock_guard lock(s.mutex);
    handler = s.handler;
    if (!handler) source = s.source;
  }
  const LogRecord record{level, component, message};
  if (handler) {
    handler(record);
  } else {
    write_to_standard_error(source, record);
  }
}

}  // namespace zerojit
