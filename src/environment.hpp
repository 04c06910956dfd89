// Reading the library's yes/no environment variables (ZEROJIT_NVRTC_DISABLE,
// ZEROJIT_MONITOR_VERBOSE, ZEROJIT_CACHE_ALLOW_SHARED), one rule for all of them.
#pragma once

namespace zerojit::detail {

// Unset or empty: false. 1, true, yes, on (any case): true; 0, false, no, off: false. Anything
// else is read as false and warned about once per variable and value, naming both, so that a
// value the user meant as "yes" is not silently taken as "no".
bool environment_flag(const char* name);

}  // namespace zerojit::detail
