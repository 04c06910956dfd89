// Sizes in bytes as people write them ("512M", "1.5G", "1073741824"): the one parser behind
// every size zerojit reads (ZEROJIT_CACHE_MAX_BYTES, `zerojit cache gc --max-size`).
//
// Accepted: a whole number of bytes, optionally followed by B; or a number with a unit K, M,
// G, T, P or E, each a power of 1024, also written KiB, MiB, ... (units in any case), where
// the number may have a fraction ("1.5G"; the result is rounded down to a whole byte).
// Refused: an empty text, a sign, spaces, KB/MB/GB (ambiguous between 1000 and 1024), any
// other suffix, and any size above 2^64 - 1 bytes (nothing wraps around).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace zerojit {

// The size, or std::nullopt; `problem` (when given) then says why, e.g. "it is more than
// 2^64 - 1 bytes".
std::optional<std::uint64_t> parse_byte_size(std::string_view text, std::string* problem = nullptr);

// The same, throwing zerojit::Error that names `what` (an option or variable): e.g.
// `--max-size "17179869184G" is not a size in bytes: it is more than 2^64 - 1 bytes (...)`.
std::uint64_t parse_byte_size_or_throw(std::string_view text, std::string_view what);

}  // namespace zerojit
