#include "config_options.hpp"

#include <string_view>

namespace zerojit::tool {

std::vector<FamilyOption> dsv4_config_options() {
  std::vector<FamilyOption> options;
  options.push_back({.flag = "--model",
                     .value_name = "NAME|PATH",
                     .help = "dsv4-flash, dsv4-pro, a config.json or a directory holding one "
                             "[dsv4-flash]"});
  struct Serving {
    const char* flag;
    const char* help;
  };
  // Their values are the configuration's to check (dsv4::set_serving_option and validate name
  // the field and its domain); --arch is the tool's, checked with the compiler's own rule.
  static constexpr Serving kServing[] = {
      {"--block-size", "Tokens per KV cache page (0: no KV cache) [256]"},
      {"--kv-cache-dtype", "fp8_ds_mla, bf16 (or auto), fp8 (or fp8_e4m3) [fp8_ds_mla]"},
      {"--indexer-dtype", "fp8, or mxfp4 (sm_100 targets) [fp8]"},
      {"--max-num-batched-tokens", "Tokens of one forward pass [8192]"},
      {"--dcp-world-size", "Decode context parallel ranks [1]"},
      {"--cp-interleave", "cp_kv_cache_interleave_size [1]"},
      {"--c128-page-stride",
       "C128 cache page stride in bytes, or auto [auto: round_up(B_k*584, "
       "576)]"},
  };
  for (const Serving& serving : kServing) {
    options.push_back({.flag = serving.flag, .help = serving.help});
  }
  // For tests: hidden from --help (docs/TOOL.md describes it). Bounded like a real token count,
  // so that no warmup space is asked to reach an absurd size.
  options.push_back(
      {.flag = "--testing-warmup-max-tokens", .hidden = true, .minimum = 1, .maximum = 2147483647});
  // The battery of `run`.
  options.push_back({.flag = "--layers",
                     .help = "Layers of each kind: sliding-window, C4, C128 [1]",
                     .group = "Battery",
                     .run_only = true,
                     .minimum = 1,
                     .maximum = 64});
  options.push_back({.flag = "--max-model-len",
                     .help = "Longest sequence of the battery, 0: min(max_position_embeddings, "
                             "65536) [0]",
                     .group = "Battery",
                     .run_only = true,
                     .minimum = 0,
                     .maximum = 2147483647});
  options.push_back({.flag = "--max-num-seqs",
                     .help = "Requests in one step [128]",
                     .group = "Battery",
                     .run_only = true,
                     .minimum = 1,
                     .maximum = 4096});
  return options;
}

ConfigOptions config_options_from(const OptionValues& values,
                                  const std::optional<std::string>& arch) {
  // The config field each serving option sets.
  static const std::pair<std::string_view, std::string_view> kFields[] = {
      {"--block-size", "block_size"},
      {"--kv-cache-dtype", "kv_cache_dtype"},
      {"--indexer-dtype", "indexer_dtype"},
      {"--max-num-batched-tokens", "max_num_batched_tokens"},
      {"--dcp-world-size", "dcp_world_size"},
      {"--cp-interleave", "cp_interleave"},
      {"--c128-page-stride", "c128_page_stride_bytes"},
  };
  ConfigOptions options;
  for (const auto& [flag, value] : values) {
    if (flag == "--model") options.model = value;
    if (flag == "--testing-warmup-max-tokens")
      options.testing_warmup_max_tokens = std::stoll(value);
    for (const auto& [known, field] : kFields) {
      if (flag == known) options.serving.emplace_back(std::string(field), value);
    }
  }
  if (arch) options.serving.emplace_back("target_arch", *arch);
  return options;
}

}  // namespace zerojit::tool
