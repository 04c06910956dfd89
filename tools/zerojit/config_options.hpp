// The DSv4 family of the zerojit tool (zerojit/tool.hpp): the configuration options `warmup`,
// `keys`, `cache explain` and `run` share (which model and serving configuration), so that all
// of them build the same configuration and the same warmup manifest. config_options.cpp
// declares the options (parse time only); configuration.cpp builds the configuration,
// registers its warmup and makes the family.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dsv4/config.hpp"
#include "zerojit/registry.hpp"
#include "zerojit/tool.hpp"

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

// --model, the serving options and the hidden testing option (--arch is the tool's own), then
// the battery's run-only options (--layers, --max-model-len, --max-num-seqs).
std::vector<FamilyOption> dsv4_config_options();

// The options as given back into ConfigOptions; `arch` (--arch) is the serving target_arch.
ConfigOptions config_options_from(const OptionValues& values,
                                  const std::optional<std::string>& arch);

// The DSv4 family: configure builds the configuration (a dsv4::ConfigError becomes a
// ConfigurationError), run drives the serving battery (run_command.cpp).
Family dsv4_tool_family();

// The configuration the options name (validated). Throws dsv4::ConfigError naming the option,
// the preset or the config.json field at fault.
dsv4::Dsv4Config build_config(const ConfigOptions& options);

// Registers what warmup compiles for `config`: AttentionKernels::register_warmup, from the
// narrowed copy when the testing option is set (the gates and registrations are untouched).
void register_dsv4_warmup(const dsv4::Dsv4Config& config, const ConfigOptions& options,
                          WarmupRegistry& registry);

// "dsv4-flash (43 layers), block_size=256, kv_cache_dtype=fp8_ds_mla, ..."
std::string describe_config(const dsv4::Dsv4Config& config);

}  // namespace zerojit::tool
