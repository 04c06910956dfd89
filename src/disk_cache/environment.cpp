// The default cache from the environment (docs/CACHE.md, "Where it lives"). Each variable is
// read on its own: a malformed one is named and left at its default, and never takes the
// others with it (a bad ZEROJIT_CACHE_LOCK_TIMEOUT_S must not drop the read-only layers that
// a pack-only process needs to serve anything).
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>

#include "disk_cache/impl.hpp"
#include "environment.hpp"
#include "zerojit/bytes.hpp"
#include "zerojit/error.hpp"
#include "zerojit/log.hpp"
#include "zerojit/remote_cache.hpp"

namespace zerojit {

using namespace detail::disk;

namespace {

// Says each malformed variable once per process (the runtime and Python's set_dir read the
// environment again), naming it and the default used instead.
void warn_once(const std::string& problem) {
  static std::mutex mutex;
  static std::set<std::string> said;
  {
    std::lock_guard lock(mutex);
    if (!said.insert(problem).second) return;
  }
  log_warning("cache", problem + "; its default is used, and the other cache variables apply");
}

std::vector<std::filesystem::path> read_only_layers_from(std::string_view list) {
  std::vector<std::filesystem::path> layers;
  while (!list.empty()) {
    const std::size_t colon = list.find(':');
    const std::string_view part = list.substr(0, colon);
    if (!part.empty()) layers.emplace_back(part);
    list = colon == std::string_view::npos ? std::string_view{} : list.substr(colon + 1);
  }
  return layers;
}

std::chrono::milliseconds lock_timeout_from(const char* text) {
  char* end = nullptr;
  const double seconds = std::strtod(text, &end);
  if (end == text || *end != '\0' || !(seconds >= 0.0) || seconds > 86400.0) {
    throw Error(std::string("ZEROJIT_CACHE_LOCK_TIMEOUT_S=\"") + text +
                "\" is not a number of seconds in [0, 86400]");
  }
  return std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000.0));
}

}  // namespace

std::optional<std::filesystem::path> default_cache_root() {
  if (const char* explicit_root = detail::environment_text("ZEROJIT_CACHE_DIR")) {
    if (std::string_view(explicit_root) == "off") return std::nullopt;
    return std::filesystem::path(explicit_root);
  }
  if (const char* xdg = detail::environment_text("XDG_CACHE_HOME"))
    return std::filesystem::path(xdg) / "zerojit";
  if (const char* home = detail::environment_text("HOME")) {
    return std::filesystem::path(home) / ".cache" / "zerojit";
  }
  return std::filesystem::path();
}

DiskCacheOptions default_disk_cache_options(std::vector<std::string>& problems) {
  DiskCacheOptions options;
  // One variable at a time: what one throws is its problem alone.
  auto read = [&problems](const auto& apply) {
    try {
      apply();
    } catch (const Error& error) {
      problems.emplace_back(error.what());
    }
  };
  if (const auto root = default_cache_root()) options.root = *root;
  if (const char* layers = detail::environment_text("ZEROJIT_CACHE_READONLY_DIRS")) {
    options.read_only_layers = read_only_layers_from(layers);
  }
  if (const char* quota = detail::environment_text("ZEROJIT_CACHE_MAX_BYTES")) {
    read([&] { options.max_bytes = parse_byte_size_or_throw(quota, "ZEROJIT_CACHE_MAX_BYTES"); });
  }
  if (const char* timeout = detail::environment_text("ZEROJIT_CACHE_LOCK_TIMEOUT_S")) {
    read([&] { options.lock_timeout = lock_timeout_from(timeout); });
  }
  options.allow_shared_root = zerojit::detail::environment_flag(kAllowSharedVariable);
  return options;
}

DiskCacheOptions default_disk_cache_options(MalformedVariable on_malformed) {
  std::vector<std::string> problems;
  DiskCacheOptions options = default_disk_cache_options(problems);
  if (on_malformed == MalformedVariable::warn) {
    for (const std::string& problem : problems) warn_once(problem);
  } else if (!problems.empty()) {
    std::string message;
    for (const std::string& problem : problems) message += (message.empty() ? "" : "; ") + problem;
    throw Error(message);
  }
  return options;
}

std::shared_ptr<ArtifactStore> make_default_artifact_store() {
  try {
    DiskCacheOptions options = default_disk_cache_options(MalformedVariable::warn);
    // ZEROJIT_CACHE_DIR=off turns the writable root off, not the read-only layers: a pack in
    // a read-only container image is served either way.
    if (!default_cache_root() && options.read_only_layers.empty()) {
      return with_remote_cache_from_environment(nullptr);
    }
    return with_remote_cache_from_environment(std::make_shared<DiskCache>(std::move(options)));
  } catch (const std::exception& error) {  // out of memory
    log_warning("cache", std::string(error.what()) + "; the disk cache is not used");
    return nullptr;
  }
}

}  // namespace zerojit
