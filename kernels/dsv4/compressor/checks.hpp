// Argument checks shared by the compressor owners (C4 stores, C128 compress, C128 stores).
#pragma once

#include <optional>
#include <string_view>

#include "zerojit/checks.hpp"

namespace zerojit::dsv4 {

// What plan checks of the norm weight and the cos/sin cache beyond check_head_and_rope, which
// dispatch (always run first, by the base) applied to their dtypes and shapes: layout, alignment
// and device. And a slot vector.
void check_norm_weight(std::string_view kernel, const TensorDesc& weight, const TensorDesc& first);
void check_cos_sin_f32(std::string_view kernel, const TensorDesc& cos_sin, const TensorDesc& first);
void check_index_vector(std::string_view kernel, const TensorDesc& t, std::string_view argument,
                        DType dtype, const TensorDesc& first);
// What a compressor key's dispatch refuses: a norm weight or a cos/sin cache of another head or
// RoPE width than the kernels are written for (512 and 64). The keys carry neither (each kernel
// has one value), so dispatch, not the program, is where another value is refused.
void check_head_and_rope(const ArgumentChecks& checks, const TensorDesc& weight,
                         const TensorDesc& cos_sin);
// A full-row cache (bf16 or e4m3 [N, B, 512]) and, for e4m3, its per-tensor scale. Returns
// whether the cache is e4m3.
bool check_full_cache(std::string_view kernel, const TensorDesc& cache,
                      const std::optional<TensorRef>& fp8_scale, const TensorDesc& first);

}  // namespace zerojit::dsv4
