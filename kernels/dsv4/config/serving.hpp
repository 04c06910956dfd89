// The serving options that change which DSv4 kernels compile.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "dsv4/config/dtypes.hpp"

namespace zerojit::dsv4 {

// The largest max_num_batched_tokens a configuration may ask for: 16 Mi tokens, 16 times
// DSv4's longest context (max_position_embeddings 1 Mi), so no real serving run is refused. It
// keeps the token counts the kernels see far inside their int32 launch grids (the indexer runs
// 2 blocks per token at DSv4's shape) and a warmup space over them small.
inline constexpr std::int64_t kMaxNumBatchedTokens = std::int64_t{1} << 24;

// The largest block_size: serving engines page the KV cache in at most a few hundred tokens
// (DSv4 serves with 64 or 256); 65536 refuses no real configuration and keeps a page's bytes
// (block_size * 584) far inside the 32-bit arithmetic of the kernels' page geometry.
inline constexpr int kMaxBlockSize = 1 << 16;

// The largest c128_page_stride_bytes: 1 GiB, thousands of times the largest page
// (compressed_block_size(kMaxBlockSize, 128) * 584 = 299,008 bytes), so only a typo is
// refused, and page offsets stay far from overflowing.
inline constexpr std::int64_t kMaxC128PageStrideBytes = std::int64_t{1} << 30;

struct ServingConfig {
  // Tokens per page of the sliding-window KV cache; 0 means no KV cache, so no kernel runs.
  int block_size = 256;
  KvCacheDtype kv_cache_dtype = KvCacheDtype::fp8_ds_mla;
  IndexerDtype indexer_dtype = IndexerDtype::fp8;
  std::int64_t max_num_batched_tokens = 8192;  // bound on the tokens of one forward pass
  std::string target_arch = "sm_90a";          // sm_<version>[a|f], e.g. sm_90a, sm_100a
  int dcp_world_size = 1;                      // decode context parallel ranks
  int cp_interleave = 1;                       // cp_kv_cache_interleave_size
  // Page stride in bytes of the compressed C128 fp8_ds_mla cache when the allocator packs
  // pages more widely than the default round_up(B_k * 584, 576) (e.g. 39168). Must be at
  // least B_k * 584 and a multiple of 32. B_k = compressed_block_size(block_size, 128).
  std::optional<std::int64_t> c128_page_stride_bytes;

  bool operator==(const ServingConfig&) const = default;
};

// The option names set_serving_option accepts (the fields above), in declaration order.
std::span<const std::string_view> serving_option_names();

// Sets one option from its text form, as a command line gives it ("block_size", "256").
// Dashes in the name count as underscores. c128_page_stride_bytes also takes "auto" (the
// default). Checks the value's form only; call validate() once all options are set.
void set_serving_option(ServingConfig& serving, std::string_view option, std::string_view value);

// The compute capability of a target: "sm_90a" -> 90, "sm_100f" -> 100. Throws ConfigError
// naming target_arch unless the text is sm_<2 or 3 digits> with an optional 'a' or 'f'.
int target_sm_version(std::string_view target_arch);

// The C128 ds_mla page stride the runtime uses: the explicit one, else the default for
// B_k = compressed_block_size(block_size, 128). Requires block_size >= 0.
std::int64_t effective_c128_page_stride_bytes(const ServingConfig& serving);

// Throws ConfigError naming the option: block_size in [0, kMaxBlockSize],
// max_num_batched_tokens in [1, kMaxNumBatchedTokens], dcp_world_size >= 1, cp_interleave >= 1, a
// well-formed target_arch, MXFP4 indexer only on an sm_100-family target (sm_100..sm_109: its FP4
// MQA logits consumer needs SM100), and a page stride override >= B_k * 584, <=
// kMaxC128PageStrideBytes and a multiple of 32.
void validate(const ServingConfig& serving);

}  // namespace zerojit::dsv4
