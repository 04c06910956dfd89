// The dtypes a DSv4 configuration names: plain enums local to this module; the runtime maps
// them onto its own dtype type.
#pragma once

#include <string_view>

#include "dsv4/config/error.hpp"

namespace zerojit::dsv4 {

// The dtype of a floating-point tensor the kernels read (model weights, RoPE cache).
enum class FloatDtype { f32, bf16 };

// How the main-attention paged K cache stores a row (spec §0.4, §4, §7).
enum class KvCacheDtype {
  fp8_ds_mla,  // 448 E4M3 + 64 BF16 + 8 UE8M0 scale bytes per row (FlashMLA layout)
  bf16,        // plain BF16 rows (FlashInfer layout)
  fp8_e4m3,    // plain per-tensor-scaled E4M3 rows (FlashInfer layout)
};

// How the Lightning Indexer quantizes its query (spec §1).
enum class IndexerDtype { fp8, mxfp4 };

// Canonical names, as the JSON form and the command line spell them.
std::string_view to_string(FloatDtype dtype);    // "float32" | "bfloat16" (torch names)
std::string_view to_string(KvCacheDtype dtype);  // "fp8_ds_mla" | "bf16" | "fp8_e4m3"
std::string_view to_string(IndexerDtype dtype);  // "fp8" | "mxfp4"

// Parsers; an unknown name throws ConfigError listing the accepted names.
// kv cache: "fp8_ds_mla"; "bf16" or "auto" (the model dtype, BF16); "fp8" or "fp8_e4m3".
KvCacheDtype parse_kv_cache_dtype(std::string_view text);
// indexer: "fp8" | "mxfp4".
IndexerDtype parse_indexer_dtype(std::string_view text);
// model dtype: "bfloat16" | "float32" (the torch_dtype / dtype of a config.json).
FloatDtype parse_model_dtype(std::string_view text);

}  // namespace zerojit::dsv4
