// JSON output of the core, written with nlohmann-json: ordered documents, so fields print in
// the order they are written. A private, header-only dependency, not part of the installed
// headers. Names, keys and paths may hold bytes that are not UTF-8; they are replaced (U+FFFD)
// rather than thrown about, so every document zerojit prints is valid JSON whatever its inputs
// held.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace zerojit {

inline std::string json_text(const nlohmann::ordered_json& document) {
  return document.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace zerojit
