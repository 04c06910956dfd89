// Building the DSv4 configuration the options name, registering its warmup, and the DSv4
// family of the tool.
#include "config_options.hpp"

#include <nlohmann/json.hpp>

#include "dsv4/family.hpp"
#include "exit_codes.hpp"
#include "run_command.hpp"

namespace zerojit::tool {

dsv4::Dsv4Config build_config(const ConfigOptions& options) {
  dsv4::Dsv4Config config;
  config.model = dsv4::model_from_name_or_path(options.model);
  for (const auto& [field, value] : options.serving) {
    dsv4::set_serving_option(config.serving, field, value);
  }
  dsv4::validate_for_kernels(config);
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

namespace {

// Tells the tool that the configuration is at fault (a usage error), with where to look.
[[noreturn]] void rethrow_config_error(const dsv4::ConfigError& error) {
  throw ConfigurationError(error.what(), "fix the option or the config.json field named above");
}

std::int64_t value_of(const OptionValues& values, std::string_view flag, std::int64_t otherwise) {
  for (const auto& [given, value] : values) {
    if (given == flag) otherwise = std::stoll(value);  // checked when parsed
  }
  return otherwise;
}

int run_dsv4(const RunRequest& request) {
  RunCommand command;
  command.config = config_options_from(request.values, request.arch);
  command.cache = {request.cache_dir, request.layers, request.allow_shared, request.remote_cache};
  command.devices = request.devices;
  command.jobs = request.jobs;
  command.in_process = request.in_process;
  command.steps = request.steps;
  command.seed = request.seed;
  command.monitor = request.monitor;
  command.dispatch_only = request.dispatch_only;
  command.layers = static_cast<int>(value_of(request.values, "--layers", command.layers));
  command.max_model_len = value_of(request.values, "--max-model-len", command.max_model_len);
  command.max_num_seqs =
      static_cast<int>(value_of(request.values, "--max-num-seqs", command.max_num_seqs));
  command.json = request.json;
  try {
    return run_run(command);
  } catch (const dsv4::ConfigError& error) {
    rethrow_config_error(error);
  }
}

}  // namespace

Family dsv4_tool_family() {
  Family family;
  family.name = "dsv4";
  family.summary = "DeepSeek-V4 attention kernels";
  family.options = dsv4_config_options();
  family.configure = [](const OptionValues& values, const std::optional<std::string>& arch) {
    const ConfigOptions options = config_options_from(values, arch);
    try {
      auto config = std::make_shared<const dsv4::Dsv4Config>(build_config(options));
      FamilyConfiguration out;
      out.description = describe_config(*config);
      if (options.testing_warmup_max_tokens > 0) {
        out.description += " [testing: warmup believes max_num_batched_tokens=" +
                           std::to_string(options.testing_warmup_max_tokens) + "]";
      }
      out.arch = config->serving.target_arch;
      out.json = nlohmann::json(*config).dump();
      out.register_warmup = [config, options](WarmupRegistry& registry) {
        register_dsv4_warmup(*config, options, registry);
      };
      return out;
    } catch (const dsv4::ConfigError& error) {
      rethrow_config_error(error);
    }
  };
  family.run = run_dsv4;
  family.run_help =
      "Warm up, arm the monitor, and run a randomized serving battery through the kernels as "
      "the attention layers call them (on each GPU; without one, through dispatch alone)";
  family.steps_help = "Serving steps (forward passes)";
  return family;
}

}  // namespace zerojit::tool
