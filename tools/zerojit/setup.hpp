// What `warmup` and `run` set up before any work, each problem said once, up front: the compile
// cache (a root or layer refused as writable by others is a usage error, not a silent memory-only
// run), the devices, and NVRTC.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "exit_codes.hpp"
#include "zerojit/disk_cache.hpp"
#include "zerojit/registry.hpp"
#include "zerojit/remote_cache.hpp"

namespace zerojit::tool {

struct CacheSelection {
  std::string cache_dir;            // the writable root (default: $ZEROJIT_CACHE_DIR, ...)
  std::vector<std::string> layers;  // read-only layers, e.g. an ahead-of-time pack
  bool allow_shared = false;        // accept a root or layer others can write
  std::string remote_cache;         // --remote-cache URL (default: $ZEROJIT_REMOTE_CACHE)
};

// Installs the runtime's artifact store: the disk cache the options and the environment name
// (ZEROJIT_CACHE_DIR, ..._READONLY_DIRS, ..._MAX_BYTES, ..._ALLOW_SHARED), or memory only
// for ZEROJIT_CACHE_DIR=off without --cache-dir or a read-only layer (--layer or
// ZEROJIT_CACHE_READONLY_DIRS). The root is opened here. Throws
// ToolError (usage) for a malformed cache variable, and for a root or layer refused because
// others can write it (docs/CACHE.md, "Safety rules"); other disk trouble stays a warning.
void install_cache(const CacheSelection& selection, std::string_view command);
// With a remote (--remote-cache or ZEROJIT_REMOTE_CACHE) the disk cache is put in front of it
// (docs/CACHE.md, "The remote tier"): a malformed URL or setting, a missing hiredis, or
// credentials the server refuses are a ToolError (usage) naming the URL without its password;
// a server that cannot be reached now is a warning (the warmup compiles as without it).
//
// "disk cache ... (writable)" or "memory only (ZEROJIT_CACHE_DIR=off)".
std::string describe_cache();
// Whether compiled artifacts are being kept on disk, and why not when they are not.
bool cache_is_writable(std::string& reason);
// Whether the installed cache has read-only layers (a pack may serve keys without NVRTC).
bool cache_has_layers();
// The installed disk cache (also behind a remote), or nullptr.
DiskCache* installed_disk_cache();
// The installed remote tier, or nullptr.
RemoteCache* installed_remote_cache();

// --devices parsed and checked against what is visible. Throws ToolError (usage) for a device
// that does not exist.
std::vector<int> selected_devices(const std::string& text);

// Where `run` runs: on the GPUs --devices selects (all visible for "all"), or through dispatch
// alone, saying why (--dispatch-only, or no GPU and why not). A device named that does not
// exist is a usage error (ToolError), with a GPU or without.
struct RunPlacement {
  std::vector<int> devices;  // empty: dispatch only
  std::string why;           // why dispatch only
};
RunPlacement run_placement(bool dispatch_only, const std::string& devices);

// Every compile identity includes the NVRTC version, so without NVRTC (or the cache's memo of
// its version) no key can be compiled or even looked up on disk. Called before a warmup: throws
// ToolError (exit 5) naming what is missing, once, instead of one failure per key. Skipped when
// read-only layers are installed: what they can serve without NVRTC is the cache's business,
// and failing_for_want_of_nvrtc() sums up what they could not.
void require_nvrtc();

// When every failed key of `report` failed because NVRTC is unavailable: the error to report
// (exit 5, said once); otherwise nothing.
std::optional<ToolError> failing_for_want_of_nvrtc(const WarmupReport& report);
// When every failed key failed because NVRTC cannot compile for `arch` (and nothing else
// failed): that one reason, as a usage error (exit 2), instead of a compile failure a key.
std::optional<ToolError> failing_for_unsupported_arch(const WarmupReport& report,
                                                      const std::string& arch);
// What to do about the failed keys of `report`, for each compiler that failed (NVRTC: its log,
// the toolkit and --arch; a language compiler: its error, the kernel's module and whether it is
// installed for the interpreter the compile workers run).
std::string compile_failure_advice(const WarmupReport& report);

}  // namespace zerojit::tool
