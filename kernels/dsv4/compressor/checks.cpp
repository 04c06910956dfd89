#include "dsv4/compressor/checks.hpp"

#include "dsv4/compressor/compressor_params.h"

namespace zerojit::dsv4 {

namespace params = zj::dsv4;

void check_norm_weight(std::string_view kernel, const TensorDesc& weight, const TensorDesc& first) {
  const ArgumentChecks checks(kernel);
  checks.contiguous(weight, "rms_norm_weight");
  checks.aligned(weight, "rms_norm_weight", 16);
  checks.same_device(weight, "rms_norm_weight", first);
}

void check_head_and_rope(const ArgumentChecks& checks, const TensorDesc& weight,
                         const TensorDesc& cos_sin) {
  checks.tensor(weight, "rms_norm_weight", {DType::bf16, DType::f32}, 1);
  checks.size(weight, "rms_norm_weight", 0, params::kCompressorHeadSize);
  checks.tensor(cos_sin, "cos_sin_cache", {DType::f32}, 2);
  checks.size(cos_sin, "cos_sin_cache", 1, params::kCompressorRopeDim);
}

void check_cos_sin_f32(std::string_view kernel, const TensorDesc& cos_sin,
                       const TensorDesc& first) {
  const ArgumentChecks checks(kernel);
  checks.innermost_contiguous(cos_sin, "cos_sin_cache");
  checks.aligned(cos_sin, "cos_sin_cache", 16);
  checks.stride_bytes_multiple(cos_sin, "cos_sin_cache", 0, 16);
  checks.same_device(cos_sin, "cos_sin_cache", first);
}

void check_index_vector(std::string_view kernel, const TensorDesc& t, std::string_view argument,
                        DType dtype, const TensorDesc& first) {
  const ArgumentChecks checks(kernel);
  checks.tensor(t, argument, {dtype}, 1);
  checks.contiguous(t, argument);
  checks.same_device(t, argument, first);
}

bool check_full_cache(std::string_view kernel, const TensorDesc& cache,
                      const std::optional<TensorRef>& fp8_scale, const TensorDesc& first) {
  const ArgumentChecks checks(kernel);
  checks.tensor(cache, "k_cache", {DType::bf16, DType::e4m3}, 3);
  checks.size(cache, "k_cache", 2, params::kCompressorHeadSize);
  checks.innermost_contiguous(cache, "k_cache");
  checks.aligned(cache, "k_cache", 16);
  checks.stride_bytes_multiple(cache, "k_cache", 0, 16);
  checks.stride_bytes_multiple(cache, "k_cache", 1, 16);
  checks.distinct_elements(cache, "k_cache");
  checks.same_device(cache, "k_cache", first);
  const bool fp8 = cache.dtype == DType::e4m3;
  if (fp8) {
    if (!fp8_scale) checks.fail("fp8_scale", "is required for an e4m3 cache");
    checks.tensor(fp8_scale->desc, "fp8_scale", {DType::f32}, 1);
    checks.size(fp8_scale->desc, "fp8_scale", 0, 1);
    checks.same_device(fp8_scale->desc, "fp8_scale", cache);
  }
  return fp8;
}

}  // namespace zerojit::dsv4
