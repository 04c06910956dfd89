// The default cache from the environment (docs/CACHE.md, "Where it lives").
#include <cstdio>
#include <cstdlib>

#include "disk_cache/impl.hpp"
#include "environment.hpp"
#include "zerojit/bytes.hpp"
#include "zerojit/error.hpp"
#include "zerojit/log.hpp"
#include "zerojit/remote_cache.hpp"

namespace zerojit {

using namespace detail::disk;

std::optional<std::filesystem::path> default_cache_root() {
  if (const char* explicit_root = env_text("ZEROJIT_CACHE_DIR")) {
    if (std::string_view(explicit_root) == "off") return std::nullopt;
    return std::filesystem::path(explicit_root);
  }
  if (const char* xdg = env_text("XDG_CACHE_HOME")) return std::filesystem::path(xdg) / "zerojit";
  if (const char* home = env_text("HOME")) {
    return std::filesystem::path(home) / ".cache" / "zerojit";
  }
  return std::filesystem::path();
}

DiskCacheOptions default_disk_cache_options() {
  DiskCacheOptions options;
  if (const auto root = default_cache_root()) options.root = *root;
  if (const char* layers = env_text("ZEROJIT_CACHE_READONLY_DIRS")) {
    std::string_view rest(layers);
    while (!rest.empty()) {
      const std::size_t colon = rest.find(':');
      const std::string_view part = rest.substr(0, colon);
      if (!part.empty()) options.read_only_layers.emplace_back(part);
      rest = colon == std::string_view::npos ? std::string_view{} : rest.substr(colon + 1);
    }
  }
  if (const char* quota = env_text("ZEROJIT_CACHE_MAX_BYTES")) {
    options.max_bytes = parse_byte_size_or_throw(quota, "ZEROJIT_CACHE_MAX_BYTES");
  }
  if (const char* timeout = env_text("ZEROJIT_CACHE_LOCK_TIMEOUT_S")) {
    char* end = nullptr;
    const double seconds = std::strtod(timeout, &end);
    if (end == timeout || *end != '\0' || !(seconds >= 0.0) || seconds > 86400.0) {
      throw Error(std::string("ZEROJIT_CACHE_LOCK_TIMEOUT_S=\"") + timeout +
                  "\" is not a number of seconds in [0, 86400]");
    }
    options.lock_timeout = std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000.0));
  }
  options.allow_shared_root = zerojit::detail::environment_flag(kAllowSharedVariable);
  return options;
}

std::shared_ptr<ArtifactStore> make_default_artifact_store() {
  try {
    if (!default_cache_root()) {
      return with_remote_cache_from_environment(nullptr);  // ZEROJIT_CACHE_DIR=off
    }
    return with_remote_cache_from_environment(
        std::make_shared<DiskCache>(default_disk_cache_options()));
  } catch (const std::exception& error) {
    log_warning("cache", std::string(error.what()) + "; using the defaults");
    DiskCacheOptions options;
    if (const auto root = default_cache_root()) options.root = *root;
    return with_remote_cache_from_environment(std::make_shared<DiskCache>(std::move(options)));
  }
}

}  // namespace zerojit
