// The DSv4 configuration options `warmup`, `keys` and `run` share: which model and serving
// configuration. They build the same configuration, and so the same warmup manifest, for all
// three. config_options.cpp defines the options (parse time only); configuration.cpp builds
// the configuration and registers its warmup.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <string_view>
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

// --model, the serving options, --arch and the hidden testing option, on `command` (whose name
// usage errors point at, e.g. "warmup").
void add_config_options(CLI::App& app, std::string_view command, ConfigOptions& options);

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

}  // namespace zerojit::tool
