#include "dsv4/dequant_gather/reference.hpp"
#include "dsv4/dequant_gather/dequant_gather.hpp"

#include <cstdint>
#include <stdexcept>
#include <string>

#include "reference/numerics.hpp"

namespace zerojit::dsv4::reference {
namespace {

void require(bool condition, const std::string& message) {
  if (!condition) throw std::invalid_argument("dequant_gather: " + message);
}

// The kernel's BF16 path: e4m3 -> bf16 (exact), then mul.rn.bf16x2 by the bf16 whose exponent
// field is E. The f32 product of those two values is exact (at most 4 significant bits, and
// far from the f32 limits except for overflow, which both sides turn into inf), so one bf16
// rounding of it reproduces the BF16 multiply. E = 0 makes the factor +0.
std::uint16_t dequantize(std::uint8_t code, std::uint8_t exponent) {
  namespace num = zerojit::reference;
  const float factor = num::bf16_to_float(static_cast<std::uint16_t>(exponent << 7));
  return num::float_to_bf16_rn(num::e4m3_to_float(code) * factor);
}

}  // namespace

void dequant_gather(const DequantGatherKey& key, const zj::dsv4::DequantGatherParams& params) {
  using namespace zj::dsv4;
  const int block_size = key.block_size;
  const bool has_gather_lens = key.has_gather_lens;
  require(block_size > 0, "block_size must be positive, got " + std::to_string(block_size));
  require(params.num_reqs >= 0, "num_reqs must be >= 0");
  if (params.num_reqs == 0) return;
  require(params.seq_lens != nullptr, "seq_lens is null");
  require(!has_gather_lens || params.gather_lens != nullptr, "gather_lens is null");
  require(params.out != nullptr, "out is null");
  require(params.k_cache != nullptr, "k_cache is null");
  require(params.block_table != nullptr, "block_table is null");

  const long long scale_base = static_cast<long long>(block_size) * kDequantGatherTokenBytes;
  for (long long r = 0; r < params.num_reqs; ++r) {
    const int seq_len = params.seq_lens[r];
    const int gather_len = has_gather_lens ? params.gather_lens[r] : seq_len;
    const long long start = static_cast<long long>(seq_len) - gather_len;
    for (long long i = 0; i < gather_len; ++i) {
      const long long destination = params.offset + i;
      if (destination < 0 || destination >= params.num_rows_out) continue;
      const long long position = start + i;
      if (position < 0) continue;
      const long long column = position / block_size;
      if (column >= params.max_blocks) continue;
      const int page = params.block_table[r * params.block_table_row_stride + column];
      if (page < 0) continue;
      const long long row = position % block_size;

      const unsigned char* page_base =
          params.k_cache + static_cast<long long>(page) * params.page_stride_bytes;
      const unsigned char* data = page_base + row * kDequantGatherTokenBytes;
      const unsigned char* scales = page_base + scale_base + row * kDequantGatherScaleBytes;
      unsigned short* out =
          params.out + r * params.out_req_stride + destination * params.out_row_stride;
      for (int dim = 0; dim < kDequantGatherFp8Dim; ++dim) {
        out[dim] = dequantize(data[dim], scales[dim / kDequantGatherGroupSize]);
      }
      for (int j = 0; j < kDequantGatherHeadDim - kDequantGatherFp8Dim; ++j) {
        const int byte = kDequantGatherFp8Dim + 2 * j;
        out[kDequantGatherFp8Dim + j] =
            static_cast<unsigned short>(data[byte] | (data[byte + 1] << 8));
      }
    }
  }
}

}  // namespace zerojit::dsv4::reference

namespace zerojit::dsv4 {

void DequantGatherKernel::reference(const DequantGatherKey& key,
                                    const zj::dsv4::DequantGatherParams& params) {
  reference::dequant_gather(key, params);
}

}  // namespace zerojit::dsv4
