#include "dsv4/indexer_q/reference.hpp"
#include "dsv4/indexer_q/indexer_q.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "reference/numerics.hpp"

namespace zerojit::dsv4::reference {
namespace {

// The key's values that change results, as the helpers below read them.
struct IndexerQShape {
  int head_dim = 128;            // D
  int rope_dim = 64;             // R
  int num_heads = 64;            // H
  bool cos_sin_is_bf16 = false;  // cos_sin_cache holds bf16 (else f32)
};

IndexerQShape shape_of(const IndexerQKey& key) {
  return {key.head_dim, key.rope_dim, key.num_heads, key.cos_sin_dtype == DType::bf16};
}

using zj::dsv4::IndexerQParams;

void require(bool condition, const char* kernel, const std::string& message) {
  if (!condition) throw std::invalid_argument(std::string(kernel) + ": " + message);
}

void check_common(const IndexerQParams& params, const IndexerQShape& shape, const char* kernel) {
  const int d = shape.head_dim;
  const int r = shape.rope_dim;
  const int lanes = d / 16;
  require(d > 0 && d % 16 == 0 && lanes <= 32 && (lanes & (lanes - 1)) == 0, kernel,
          "head_dim must be a multiple of 16 with head_dim / 16 a power of two <= 32, got " +
              std::to_string(d));
  require(r >= 0 && r <= d && r % 16 == 0 && (d - r) % 16 == 0, kernel,
          "rope_dim and head_dim - rope_dim must be multiples of 16, got rope_dim " +
              std::to_string(r));
  require(shape.num_heads > 0, kernel, "num_heads must be positive");
  require(params.num_tokens >= 0, kernel, "num_tokens must be >= 0");
  if (params.num_tokens == 0) return;
  require(params.q != nullptr, kernel, "q is null");
  require(params.weights != nullptr, kernel, "weights is null");
  require(params.weights_out != nullptr, kernel, "weights_out is null");
  if (r > 0) {
    require(params.positions != nullptr, kernel, "positions is null");
    require(params.cos_sin_cache != nullptr, kernel, "cos_sin_cache is null");
  }
}

float cos_sin_value(const IndexerQParams& params, bool is_bf16, long long position,
                    long long column) {
  const long long index = position * params.cos_sin_row_stride + column;
  if (is_bf16) {
    return zerojit::reference::bf16_to_float(
        static_cast<const std::uint16_t*>(params.cos_sin_cache)[index]);
  }
  return static_cast<const float*>(params.cos_sin_cache)[index];
}

// Row (t, h) after RoPE, every element a bf16 value held in a float, as the kernel sees it
// before quantization.
std::vector<float> rotated_row(const IndexerQParams& params, const IndexerQShape& shape,
                               long long token, long long head) {
  namespace num = zerojit::reference;
  const long long d = shape.head_dim;
  const long long row = token * shape.num_heads + head;
  std::vector<float> x(static_cast<std::size_t>(d));
  for (long long k = 0; k < d; ++k) {
    x[static_cast<std::size_t>(k)] = num::bf16_to_float(params.q[row * d + k]);
  }
  const long long nope = d - shape.rope_dim;
  const long long half = shape.rope_dim / 2;
  if (half > 0) {
    const long long position = params.positions[token];
    for (long long j = 0; j < half; ++j) {
      const float c = cos_sin_value(params, shape.cos_sin_is_bf16, position, j);
      const float s = cos_sin_value(params, shape.cos_sin_is_bf16, position, half + j);
      float& even = x[static_cast<std::size_t>(nope + 2 * j)];
      float& odd = x[static_cast<std::size_t>(nope + 2 * j + 1)];
      const num::RotatedPair rotated = num::rope_rotate(even, odd, c, s);
      even = num::round_to_bf16(rotated.even);
      odd = num::round_to_bf16(rotated.odd);
    }
  }
  return x;
}

// max |x| over [begin, end), with fmax semantics (a NaN element is ignored, as max.bf16x2 and
// fmaxf do on the device).
float abs_max(const std::vector<float>& x, std::size_t begin, std::size_t end) {
  float amax = 0.0f;
  for (std::size_t k = begin; k < end; ++k) amax = std::fmax(amax, std::fabs(x[k]));
  return amax;
}

}  // namespace

void indexer_q_fp8(const IndexerQKey& key, const IndexerQParams& params) {
  const IndexerQShape shape = shape_of(key);
  namespace num = zerojit::reference;
  constexpr const char* kKernel = "indexer_q_fp8";
  check_common(params, shape, kKernel);
  if (params.num_tokens == 0) return;
  require(params.q_fp8 != nullptr, kKernel, "q_fp8 is null");

  const long long d = shape.head_dim;
  for (long long t = 0; t < params.num_tokens; ++t) {
    for (long long h = 0; h < shape.num_heads; ++h) {
      const long long row = t * shape.num_heads + h;
      const std::vector<float> x = rotated_row(params, shape, t, h);
      const float amax = abs_max(x, 0, x.size());
      const std::uint32_t exponent = num::ue8m0_ceil_pow2_bits(
          std::fmax(amax, zj::dsv4::kIndexerQFp8MinAmax) * (1.0f / zj::dsv4::kIndexerQFp8Max));
      const float inverse_scale = num::ue8m0_inverse_scale(exponent);
      for (long long k = 0; k < d; ++k) {
        params.q_fp8[row * d + k] =
            num::float_to_e4m3_rn_sat(x[static_cast<std::size_t>(k)] * inverse_scale);
      }
      params.weights_out[row] =
          (num::bf16_to_float(params.weights[row]) * params.scale) * num::ue8m0_scale(exponent);
    }
  }
}

void indexer_q_mxfp4(const IndexerQKey& key, const IndexerQParams& params) {
  const IndexerQShape shape = shape_of(key);
  namespace num = zerojit::reference;
  constexpr const char* kKernel = "indexer_q_mxfp4";
  check_common(params, shape, kKernel);
  constexpr int kBlock = zj::dsv4::kIndexerQMxFp4BlockSize;
  require(shape.rope_dim % kBlock == 0 && (shape.head_dim - shape.rope_dim) % kBlock == 0, kKernel,
          "rope_dim and head_dim - rope_dim must be multiples of 32");
  if (params.num_tokens == 0) return;
  require(params.q_packed != nullptr, kKernel, "q_packed is null");
  require(params.q_scale != nullptr, kKernel, "q_scale is null");

  const long long d = shape.head_dim;
  const long long blocks = d / kBlock;
  for (long long t = 0; t < params.num_tokens; ++t) {
    for (long long h = 0; h < shape.num_heads; ++h) {
      const long long row = t * shape.num_heads + h;
      const std::vector<float> x = rotated_row(params, shape, t, h);
      for (long long m = 0; m < blocks; ++m) {
        const auto begin = static_cast<std::size_t>(m * kBlock);
        const float amax = abs_max(x, begin, begin + kBlock);
        const std::uint32_t exponent =
            num::ue8m0_ceil_pow2_bits(std::fmax(amax, zj::dsv4::kIndexerQMxFp4MinAmax) *
                                      (1.0f / zj::dsv4::kIndexerQMxFp4Max));
        const float inverse_scale = num::ue8m0_inverse_scale(exponent);
        params.q_scale[row * blocks + m] = static_cast<unsigned char>(exponent);
        for (std::size_t b = 0; b < kBlock / 2; ++b) {
          const std::uint8_t low = num::float_to_e2m1_rn_sat(x[begin + 2 * b] * inverse_scale);
          const std::uint8_t high = num::float_to_e2m1_rn_sat(x[begin + 2 * b + 1] * inverse_scale);
          params.q_packed[row * (d / 2) + m * (kBlock / 2) + static_cast<long long>(b)] =
              static_cast<unsigned char>(low | (high << 4));
        }
      }
      params.weights_out[row] = num::bf16_to_float(params.weights[row]) * params.scale;
    }
  }
}

}  // namespace zerojit::dsv4::reference

namespace zerojit::dsv4 {

void IndexerQFp8Kernel::reference(const IndexerQKey& key, const zj::dsv4::IndexerQParams& params) {
  reference::indexer_q_fp8(key, params);
}

void IndexerQMxFp4Kernel::reference(const IndexerQKey& key,
                                    const zj::dsv4::IndexerQParams& params) {
  reference::indexer_q_mxfp4(key, params);
}

}  // namespace zerojit::dsv4
