// Options every DSv4 command shares: which model and serving configuration, which devices,
// which compile cache. They build the same configuration, and so the same warmup manifest,
// for `warmup`, `keys` and `run`.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "dsv4/config.hpp"
#include "zerojit/registry.hpp"

namespace zerojit::tool {

struct ConfigOptions {
  std::string model = "dsv4-flash";
  // Serving options as given, in command-line order: (config field, text).
  std::vector<std::pair<std::string, std::string>> serving;
  // Tests only (hidden): warmup registers from a copy of the configuration whose
  // max_num_batched_tokens is this, so the indexer's warmup space stops below what the
  // battery reaches. 0: off.
  std::int64_t testing_warmup_max_tokens = 0;
};

// --model, the serving options, --arch and the hidden testing option.
void add_config_options(CLI::App& command, ConfigOptions& options);

// The configuration the options name (validated). Throws dsv4::ConfigError naming the option,
// the preset or the config.json field at fault.
dsv4::Dsv4Config build_config(const ConfigOptions& options);

// Registers what warmup compiles for `config`: AttentionKernels::register_warmup, from the
// narrowed copy when the testing option is set (the gates and registrations are untouched).
void register_dsv4_warmup(const dsv4::Dsv4Config& config, const ConfigOptions& options,
                          WarmupRegistry& registry);

// The registry's manifest. A warmup space that a kernel's dispatch rejects (a configuration
// the config checks accept but the kernels cannot build) is a ToolError (usage).
Manifest checked_manifest(const WarmupRegistry& registry);

// "dsv4-flash (43 layers), block_size=256, kv_cache_dtype=fp8_ds_mla, ..."
std::string describe_config(const dsv4::Dsv4Config& config);

// --devices all|LIST -> the ordinals (empty: every visible device). Throws ToolError (usage).
std::vector<int> parse_devices(const std::string& text);
// The devices to use: parsed and checked against what is visible. Throws ToolError (usage)
// for a device that does not exist.
std::vector<int> selected_devices(const std::string& text);

struct CacheSelection {
  std::string cache_dir;            // the writable root (default: the runtime's default cache)
  std::vector<std::string> layers;  // read-only layers, e.g. an ahead-of-time pack
};
void add_cache_options(CLI::App& command, CacheSelection& selection);
// Installs the selected disk cache as the runtime's artifact store (nothing to do when no
// option was given: the runtime already uses the default cache). Throws ToolError (usage)
// for a malformed cache environment variable.
void install_cache(const CacheSelection& selection);
// "disk cache ... (writable)" or "memory only (ZEROJIT_CACHE_DIR=off)".
std::string describe_cache();
// Whether compiled artifacts are being kept on disk, and why not when they are not.
bool cache_is_writable(std::string& reason);

}  // namespace zerojit::tool
