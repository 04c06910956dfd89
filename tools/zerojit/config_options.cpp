#include "config_options.hpp"

#include <memory>

#include "dsv4/family.hpp"
#include "exit_codes.hpp"
#include "zerojit/cuda.hpp"
#include "zerojit/disk_cache.hpp"
#include "zerojit/runtime.hpp"

namespace zerojit::tool {

void add_config_options(CLI::App& command, ConfigOptions& options) {
  command
      .add_option("--model", options.model,
                  "dsv4-flash, dsv4-pro, a config.json or a directory holding one")
      ->capture_default_str()
      ->group("Configuration");
  struct Serving {
    const char* flag;
    const char* field;
    const char* help;
  };
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
  for (const Serving& serving : kServing) {
    const std::string field = serving.field;
    command
        .add_option_function<std::string>(
            serving.flag,
            [&options, field](const std::string& value) {
              options.serving.emplace_back(field, value);
            },
            serving.help)
        ->type_name(field == "target_arch" ? "ARCH" : "VALUE")
        ->group("Configuration");
  }
  // For tests: hidden from --help (docs/TOOL.md describes it).
  command.add_option("--testing-warmup-max-tokens", options.testing_warmup_max_tokens)
      ->group("")
      ->check(CLI::PositiveNumber);
}

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

std::vector<int> parse_devices(const std::string& text) {
  if (text.empty() || text == "all") return {};
  std::vector<int> devices;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, comma - start);
    bool digits = !item.empty() && item.size() < 6;
    for (char c : item) digits = digits && c >= '0' && c <= '9';
    if (!digits) {
      throw ToolError{kExitUsage,
                      "--devices \"" + text +
                          "\" is not 'all' or a list of device "
                          "numbers",
                      "pass --devices all, or device ordinals such as --devices 0 or "
                      "--devices 0,1"};
    }
    const int device = std::stoi(item);
    for (int seen : devices) {
      if (seen == device) {
        throw ToolError{kExitUsage, "--devices names device " + item + " twice",
                        "list each device once"};
      }
    }
    devices.push_back(device);
    start = comma + 1;
  }
  return devices;
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

void add_cache_options(CLI::App& command, CacheSelection& selection) {
  command
      .add_option("--cache-dir", selection.cache_dir,
                  "Compile cache root (default: $ZEROJIT_CACHE_DIR, $XDG_CACHE_HOME/zerojit or "
                  "~/.cache/zerojit)")
      ->type_name("DIR")
      ->group("Cache");
  command
      .add_option("--layer", selection.layers,
                  "A read-only cache layer searched first, e.g. an ahead-of-time pack "
                  "(repeatable)")
      ->type_name("DIR")
      ->group("Cache");
}

void install_cache(const CacheSelection& selection) {
  if (selection.cache_dir.empty() && selection.layers.empty()) return;
  DiskCacheOptions options;
  try {
    options = default_disk_cache_options();
  } catch (const Error& error) {
    throw ToolError{kExitUsage, error.what(), "fix or unset the environment variable it names"};
  }
  if (!selection.cache_dir.empty()) options.root = selection.cache_dir;
  for (const std::string& layer : selection.layers) options.read_only_layers.emplace_back(layer);
  Runtime::instance().set_artifact_store(std::make_shared<DiskCache>(std::move(options)));
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
  auto* disk = dynamic_cast<DiskCache*>(store.get());
  if (disk == nullptr) return true;
  if (disk->state() == CacheRootState::writable) return true;
  reason = disk->state_reason();
  if (reason.empty()) reason = "its root is " + std::string(to_string(disk->state()));
  return false;
}

}  // namespace zerojit::tool
