// Building the DSv4 configuration the options name, and registering its warmup.
#include "config_options.hpp"

#include "dsv4/family.hpp"
#include "exit_codes.hpp"

namespace zerojit::tool {

dsv4::Dsv4Config build_config(const ConfigOptions& options) {
  dsv4::Dsv4Config config;
  config.model = dsv4::model_from_name_or_path(options.model);
  for (const auto& [field, value] : options.serving) {
    dsv4::set_serving_option(config.serving, field, value);
  }
  dsv4::validate(config);
  return config;
}

void register_dsv4_warmup(const dsv4::Dsv4Config& config, const ConfigOptions& options,
                          WarmupRegistry& registry) {
  if (options.testing_warmup_max_tokens <= 0) {
    dsv4::AttentionKernels(config).register_warmup(registry);
    return;
  }
  // A configuration that believes no forward pass exceeds N tokens: only the indexer's space
  // depends on it, so warmup misses its coarsened key while the battery still reaches it.
  dsv4::Dsv4Config narrowed = config;
  narrowed.serving.max_num_batched_tokens = options.testing_warmup_max_tokens;
  dsv4::AttentionKernels(narrowed).register_warmup(registry);
}

Manifest checked_manifest(const WarmupRegistry& registry) {
  try {
    return registry.manifest();
  } catch (const Error& error) {
    throw ToolError{kExitUsage,
                    std::string("this configuration needs a kernel specialization the kernels "
                                "cannot build: ") +
                        error.what(),
                    "change the model or serving option named above to one the DSv4 kernels "
                    "support (spec section 8 lists the domains)"};
  }
}

std::string describe_config(const dsv4::Dsv4Config& config) {
  const dsv4::ServingConfig& s = config.serving;
  std::string text = config.model.name + " (" + std::to_string(config.model.num_hidden_layers) +
                     " layers), block_size=" + std::to_string(s.block_size) +
                     ", kv_cache_dtype=" + std::string(dsv4::to_string(s.kv_cache_dtype)) +
                     ", indexer_dtype=" + std::string(dsv4::to_string(s.indexer_dtype)) +
                     ", max_num_batched_tokens=" + std::to_string(s.max_num_batched_tokens) +
                     ", target_arch=" + s.target_arch;
  if (s.dcp_world_size > 1) {
    text += ", dcp_world_size=" + std::to_string(s.dcp_world_size) +
            ", cp_interleave=" + std::to_string(s.cp_interleave);
  }
  if (s.c128_page_stride_bytes) {
    text += ", c128_page_stride_bytes=" + std::to_string(*s.c128_page_stride_bytes);
  }
  return text;
}

}  // namespace zerojit::tool
