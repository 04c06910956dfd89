// Reading the library's environment variables, one rule for each kind: text (the caches' roots
// and limits, the Redis settings, the toolkit's paths) and yes/no (ZEROJIT_NVRTC_DISABLE,
// ZEROJIT_MONITOR_VERBOSE, ZEROJIT_CACHE_ALLOW_SHARED, and the Python module's).
#pragma once

namespace zerojit::detail {

// The variable's value, or null when it is unset or empty: an empty variable means "not set",
// as a shell's `VAR= command` intends.
const char* environment_text(const char* name);

// Unset: `unset` (no, for every variable of the library). Empty, 0, false, no, off (any case):
// false; 1, true, yes, on: true. Anything else is read as `unset` and warned about once per
// variable and value, naming both, so that a value the user meant as "yes" is not silently
// taken as "no". (The Python module reads its own variables with this too, so that one rule
// holds for all: docs/CONSUMING.md.)
bool environment_flag(const char* name, bool unset = false);

}  // namespace zerojit::detail
