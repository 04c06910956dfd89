#include "setup.hpp"

#include <cstdio>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "option_values.hpp"
#include "zerojit/compiler.hpp"
#include "zerojit/cuda.hpp"
#include "zerojit/disk_cache.hpp"
#include "zerojit/remote_cache.hpp"
#include "zerojit/runtime.hpp"

namespace zerojit::tool {
namespace {

constexpr std::string_view kCachePrefix = "zerojit cache: ";

// The disk cache says that it refused a root or layer only in words (its state is then
// "unusable" or the layer is left out, as for any other trouble), so a refusal is known by its
// wording; the CLI tests pin both the wording and the exit code, so the two cannot drift apart
// unnoticed.
bool is_refusal(std::string_view warning) {
  if (warning.starts_with(kCachePrefix)) warning.remove_prefix(kCachePrefix.size());
  return warning.starts_with("refusing cache root ") ||
         warning.starts_with("refusing read-only layer ");
}

// A cache's warning as the tool prints it: under the tool's own name ("axpy-tool cache: ...").
std::string in_tool_words(std::string_view line) {
  if (!line.starts_with(kCachePrefix)) return std::string(line);
  return program_name() + " cache: " + std::string(line.substr(kCachePrefix.size()));
}

// Warnings a cache says while it opens, held so that a refusal can become the tool's error,
// said once. After stop_holding() later warnings go straight to stderr; print() says the held
// ones when they are not the error.
class HeldWarnings {
 public:
  std::function<void(std::string_view)> sink() const {
    return [state = state_](std::string_view line) {
      if (state->holding) {
        state->lines.emplace_back(line);
      } else {
        std::fprintf(stderr, "%s\n", in_tool_words(line).c_str());
      }
    };
  }
  const std::vector<std::string>& stop_holding() {
    state_->holding = false;
    return state_->lines;
  }
  void print() const {
    for (const std::string& line : state_->lines) {
      std::fprintf(stderr, "%s\n", in_tool_words(line).c_str());
    }
  }

 private:
  struct State {
    std::vector<std::string> lines;
    bool holding = true;
  };
  std::shared_ptr<State> state_ = std::make_shared<State>();
};

// The remote the options or the environment name, checked now, or nullptr.
std::shared_ptr<RemoteCache> open_remote(const CacheSelection& selection,
                                         std::string_view command) {
  RemoteCacheOptions options;
  try {
    options = default_remote_cache_options();
  } catch (const Error& error) {
    throw ToolError{kExitUsage, error.what(),
                    "fix or unset the environment variable it names (" + docs_page("CACHE.md") +
                        " lists them)"};
  }
  if (!selection.remote_cache.empty()) {
    options.url = selection.remote_cache;
    options.url_source = "--remote-cache";
  }
  if (options.url.empty()) return nullptr;
  // Warnings of the start-up check are held: a configuration error is said once, as the error.
  HeldWarnings held;
  options.warning_sink = held.sink();
  std::shared_ptr<RemoteCache> remote;
  try {
    remote = std::make_shared<RemoteCache>(std::move(options));
  } catch (const Error& error) {
    throw ToolError{kExitUsage, error.what(), see_help(command)};
  }
  const RemoteProbe probe = remote->probe();
  if (probe.status == RemoteProbe::Status::misconfigured) {
    throw ToolError{kExitUsage, probe.message,
                    "check the user and password (or ZEROJIT_REMOTE_CACHE_PASSWORD), the "
                    "database, and that hiredis is installed; " +
                        docs_page("CACHE.md") + ", \"The remote tier\""};
  }
  // Unreachable now: a warning; the tier retries after its backoff.
  held.stop_holding();
  held.print();
  return remote;
}

}  // namespace

void install_cache(const CacheSelection& selection, std::string_view command) {
  DiskCacheOptions options;
  try {
    options = default_disk_cache_options();
  } catch (const Error& error) {
    throw ToolError{kExitUsage, error.what(),
                    "fix or unset the environment variable it names (" + docs_page("CACHE.md") +
                        " lists them)"};
  }
  const bool disabled = !default_cache_root();  // ZEROJIT_CACHE_DIR=off
  std::shared_ptr<RemoteCache> remote = open_remote(selection, command);
  // Off turns the writable root off; read-only layers (--layer, ZEROJIT_CACHE_READONLY_DIRS)
  // are still read, as a pack in a read-only container image needs.
  if (disabled && selection.cache_dir.empty() && selection.layers.empty() &&
      options.read_only_layers.empty()) {
    Runtime::instance().set_artifact_store(
        remote ? std::make_shared<TieredStore>(nullptr, std::move(remote)) : nullptr);
    return;
  }
  if (!selection.cache_dir.empty()) options.root = selection.cache_dir;
  for (const std::string& layer : selection.layers) options.read_only_layers.emplace_back(layer);
  options.allow_shared_root = options.allow_shared_root || selection.allow_shared;
  // Warnings met while opening are held: a refusal becomes the error itself, said once.
  HeldWarnings held;
  options.warning_sink = held.sink();
  auto cache = std::make_shared<DiskCache>(std::move(options));
  cache->state();  // opens the root and the layers now
  std::string refusals;
  for (const std::string& line : held.stop_holding()) {
    if (!is_refusal(line)) continue;
    std::string_view text = line;
    if (text.starts_with(kCachePrefix)) text.remove_prefix(kCachePrefix.size());
    // Not so here: the tool refuses to run without the cache it was given.
    constexpr std::string_view kMemoryOnly = "; compiled kernels are kept in memory only";
    if (text.ends_with(kMemoryOnly)) text.remove_suffix(kMemoryOnly.size());
    refusals += (refusals.empty() ? "" : "\n  ") + std::string(text);
  }
  if (!refusals.empty()) {
    throw ToolError{kExitUsage, refusals,
                    "use a directory only you can write (chmod go-w DIR), or, if everyone who "
                    "can write it is trusted, pass --allow-shared (or set "
                    "ZEROJIT_CACHE_ALLOW_SHARED=1); " +
                        see_help(command)};
  }
  held.print();
  if (remote) {
    Runtime::instance().set_artifact_store(
        std::make_shared<TieredStore>(std::move(cache), std::move(remote)));
  } else {
    Runtime::instance().set_artifact_store(std::move(cache));
  }
}

std::string describe_cache() {
  const std::shared_ptr<ArtifactStore> store = Runtime::instance().artifact_store();
  if (!store) return "memory only (ZEROJIT_CACHE_DIR=off)";
  return store->describe();
}

bool cache_is_writable(std::string& reason) {
  const std::shared_ptr<ArtifactStore> store = Runtime::instance().artifact_store();
  if (!store) {
    reason = "the disk cache is off (ZEROJIT_CACHE_DIR=off)";
    return false;
  }
  if (local_store_of(store.get()) == nullptr) {
    reason = "the disk cache is off (ZEROJIT_CACHE_DIR=off)";
    return false;
  }
  auto* disk = dynamic_cast<DiskCache*>(local_store_of(store.get()));
  if (disk == nullptr) return true;
  if (disk->state() == CacheRootState::writable) return true;
  reason = disk->state_reason();
  if (reason.empty()) reason = "its root is " + std::string(to_string(disk->state()));
  return false;
}

bool cache_has_layers() {
  const std::shared_ptr<ArtifactStore> store = Runtime::instance().artifact_store();
  auto* disk = dynamic_cast<DiskCache*>(local_store_of(store.get()));
  return disk != nullptr && !disk->options().read_only_layers.empty();
}

DiskCache* installed_disk_cache() {
  return dynamic_cast<DiskCache*>(local_store_of(Runtime::instance().artifact_store().get()));
}

RemoteCache* installed_remote_cache() {
  return remote_cache_of(Runtime::instance().artifact_store().get());
}

std::vector<int> selected_devices(const std::string& text) {
  std::vector<int> devices = parse_devices(text);
  if (devices.empty()) return devices;
  const int count = cuda::device_count();
  for (int device : devices) {
    if (device >= count) {
      const std::string why =
          count == 0 ? (cuda::driver_available() ? std::string("the driver reports no device")
                                                 : cuda::driver_unavailable_reason())
                     : std::to_string(count) + " visible";
      throw ToolError{kExitUsage,
                      "device " + std::to_string(device) + " does not exist (" + why + ")",
                      count == 0 ? "drop --devices to compile without a GPU, or run on a GPU host"
                                 : "pick devices below " + std::to_string(count) +
                                       " (CUDA_VISIBLE_DEVICES renumbers them)"};
    }
  }
  return devices;
}

RunPlacement run_placement(bool dispatch_only, const std::string& devices) {
  RunPlacement placement;
  if (dispatch_only) {
    placement.why = "--dispatch-only";
  } else if (cuda::device_count() == 0) {
    // Devices asked for by number must exist, as for warmup: a run that falls back to dispatch
    // would otherwise say ok for devices it never touched.
    (void)selected_devices(devices);
    placement.why =
        "no GPU: " + (cuda::driver_available() ? std::string("the driver reports no device")
                                               : cuda::driver_unavailable_reason());
  } else {
    placement.devices = selected_devices(devices);  // empty: "all"
    if (placement.devices.empty()) {
      for (int d = 0; d < cuda::device_count(); ++d) placement.devices.push_back(d);
    }
  }
  return placement;
}

namespace {

ToolError nvrtc_missing(const std::string& reason, const std::string& consequence) {
  return ToolError{kExitFailure, "NVRTC is not available, so " + consequence + ": " + reason,
                   "install the CUDA toolkit's NVRTC (found through ZEROJIT_NVRTC_LIBRARY, "
                   "CUDA_HOME or /usr/local/cuda; `" +
                       program_name() +
                       " --version` says what was found), or "
                       "mount an ahead-of-time pack built with this NVRTC (--layer DIR)"};
}

}  // namespace

void require_nvrtc() {
  if (cache_has_layers()) return;
  try {
    // Through the runtime: its answer comes from the cache's memo when it can, without
    // loading NVRTC.
    Runtime::instance().nvrtc_version();
  } catch (const UnavailableError& error) {
    throw nvrtc_missing(error.what(), "no kernel can be compiled or found in the cache");
  }
}

std::optional<ToolError> failing_for_want_of_nvrtc(const WarmupReport& report) {
  if (report.ok() || nvrtc_available()) return std::nullopt;
  const std::string reason = nvrtc_unavailable_reason();
  for (const KeyReport& key : report.keys) {
    if (!key.error.empty() && key.error.find(reason) == std::string::npos) return std::nullopt;
  }
  return nvrtc_missing(reason, std::to_string(report.failed()) + " of " +
                                   std::to_string(report.total_keys()) +
                                   " keys that are not in the cache could not be compiled");
}

std::string compile_failure_advice(const WarmupReport& report) {
  std::set<Language> failed;
  for (const KeyReport& key : report.keys) {
    if (!key.error.empty()) failed.insert(key.language);
  }
  std::string advice;
  bool nvrtc_failed = false;
  for (const Language language : failed) {
    const EntryKind& kind = entry_kind(language);
    std::string part;
    if (kind.compiled_by_nvrtc) {
      nvrtc_failed = true;
      part =
          "read the NVRTC log above; check that the CUDA toolkit is found (CUDA_HOME) and that "
          "--arch names an architecture this NVRTC supports";
    } else {
      part = "for the " + std::string(kind.compiler) + " keys, read " + std::string(kind.compiler) +
             "'s error above (the kernel's function, its module's import, the key's program); "
             "check that " +
             std::string(kind.compiler) +
             " is installed for the interpreter the compile "
             "workers run";
    }
    advice += (advice.empty() ? "" : "; ") + part;
  }
  if (report.failed() < report.total_keys())
    return advice + "; the other keys were compiled and cached";
  return advice + (nvrtc_failed && failed.size() == 1
                       ? "; no key compiled, which points at --arch or the toolkit"
                       : "; no key compiled");
}

std::optional<ToolError> failing_for_unsupported_arch(const WarmupReport& report,
                                                      const std::string& arch) {
  if (report.ok()) return std::nullopt;
  const std::string marker = "cannot compile for " + arch + ":";
  std::string message;
  for (const KeyReport& key : report.keys) {
    if (key.error.empty()) continue;
    const std::size_t at = key.error.find(marker);
    if (at == std::string::npos) return std::nullopt;
    if (message.empty()) {
      const std::size_t start = key.error.rfind("NVRTC ", at);
      message = key.error.substr(start == std::string::npos ? 0 : start);
    }
  }
  return ToolError{kExitUsage, message, "pass --arch sm_90a (H100/H200) or sm_100a (B200)"};
}

}  // namespace zerojit::tool
