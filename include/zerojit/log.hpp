// The library's one way of saying something: every warning and note zerojit prints goes
// through here, so that an engine can route them into its own logging (Python's `logging`, a
// server's structured log) or silence them. No logging library is involved: zerojit is linked
// into other processes and must not bring one along.
#pragma once

#include <functional>
#include <optional>
#include <string_view>

namespace zerojit {

enum class LogLevel { debug, info, warning, error, off };
std::string_view to_string(LogLevel level);
// "debug" | "info" | "warning" (or "warn") | "error" | "off", case-insensitive.
std::optional<LogLevel> parse_log_level(std::string_view text);

struct LogRecord {
  LogLevel level = LogLevel::info;
  std::string_view component;  // "cache", "monitor", "warmup", ...
  std::string_view message;    // may span lines
};

using LogHandler = std::function<void(const LogRecord&)>;

// Replaces the handler (nullptr restores the default: standard error, as
// "zerojit <component>: <level>: <message>"). Thread-safe; a handler may be called from any
// thread that logs, and must not log itself.
void set_log_handler(LogHandler handler);

// The name the default handler starts each line with, instead of "zerojit" (empty: "zerojit"
// again): a program built on zerojit says its own name ("axpy-tool warmup: [1/2] ...").
// zerojit::tool::run_cli sets it to the tool's program name.
void set_log_source(std::string_view name);

// Records below this level are dropped before reaching the handler. Starts from
// $ZEROJIT_LOG_LEVEL (default: info); an unknown value there is reported once and ignored.
void set_log_level(LogLevel level);
LogLevel log_level();

void log(LogLevel level, std::string_view component, std::string_view message);
inline void log_warning(std::string_view component, std::string_view message) {
  log(LogLevel::warning, component, message);
}
inline void log_info(std::string_view component, std::string_view message) {
  log(LogLevel::info, component, message);
}

}  // namespace zerojit
