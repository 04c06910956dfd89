#include "dsv4/config/dtypes.hpp"

#include <string>

#include "dsv4/config/detail.hpp"

namespace zerojit::dsv4 {

std::string_view to_string(FloatDtype dtype) {
  return dtype == FloatDtype::f32 ? "float32" : "bfloat16";
}

std::string_view to_string(KvCacheDtype dtype) {
  switch (dtype) {
    case KvCacheDtype::fp8_ds_mla:
      return "fp8_ds_mla";
    case KvCacheDtype::bf16:
      return "bf16";
    case KvCacheDtype::fp8_e4m3:
      return "fp8_e4m3";
  }
  return "unknown";
}

std::string_view to_string(IndexerDtype dtype) {
  return dtype == IndexerDtype::fp8 ? "fp8" : "mxfp4";
}

KvCacheDtype parse_kv_cache_dtype(std::string_view text) {
  if (text == "fp8_ds_mla") return KvCacheDtype::fp8_ds_mla;
  // vLLM's "auto" means the model dtype, which is BF16 for every DSv4 checkpoint.
  if (text == "bf16" || text == "auto") return KvCacheDtype::bf16;
  if (text == "fp8" || text == "fp8_e4m3") return KvCacheDtype::fp8_e4m3;
  throw ConfigError("unknown KV cache dtype " + config_detail::quoted(text) +
                    "; valid: fp8_ds_mla, bf16, auto, fp8, fp8_e4m3");
}

IndexerDtype parse_indexer_dtype(std::string_view text) {
  if (text == "fp8") return IndexerDtype::fp8;
  if (text == "mxfp4") return IndexerDtype::mxfp4;
  throw ConfigError("unknown indexer dtype " + config_detail::quoted(text) + "; valid: fp8, mxfp4");
}

FloatDtype parse_model_dtype(std::string_view text) {
  if (text == "bfloat16") return FloatDtype::bf16;
  if (text == "float32") return FloatDtype::f32;
  // The compressor kernels load RMSNorm weights as BF16 or FP32 only (spec §3).
  throw ConfigError("unsupported model dtype " + config_detail::quoted(text) +
                    "; valid: bfloat16, float32");
}

}  // namespace zerojit::dsv4
