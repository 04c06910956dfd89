// The one JSON envelope every command prints with --json (docs/TOOL.md, "Machine-readable
// output"):
//   {"schema": 1, "command": "cache ls", "ok": true, "exit_code": 0, "result": {...}}
//   {"schema": 1, "command": "run", "ok": false, "exit_code": 1,
//    "error": {"code": 1, "message": "...", "hint": "...", ...details}, "result": {...}?}
// "ok" is true exactly when the exit code is 0. A failure may carry the command's partial result
// (warmup's per-key report when some keys failed). Whatever bytes the inputs hold (paths,
// option values, config.json text), the printed text is valid UTF-8 JSON: bytes that are not
// UTF-8 become U+FFFD.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "exit_codes.hpp"

namespace zerojit::tool {

// Raised when the envelope changes incompatibly (a field renamed, moved or retyped).
inline constexpr int kJsonSchemaVersion = 1;

// `text` with every byte sequence that is not UTF-8 replaced by U+FFFD.
std::string valid_utf8(std::string_view text);

// Parses JSON text made by the library (its to_json() functions copy paths and names byte for
// byte): made valid UTF-8 first, so that it always parses.
nlohmann::json parse_library_json(std::string_view text);

nlohmann::json success_document(std::string_view command, nlohmann::json result);
// The error's json_details (an object) are merged into "error".
nlohmann::json failure_document(std::string_view command, const ToolError& error,
                                std::optional<nlohmann::json> result = std::nullopt);

// One line of JSON text (invalid UTF-8 in any string replaced), and the same on standard output.
std::string json_text(const nlohmann::json& document);
void print_json(const nlohmann::json& document);

}  // namespace zerojit::tool
