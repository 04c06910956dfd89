#include "dsv4/compressor/reference.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <unordered_set>
#include <vector>

#include "reference/numerics.hpp"

namespace zerojit::dsv4::reference {
namespace {

using zerojit::reference::bf16_to_float;
using zerojit::reference::e4m3_to_float;
using zerojit::reference::float_to_bf16_rn;
using zerojit::reference::float_to_e4m3_rn_sat;
using zerojit::reference::rope_rotate;
using zerojit::reference::round_to_bf16;
using zerojit::reference::ue8m0_ceil_pow2_bits;
using zerojit::reference::ue8m0_inverse_scale;
using zerojit::reference::ue8m0_scale;

constexpr int kHead = zj::dsv4::kCompressorHeadSize;
constexpr int kNope = zj::dsv4::kCompressorNopeDim;
constexpr int kRope = zj::dsv4::kCompressorRopeDim;
constexpr int kQuantBlock = zj::dsv4::kCompressorQuantBlock;
constexpr int kNopeBlocks = kNope / kQuantBlock;
constexpr float kFp8Max = zj::dsv4::kCompressorFp8Max;
constexpr long long kTokenStride = zj::dsv4::kDsMlaTokenStrideBytes;
constexpr long long kScaleBytes = zj::dsv4::kDsMlaScaleBytes;
constexpr long long kRowBytes = zj::dsv4::kDsMlaRowBytes;

float load_weight(const void* weights, NormWeightType type, int index) {
  if (type == NormWeightType::kFloat32) return static_cast<const float*>(weights)[index];
  return bf16_to_float(static_cast<const std::uint16_t*>(weights)[index]);
}

float clamp_fp8(float v) { return std::fmin(std::fmax(v, -kFp8Max), kFp8Max); }

// e4m3 code of clamp(q * multiplier), as compressor_common.cuh's quantize_e4m3x2.
std::uint8_t quantize_e4m3(float q, float multiplier) {
  return float_to_e4m3_rn_sat(clamp_fp8(q * multiplier));
}

void put_bf16(unsigned char* destination, float value) {
  const std::uint16_t bits = float_to_bf16_rn(value);
  destination[0] = static_cast<unsigned char>(bits & 0xFFu);
  destination[1] = static_cast<unsigned char>(bits >> 8);
}

// --- Comparison helpers -------------------------------------------------------------------------

std::string hex_byte(unsigned value) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s = "0x";
  s += kDigits[(value >> 4) & 0xF];
  s += kDigits[value & 0xF];
  return s;
}

// Spacing of e4m3 codes around magnitude m (in code units): 2^-9 in the subnormal range,
// else 2^(floor(log2 m) - 3).
double e4m3_step(double magnitude) {
  if (magnitude < 0x1p-6) return 0x1p-9;
  int exponent = 0;
  std::frexp(magnitude, &exponent);  // magnitude in [2^(exponent-1), 2^exponent)
  return std::ldexp(1.0, exponent - 1 - 3);
}

double e4m3_magnitude(std::uint8_t code) { return std::fabs(e4m3_to_float(code)); }

bool is_e4m3_nan(std::uint8_t code) { return (code & 0x7F) == 0x7F; }

// Marks [offset, offset + length) as written; false if it leaves the buffer.
bool mark(std::vector<bool>& written, long long offset, long long length) {
  if (offset < 0 || offset + length > static_cast<long long>(written.size())) return false;
  for (long long i = 0; i < length; ++i) written[static_cast<std::size_t>(offset + i)] = true;
  return true;
}

std::string compare_unwritten(std::span<const std::uint8_t> expected,
                              std::span<const std::uint8_t> actual,
                              const std::vector<bool>& written, long long page_stride_bytes) {
  for (std::size_t i = 0; i < expected.size(); ++i) {
    if (written[i] || expected[i] == actual[i]) continue;
    std::ostringstream out;
    const auto index = static_cast<long long>(i);
    out << "byte " << index << " (page " << index / page_stride_bytes << ", offset "
        << index % page_stride_bytes << ") lies outside the written rows but changed: expected "
        << hex_byte(expected[i]) << ", actual " << hex_byte(actual[i]);
    return out.str();
  }
  return {};
}

std::string check_unique(std::span<const long long> rows, const char* what) {
  std::unordered_set<long long> seen;
  for (const long long row : rows) {
    if (row < 0) return std::string(what) + " " + std::to_string(row) + " is negative";
    if (!seen.insert(row).second) {
      return std::string(what) + " " + std::to_string(row) +
             " is listed twice (two writers race on the GPU)";
    }
  }
  return {};
}

std::string flip_budget_message(long long flips, long long compared, long long allowance,
                                double fraction) {
  const auto budget = allowance + static_cast<long long>(fraction * static_cast<double>(compared));
  if (flips <= budget) return {};
  std::ostringstream out;
  out << flips << " of " << compared << " e4m3 values differ by one rounding step, more than the "
      << budget << " allowed: a systematic rounding difference";
  return out.str();
}

}  // namespace

// --- Shared helpers -----------------------------------------------------------------------------

NormWeightType norm_weight_type(DType norm_weight_dtype) {
  return norm_weight_dtype == DType::f32 ? NormWeightType::kFloat32 : NormWeightType::kBFloat16;
}

void throw_invalid_argument(const char* kernel, const std::string& what) {
  throw std::invalid_argument(std::string(kernel) + ": " + what);
}

float softmax_pool(const PoolTerm* terms, int count) {
  double max_score = -std::numeric_limits<double>::infinity();
  for (int i = 0; i < count; ++i) max_score = std::max(max_score, terms[i].score);
  double weight_sum = 0.0;
  double weighted_kv = 0.0;
  for (int i = 0; i < count; ++i) {
    const double w = std::exp(terms[i].score - max_score);
    weight_sum += w;
    weighted_kv += terms[i].kv * w;
  }
  return static_cast<float>(weighted_kv / weight_sum);
}

// --- Stages -------------------------------------------------------------------------------------

void rms_norm_row(const float* x, const void* weight, NormWeightType weight_type, float eps,
                  float* y) {
  double sum_squares = 0.0;
  for (int e = 0; e < kHead; ++e) sum_squares += static_cast<double>(x[e]) * x[e];
  const double mean = sum_squares / kHead;
  const auto rrms = static_cast<float>(1.0 / std::sqrt(mean + static_cast<double>(eps)));
  for (int e = 0; e < kHead; ++e) y[e] = (x[e] * rrms) * load_weight(weight, weight_type, e);
}

void store_ds_mla_row(const float* y, const float* cos_sin_row, unsigned char* k_cache,
                      long long page_stride_bytes, long long kv_cache_block_size,
                      long long kv_slot) {
  const long long page = kv_slot / kv_cache_block_size;
  const long long row = kv_slot % kv_cache_block_size;
  unsigned char* data = k_cache + page * page_stride_bytes + row * kTokenStride;
  unsigned char* scales =
      k_cache + page * page_stride_bytes + kv_cache_block_size * kTokenStride + row * kScaleBytes;
  for (int block = 0; block < kNopeBlocks; ++block) {
    std::array<float, kQuantBlock> q{};
    float amax = 0.0f;
    for (int i = 0; i < kQuantBlock; ++i) {
      q[static_cast<std::size_t>(i)] = round_to_bf16(y[block * kQuantBlock + i]);
      amax = std::fmax(amax, std::fabs(q[static_cast<std::size_t>(i)]));
    }
    const std::uint32_t exponent = ue8m0_ceil_pow2_bits(std::fmax(1e-4f, amax / kFp8Max));
    const float multiplier = ue8m0_inverse_scale(exponent);
    for (int i = 0; i < kQuantBlock; ++i) {
      data[block * kQuantBlock + i] = quantize_e4m3(q[static_cast<std::size_t>(i)], multiplier);
    }
    scales[block] = static_cast<unsigned char>(exponent);
  }
  scales[kScaleBytes - 1] = 0;
  for (int j = 0; j < kRope / 2; ++j) {
    const auto rotated = rope_rotate(y[kNope + 2 * j], y[kNope + 2 * j + 1], cos_sin_row[j],
                                     cos_sin_row[kRope / 2 + j]);
    put_bf16(data + kNope + 4 * j, rotated.even);
    put_bf16(data + kNope + 4 * j + 2, rotated.odd);
  }
}

void store_full_row(const float* y, const float* cos_sin_row, unsigned char* k_cache,
                    long long page_stride_bytes, long long row_stride_bytes,
                    long long kv_cache_block_size, long long kv_slot, bool store_full_fp8,
                    float fp8_scale) {
  const long long page = kv_slot / kv_cache_block_size;
  const long long row = kv_slot % kv_cache_block_size;
  unsigned char* base = k_cache + page * page_stride_bytes + row * row_stride_bytes;
  std::array<float, kHead> v{};
  std::copy(y, y + kHead, v.begin());
  for (int j = 0; j < kRope / 2; ++j) {
    const auto rotated = rope_rotate(y[kNope + 2 * j], y[kNope + 2 * j + 1], cos_sin_row[j],
                                     cos_sin_row[kRope / 2 + j]);
    v[static_cast<std::size_t>(kNope + 2 * j)] = rotated.even;
    v[static_cast<std::size_t>(kNope + 2 * j + 1)] = rotated.odd;
  }
  if (store_full_fp8) {
    const float multiplier = 1.0f / fp8_scale;
    for (int e = 0; e < kHead; ++e) {
      base[e] = quantize_e4m3(round_to_bf16(v[static_cast<std::size_t>(e)]), multiplier);
    }
  } else {
    for (int e = 0; e < kHead; ++e) put_bf16(base + 2 * e, v[static_cast<std::size_t>(e)]);
  }
}

// --- Comparisons --------------------------------------------------------------------------------

namespace {

// Every byte outside the rows of `kv_slots` (`mark_row(written, slot)` marks a slot's row, false
// where it falls outside the buffer) identical in both buffers: "" or what differs.
template <class MarkRow>
std::string compare_outside_rows(std::span<const std::uint8_t> expected,
                                 std::span<const std::uint8_t> actual,
                                 std::span<const long long> kv_slots, long long page_stride_bytes,
                                 MarkRow mark_row) {
  std::vector<bool> written(expected.size(), false);
  for (const long long slot : kv_slots) {
    if (!mark_row(written, slot)) {
      return "kv slot " + std::to_string(slot) + " lies outside the buffer";
    }
  }
  return compare_unwritten(expected, actual, written, page_stride_bytes);
}

// Where a slot's fp8_ds_mla row lies in the cache: its data (nope codes, then bf16 rope) and its
// scale bytes, which follow the page's B data rows.
struct DsMlaRowPlace {
  long long data = 0;
  long long scales = 0;
};

DsMlaRowPlace ds_mla_row_place(long long slot, long long page_stride_bytes,
                               long long kv_cache_block_size) {
  const long long page = slot / kv_cache_block_size;
  const long long row = slot % kv_cache_block_size;
  return {page * page_stride_bytes + row * kTokenStride,
          page * page_stride_bytes + kv_cache_block_size * kTokenStride + row * kScaleBytes};
}

// "kv slot S (row I of the list), PART DIM: ", the prefix of a row's mismatch.
struct RowLabel {
  long long slot = 0;
  std::size_t index = 0;
  std::string at(const char* part, int dim) const {
    std::ostringstream out;
    out << "kv slot " << slot << " (row " << index << " of the list), " << part << " " << dim
        << ": ";
    return out.str();
  }
};

// Nope block `block` of a row: the scale exponents equal (+-1 only at a power-of-two boundary
// of amax: see the header), each value within the tolerance or one e4m3 step of the coarser
// scale (a rounding flip, counted in `flips` where the exponents agree).
std::string compare_nope_block(std::span<const std::uint8_t> expected,
                               std::span<const std::uint8_t> actual, std::size_t data,
                               std::size_t scales, int block, const DsMlaTolerance& tolerance,
                               const RowLabel& where, long long& flips, long long& compared) {
  const unsigned expected_exponent = expected[scales + static_cast<std::size_t>(block)];
  const unsigned actual_exponent = actual[scales + static_cast<std::size_t>(block)];
  double expected_max = 0.0;
  double actual_max = 0.0;
  for (int i = 0; i < kQuantBlock; ++i) {
    const auto offset = data + static_cast<std::size_t>(block * kQuantBlock + i);
    expected_max = std::max(expected_max, e4m3_magnitude(expected[offset]));
    actual_max = std::max(actual_max, e4m3_magnitude(actual[offset]));
  }
  if (expected_exponent != actual_exponent) {
    const bool boundary =
        (actual_exponent == expected_exponent + 1 && expected_max == 448.0 &&
         actual_max == 224.0) ||
        (actual_exponent + 1 == expected_exponent && expected_max == 224.0 && actual_max == 448.0);
    if (!boundary) {
      return where.at("scale byte", block) + "expected exponent " +
             std::to_string(expected_exponent) + " (block max code " +
             std::to_string(expected_max) + "), actual " + std::to_string(actual_exponent) +
             " (block max code " + std::to_string(actual_max) + ")";
    }
  }
  const double expected_scale = ue8m0_scale(expected_exponent);
  const double actual_scale = ue8m0_scale(actual_exponent);
  const double coarse_scale = std::max(expected_scale, actual_scale);
  for (int i = 0; i < kQuantBlock; ++i) {
    const int dim = block * kQuantBlock + i;
    const auto offset = data + static_cast<std::size_t>(dim);
    const std::uint8_t expected_code = expected[offset];
    const std::uint8_t actual_code = actual[offset];
    ++compared;
    if (is_e4m3_nan(expected_code) || is_e4m3_nan(actual_code)) {
      if (expected_code == actual_code) continue;
    } else {
      const double ev = e4m3_to_float(expected_code) * expected_scale;
      const double av = e4m3_to_float(actual_code) * actual_scale;
      const double difference = std::fabs(av - ev);
      if (difference <= tolerance.value_rtol * std::fabs(ev)) continue;
      const double magnitude = std::max(std::fabs(av), std::fabs(ev)) / coarse_scale;
      if (difference <= e4m3_step(magnitude) * coarse_scale * (1.0 + 1e-9)) {
        if (expected_exponent == actual_exponent) ++flips;
        continue;
      }
    }
    std::ostringstream out;
    out << "expected " << e4m3_to_float(expected_code) * expected_scale << " (code "
        << hex_byte(expected_code) << ", exponent " << expected_exponent << "), actual "
        << e4m3_to_float(actual_code) * actual_scale << " (code " << hex_byte(actual_code)
        << ", exponent " << actual_exponent << ")";
    return where.at("nope dim", dim) + out.str();
  }
  return {};
}

// A row's bf16 rope part: each value within the relative tolerance plus a fraction of the
// row's largest rope magnitude.
std::string compare_rope(std::span<const std::uint8_t> expected,
                         std::span<const std::uint8_t> actual, std::size_t data,
                         const DsMlaTolerance& tolerance, const RowLabel& where) {
  double rope_max = 0.0;
  for (int j = 0; j < kRope; ++j) {
    const auto offset = data + static_cast<std::size_t>(kNope + 2 * j);
    const auto bits = static_cast<std::uint16_t>(expected[offset] | (expected[offset + 1] << 8));
    rope_max = std::max(rope_max, std::fabs(static_cast<double>(bf16_to_float(bits))));
  }
  for (int j = 0; j < kRope; ++j) {
    const auto offset = data + static_cast<std::size_t>(kNope + 2 * j);
    const auto expected_bits =
        static_cast<std::uint16_t>(expected[offset] | (expected[offset + 1] << 8));
    const auto actual_bits = static_cast<std::uint16_t>(actual[offset] | (actual[offset + 1] << 8));
    if (expected_bits == actual_bits) continue;
    const double ev = bf16_to_float(expected_bits);
    const double av = bf16_to_float(actual_bits);
    if (std::fabs(av - ev) <=
        tolerance.value_rtol * std::fabs(ev) + tolerance.rope_atol_fraction * rope_max) {
      continue;
    }
    std::ostringstream out;
    out << "expected bf16 " << ev << ", actual " << av;
    return where.at("rope dim", kNope + j) + out.str();
  }
  return {};
}

}  // namespace

std::string compare_ds_mla_rows(std::span<const std::uint8_t> expected,
                                std::span<const std::uint8_t> actual, long long page_stride_bytes,
                                long long kv_cache_block_size, std::span<const long long> kv_slots,
                                const DsMlaTolerance& tolerance) {
  if (expected.size() != actual.size()) {
    return "buffer sizes differ: expected " + std::to_string(expected.size()) + " bytes, actual " +
           std::to_string(actual.size());
  }
  if (kv_cache_block_size <= 0 || page_stride_bytes < kv_cache_block_size * kRowBytes) {
    return "invalid layout: page stride " + std::to_string(page_stride_bytes) + " for B " +
           std::to_string(kv_cache_block_size);
  }
  if (auto message = check_unique(kv_slots, "kv slot"); !message.empty()) return message;

  const auto mark_row = [&](std::vector<bool>& written, long long slot) {
    const DsMlaRowPlace place = ds_mla_row_place(slot, page_stride_bytes, kv_cache_block_size);
    return mark(written, place.data, kTokenStride) && mark(written, place.scales, kScaleBytes);
  };
  if (auto message = compare_outside_rows(expected, actual, kv_slots, page_stride_bytes, mark_row);
      !message.empty()) {
    return message;
  }

  long long flips = 0;
  long long compared = 0;
  for (std::size_t index = 0; index < kv_slots.size(); ++index) {
    const RowLabel where{kv_slots[index], index};
    const DsMlaRowPlace place =
        ds_mla_row_place(where.slot, page_stride_bytes, kv_cache_block_size);
    const auto data = static_cast<std::size_t>(place.data);
    const auto scales = static_cast<std::size_t>(place.scales);
    if (actual[scales + kScaleBytes - 1] != expected[scales + kScaleBytes - 1]) {
      return where.at("pad byte", kScaleBytes - 1) + "expected " +
             hex_byte(expected[scales + kScaleBytes - 1]) + ", actual " +
             hex_byte(actual[scales + kScaleBytes - 1]);
    }
    for (int block = 0; block < kNopeBlocks; ++block) {
      std::string failure = compare_nope_block(expected, actual, data, scales, block, tolerance,
                                               where, flips, compared);
      if (!failure.empty()) return failure;
    }
    if (std::string failure = compare_rope(expected, actual, data, tolerance, where);
        !failure.empty()) {
      return failure;
    }
  }
  return flip_budget_message(flips, compared, tolerance.rounding_flip_allowance,
                             tolerance.rounding_flip_fraction);
}

std::string compare_full_rows(std::span<const std::uint8_t> expected,
                              std::span<const std::uint8_t> actual, long long page_stride_bytes,
                              long long row_stride_bytes, long long kv_cache_block_size,
                              std::span<const long long> kv_slots, bool store_full_fp8,
                              const FullRowTolerance& tolerance) {
  if (expected.size() != actual.size()) {
    return "buffer sizes differ: expected " + std::to_string(expected.size()) + " bytes, actual " +
           std::to_string(actual.size());
  }
  if (kv_cache_block_size <= 0 || page_stride_bytes <= 0) return "invalid layout";
  if (auto message = check_unique(kv_slots, "kv slot"); !message.empty()) return message;
  const long long row_bytes = store_full_fp8 ? kHead : 2 * kHead;
  const auto mark_row = [&](std::vector<bool>& written, long long slot) {
    return mark(written,
                (slot / kv_cache_block_size) * page_stride_bytes +
                    (slot % kv_cache_block_size) * row_stride_bytes,
                row_bytes);
  };
  if (auto message = compare_outside_rows(expected, actual, kv_slots, page_stride_bytes, mark_row);
      !message.empty()) {
    return message;
  }

  long long flips = 0;
  long long compared = 0;
  std::array<double, kHead> ev{};
  std::array<double, kHead> av{};
  for (std::size_t index = 0; index < kv_slots.size(); ++index) {
    const long long slot = kv_slots[index];
    const auto base = static_cast<std::size_t>((slot / kv_cache_block_size) * page_stride_bytes +
                                               (slot % kv_cache_block_size) * row_stride_bytes);
    double row_max = 0.0;
    for (std::size_t e = 0; e < static_cast<std::size_t>(kHead); ++e) {
      if (store_full_fp8) {
        ev[e] = e4m3_to_float(expected[base + e]);
        av[e] = e4m3_to_float(actual[base + e]);
      } else {
        ev[e] = bf16_to_float(
            static_cast<std::uint16_t>(expected[base + 2 * e] | (expected[base + 2 * e + 1] << 8)));
        av[e] = bf16_to_float(
            static_cast<std::uint16_t>(actual[base + 2 * e] | (actual[base + 2 * e + 1] << 8)));
      }
      if (!std::isnan(ev[e])) row_max = std::max(row_max, std::fabs(ev[e]));
    }
    for (std::size_t e = 0; e < static_cast<std::size_t>(kHead); ++e) {
      ++compared;
      if (std::isnan(ev[e]) || std::isnan(av[e])) {
        if (std::isnan(ev[e]) && std::isnan(av[e])) continue;
      } else {
        const double difference = std::fabs(av[e] - ev[e]);
        if (difference <=
            tolerance.value_rtol * std::fabs(ev[e]) + tolerance.atol_fraction * row_max) {
          continue;
        }
        if (store_full_fp8 &&
            difference <= e4m3_step(std::max(std::fabs(av[e]), std::fabs(ev[e]))) * (1.0 + 1e-9)) {
          ++flips;
          continue;
        }
      }
      std::ostringstream out;
      out << "kv slot " << slot << " (row " << index << " of the list), dim " << e << ": expected "
          << ev[e] << ", actual " << av[e] << (store_full_fp8 ? " (e4m3 code values)" : " (bf16)");
      return out.str();
    }
  }
  if (!store_full_fp8) return {};
  return flip_budget_message(flips, compared, tolerance.rounding_flip_allowance,
                             tolerance.rounding_flip_fraction);
}

std::string compare_compressed_kv(std::span<const float> expected, std::span<const float> actual,
                                  long long row_length, std::span<const long long> rows,
                                  const CompressedKvTolerance& tolerance) {
  if (expected.size() != actual.size()) {
    return "buffer sizes differ: expected " + std::to_string(expected.size()) + " floats, actual " +
           std::to_string(actual.size());
  }
  if (row_length <= 0) return "invalid row length";
  if (auto message = check_unique(rows, "row"); !message.empty()) return message;
  const auto total_rows = static_cast<long long>(expected.size()) / row_length;
  std::vector<bool> listed(static_cast<std::size_t>(total_rows), false);
  for (const long long row : rows) {
    if (row >= total_rows) return "row " + std::to_string(row) + " lies outside the buffer";
    listed[static_cast<std::size_t>(row)] = true;
  }
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const auto row = static_cast<long long>(i) / row_length;
    if (row < total_rows && listed[static_cast<std::size_t>(row)]) continue;
    if (std::memcmp(&expected[i], &actual[i], sizeof(float)) == 0) continue;
    std::ostringstream out;
    out << "row " << row << " (not written) element " << static_cast<long long>(i) % row_length
        << " changed: expected " << expected[i] << ", actual " << actual[i];
    return out.str();
  }
  for (const long long row : rows) {
    const auto base = static_cast<std::size_t>(row * row_length);
    double row_max = 0.0;
    for (long long e = 0; e < row_length; ++e) {
      row_max = std::max(
          row_max, std::fabs(static_cast<double>(expected[base + static_cast<std::size_t>(e)])));
    }
    for (long long e = 0; e < row_length; ++e) {
      const double ev = expected[base + static_cast<std::size_t>(e)];
      const double av = actual[base + static_cast<std::size_t>(e)];
      if (std::fabs(av - ev) <=
          tolerance.rtol * std::fabs(ev) + tolerance.atol_fraction * row_max) {
        continue;
      }
      std::ostringstream out;
      out.precision(9);
      out << "row " << row << " element " << e << ": expected " << ev << ", actual " << av
          << " (row max " << row_max << ")";
      return out.str();
    }
  }
  return {};
}

}  // namespace zerojit::dsv4::reference
