// What `zerojit warmup` leaves for others to read: a readiness file (--ready-file) that exists
// only after a warmup succeeded, and the Prometheus text of its counters (--metrics-file).
// Both are written whole or not at all (a temporary file renamed over the path), so that a
// readiness probe or a scraper's file reader never sees half a file.
#pragma once

#include <string>

namespace zerojit::tool {

// Removes a readiness file left by an earlier warmup (absent is fine). A file that cannot be
// removed is a ToolError: a stale "ready" would outlive a warmup that fails.
void remove_ready_file(const std::string& path);

// Writes `text` to `path` through a temporary file in the same directory and a rename.
// `what` names the file in the ToolError thrown when it cannot be written.
void write_file_atomically(const std::string& path, const std::string& text,
                           const std::string& what);

// The current time as UTC ISO 8601, e.g. 2026-01-02T03:04:05Z.
std::string utc_now();

}  // namespace zerojit::tool
