// The zerojit tool's exit codes (docs/TOOL.md lists them with what to do about each).
#pragma once

#include <string>
#include <utility>

#include "zerojit/error.hpp"

namespace zerojit::tool {

inline constexpr int kExitOk = 0;
inline constexpr int kExitRuntimeJit = 1;      // a compile after warmup, monitor in error mode
inline constexpr int kExitUsage = 2;           // bad options, bad config, unusable cache root
inline constexpr int kExitCompileFailure = 3;  // a kernel specialization failed to compile
// 4 is `cache verify` finding bad entries (cache_command.hpp).
inline constexpr int kExitFailure = 5;  // anything else: a CUDA error, out of memory, a bug

// A failure a command reports and turns into an exit code. `hint` says what to do next. A
// zerojit::Error (what() is the message), so code that catches the library's errors sees it.
struct ToolError : Error {
  ToolError(int code, std::string text, std::string what_to_do = {}, std::string details = {})
      : Error(text),
        exit_code(code),
        message(std::move(text)),
        hint(std::move(what_to_do)),
        json_details(std::move(details)) {}

  int exit_code = kExitFailure;
  std::string message;
  std::string hint;
  std::string json_details;  // a JSON object merged into --json output (may be empty)
};

}  // namespace zerojit::tool
