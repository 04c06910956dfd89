#include "config_options.hpp"

#include "option_values.hpp"

namespace zerojit::tool {

void add_config_options(CLI::App& app, std::string_view command, ConfigOptions& options) {
  add_text_option(app, command, "--model", options.model, "NAME|PATH",
                  "dsv4-flash, dsv4-pro, a config.json or a directory holding one [dsv4-flash]")
      ->group("Configuration");
  struct Serving {
    const char* flag;
    const char* field;
    const char* help;
  };
  // Their values are the configuration's to check (dsv4::set_serving_option and validate name
  // the field and its domain); only --arch is checked here, with the compiler's own rule.
  static constexpr Serving kServing[] = {
      {"--block-size", "block_size", "Tokens per KV cache page (0: no KV cache) [256]"},
      {"--kv-cache-dtype", "kv_cache_dtype",
       "fp8_ds_mla, bf16 (or auto), fp8 (or fp8_e4m3) [fp8_ds_mla]"},
      {"--indexer-dtype", "indexer_dtype", "fp8, or mxfp4 (sm_100 targets) [fp8]"},
      {"--max-num-batched-tokens", "max_num_batched_tokens", "Tokens of one forward pass [8192]"},
      {"--dcp-world-size", "dcp_world_size", "Decode context parallel ranks [1]"},
      {"--cp-interleave", "cp_interleave", "cp_kv_cache_interleave_size [1]"},
      {"--c128-page-stride", "c128_page_stride_bytes",
       "C128 cache page stride in bytes, or auto [auto: round_up(B_k*584, 576)]"},
      {"--arch", "target_arch",
       "Target arch of the serving config, compiled for when no GPU loads the kernels [sm_90a]"},
  };
  const std::string where(command);
  for (const Serving& serving : kServing) {
    const std::string field = serving.field;
    const std::string flag = serving.flag;
    app.add_option_function<std::string>(
           flag,
           [&options, field, flag, where](const std::string& value) {
             refuse_option_as_value(where, flag, value);
             if (field == "target_arch") {
               check_arch(where, flag, value,
                          "an architecture such as sm_90a for the serving target_arch");
             }
             options.serving.emplace_back(field, value);
           },
           serving.help)
        ->type_name(field == "target_arch" ? "ARCH" : "VALUE")
        ->group("Configuration");
  }
  // For tests: hidden from --help (docs/TOOL.md describes it). Bounded like a real token count,
  // so that no warmup space is asked to reach an absurd size.
  add_whole_number_option(app, command, "--testing-warmup-max-tokens",
                          options.testing_warmup_max_tokens, 1, 2147483647, "")
      ->group("");
}

}  // namespace zerojit::tool
