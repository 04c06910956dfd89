#include "environment.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <mutex>
#include <set>
#include <string>

#include "zerojit/log.hpp"

namespace zerojit::detail {

const char* environment_text(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : nullptr;
}

bool environment_flag(const char* name, bool unset) {
  const char* raw = std::getenv(name);
  if (raw == nullptr) return unset;
  if (*raw == '\0') return false;
  std::string value(raw);
  std::transform(value.begin(), value.end(), value.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (value == "1" || value == "true" || value == "yes" || value == "on") return true;
  if (value == "0" || value == "false" || value == "no" || value == "off") return false;
  static std::mutex mutex;
  static std::set<std::string> warned;
  std::string setting = std::string(name) + "=" + raw;
  {
    std::lock_guard lock(mutex);
    if (!warned.insert(setting).second) return unset;
  }
  log_warning("environment", "ignoring " + setting +
                                 " (expected 1, true, yes or on to enable; 0, false, no, off or "
                                 "empty to disable)");
  return unset;
}

}  // namespace zerojit::detail
