// Serving options from their text form (a command line) and their derived values.
#include "dsv4/config/serving.hpp"

#include <array>
#include <charconv>

#include "dsv4/config/detail.hpp"
#include "dsv4/config/geometry.hpp"

namespace zerojit::dsv4 {

using config_detail::fail_serving;
using config_detail::parse_dtype_option;
using config_detail::parse_integer_option;

namespace {

constexpr std::array<std::string_view, 8> kServingOptionNames = {
    "block_size",  "kv_cache_dtype", "indexer_dtype", "max_num_batched_tokens",
    "target_arch", "dcp_world_size", "cp_interleave", "c128_page_stride_bytes",
};

}  // namespace

std::span<const std::string_view> serving_option_names() { return kServingOptionNames; }

void set_serving_option(ServingConfig& serving, std::string_view option, std::string_view value) {
  const std::string name = config_detail::normalized_option(option);
  if (name == "block_size") {
    serving.block_size = parse_integer_option<int>(name, value);
  } else if (name == "kv_cache_dtype") {
    serving.kv_cache_dtype = parse_dtype_option(name, value, parse_kv_cache_dtype);
  } else if (name == "indexer_dtype") {
    serving.indexer_dtype = parse_dtype_option(name, value, parse_indexer_dtype);
  } else if (name == "max_num_batched_tokens") {
    serving.max_num_batched_tokens = parse_integer_option<std::int64_t>(name, value);
  } else if (name == "target_arch") {
    serving.target_arch = std::string(value);
  } else if (name == "dcp_world_size") {
    serving.dcp_world_size = parse_integer_option<int>(name, value);
  } else if (name == "cp_interleave") {
    serving.cp_interleave = parse_integer_option<int>(name, value);
  } else if (name == "c128_page_stride_bytes") {
    if (value == "auto") {
      serving.c128_page_stride_bytes.reset();
    } else {
      serving.c128_page_stride_bytes = parse_integer_option<std::int64_t>(name, value);
    }
  } else {
    fail_serving("unknown option " + config_detail::quoted(option) +
                 "; valid: " + config_detail::join(kServingOptionNames));
  }
}

int target_sm_version(std::string_view target_arch) {
  const auto malformed = [target_arch]() {
    fail_serving(
        "option 'target_arch' must look like sm_90a or sm_100a (sm_<version> with an "
        "optional 'a' or 'f'), got " +
        config_detail::quoted(target_arch));
  };
  constexpr std::string_view kPrefix = "sm_";
  if (!target_arch.starts_with(kPrefix)) malformed();
  std::string_view digits = target_arch.substr(kPrefix.size());
  if (!digits.empty() && (digits.back() == 'a' || digits.back() == 'f')) {
    digits.remove_suffix(1);
  }
  if (digits.size() < 2 || digits.size() > 3) malformed();
  int version = 0;
  const auto [stop, error] = std::from_chars(digits.data(), digits.data() + digits.size(), version);
  if (error != std::errc{} || stop != digits.data() + digits.size()) malformed();
  return version;
}

std::int64_t effective_c128_page_stride_bytes(const ServingConfig& serving) {
  if (serving.c128_page_stride_bytes) return *serving.c128_page_stride_bytes;
  return default_ds_mla_page_stride_bytes(
      compressed_block_size(serving.block_size, kHcaCompressRatio));
}

}  // namespace zerojit::dsv4
