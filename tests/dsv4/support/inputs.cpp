#include "dsv4/support/inputs.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <stdexcept>

#include "reference/numerics.hpp"
#include "zerojit/parallel.hpp"

namespace zerojit::dsv4::testing {

// --- Random ------------------------------------------------------------------------------------

std::uint64_t Random::next() {
  std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

std::int64_t Random::uniform_int(std::int64_t low, std::int64_t high) {
  if (high <= low) return low;
  const auto span = static_cast<std::uint64_t>(high - low) + 1;
  return low + static_cast<std::int64_t>(next() % span);
}

float Random::uniform(float low, float high) {
  const float unit = static_cast<float>(next() >> 40) * 0x1p-24f;
  return low + (high - low) * unit;
}

bool Random::chance(double probability) {
  return static_cast<double>(next() >> 11) * 0x1p-53 < probability;
}

// --- Tensors -------------------------------------------------------------------------------------

HostTensor make_tensor(DType dtype, std::span<const std::int64_t> shape,
                       std::span<const std::int64_t> strides, std::int64_t guard_bytes) {
  HostTensor tensor;
  tensor.desc = strides.empty() ? TensorDesc::contiguous(dtype, shape)
                                : TensorDesc::strided(dtype, shape, strides);
  std::int64_t span = 1;
  for (int d = 0; d < tensor.desc.ndim; ++d) {
    if (tensor.desc.size(d) == 0) span = 0;
  }
  if (span != 0) {
    for (int d = 0; d < tensor.desc.ndim; ++d) {
      span += (tensor.desc.size(d) - 1) * tensor.desc.stride(d);
    }
  }
  tensor.offset_bytes = guard_bytes;
  const std::int64_t bytes = 2 * guard_bytes + span * dtype_size_bytes(dtype);
  tensor.bytes.assign(static_cast<std::size_t>(bytes), kSentinel);
  return tensor;
}

HostTensor make_tensor(DType dtype, std::initializer_list<std::int64_t> shape,
                       std::initializer_list<std::int64_t> strides, std::int64_t guard_bytes) {
  return make_tensor(dtype, std::span<const std::int64_t>(shape.begin(), shape.size()),
                     std::span<const std::int64_t>(strides.begin(), strides.size()), guard_bytes);
}

namespace {

template <class T>
HostTensor vector_tensor(DType dtype, std::span<const T> values) {
  HostTensor tensor = make_tensor(dtype, {static_cast<std::int64_t>(values.size())});
  if (!values.empty()) std::memcpy(tensor.data(), values.data(), values.size_bytes());
  return tensor;
}

}  // namespace

HostTensor tensor_of(std::span<const std::int32_t> values) {
  return vector_tensor(DType::i32, values);
}
HostTensor tensor_of(std::span<const std::int64_t> values) {
  return vector_tensor(DType::i64, values);
}
HostTensor tensor_of(std::span<const float> values) { return vector_tensor(DType::f32, values); }

// --- Byte comparison -------------------------------------------------------------------------

std::string hex(std::uint64_t value, int digits) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string text(static_cast<std::size_t>(digits), '0');
  for (int i = digits - 1; i >= 0; --i, value >>= 4) {
    text[static_cast<std::size_t>(i)] = kDigits[value & 0xF];
  }
  return "0x" + text;
}

std::string compare_bytes(std::span<const std::uint8_t> expected,
                          std::span<const std::uint8_t> actual, const ByteLocator& locate,
                          int max_listed) {
  if (expected.size() != actual.size()) {
    return "sizes differ: expected " + std::to_string(expected.size()) + " bytes, actual " +
           std::to_string(actual.size());
  }
  std::int64_t differing = 0;
  int listed_count = 0;
  std::string listed;
  std::string previous_where;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    if (expected[i] == actual[i]) continue;
    ++differing;
    if (listed_count >= max_listed) continue;
    const auto offset = static_cast<std::int64_t>(i);
    const std::string where = locate ? locate(offset) : std::string{};
    if (!where.empty() && where == previous_where) continue;
    previous_where = where;
    ++listed_count;
    listed += "\n  byte " + std::to_string(offset) + ": expected " + hex(expected[i]) +
              ", actual " + hex(actual[i]);
    if (!where.empty()) listed += "; " + where;
  }
  if (differing == 0) return {};
  return std::to_string(differing) + " of " + std::to_string(expected.size()) +
         " bytes differ; the first:" + listed;
}

namespace {

// "0x3e00 = 0.125" for one element of a dtype.
std::string element_value(DType dtype, const std::uint8_t* bytes) {
  switch (dtype) {
    case DType::bf16: {
      std::uint16_t bits;
      std::memcpy(&bits, bytes, sizeof bits);
      char text[64];
      std::snprintf(text, sizeof text, "%.6g",
                    static_cast<double>(zerojit::reference::bf16_to_float(bits)));
      return hex(bits, 4) + " = " + text;
    }
    case DType::f32: {
      float value;
      std::uint32_t bits;
      std::memcpy(&value, bytes, sizeof value);
      std::memcpy(&bits, bytes, sizeof bits);
      char text[64];
      std::snprintf(text, sizeof text, "%.9g", static_cast<double>(value));
      return hex(bits, 8) + " = " + text;
    }
    case DType::e4m3: {
      char text[64];
      std::snprintf(text, sizeof text, "%.6g",
                    static_cast<double>(zerojit::reference::e4m3_to_float(bytes[0])));
      return hex(bytes[0]) + " = " + text;
    }
    case DType::i32: {
      std::int32_t value;
      std::memcpy(&value, bytes, sizeof value);
      return std::to_string(value);
    }
    case DType::i64: {
      std::int64_t value;
      std::memcpy(&value, bytes, sizeof value);
      return std::to_string(value);
    }
    default:
      return hex(bytes[0]);
  }
}

}  // namespace

ByteLocator element_locator(const HostTensor& tensor, std::vector<std::string> names,
                            std::span<const std::uint8_t> expected,
                            std::span<const std::uint8_t> actual) {
  const TensorDesc desc = tensor.desc;
  const std::int64_t origin = tensor.offset_bytes;
  return [desc, origin, names = std::move(names), expected,
          actual](std::int64_t offset) -> std::string {
    const std::int64_t element_size = dtype_size_bytes(desc.dtype);
    const std::int64_t relative = offset - origin;
    if (relative < 0) return "guard before the tensor";
    std::int64_t index = relative / element_size;
    std::vector<int> order(static_cast<std::size_t>(desc.ndim));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&desc](int a, int b) { return desc.stride(a) > desc.stride(b); });
    std::vector<std::int64_t> coordinates(static_cast<std::size_t>(desc.ndim), 0);
    for (int d : order) {
      const std::int64_t stride = std::max<std::int64_t>(desc.stride(d), 1);
      const std::int64_t coordinate = index / stride;
      if (coordinate >= desc.size(d)) return "guard or padding past the tensor";
      coordinates[static_cast<std::size_t>(d)] = coordinate;
      index -= coordinate * stride;
    }
    if (index != 0) return "padding between elements";
    std::string text = "element [";
    for (int d = 0; d < desc.ndim; ++d) {
      if (d > 0) text += ", ";
      if (static_cast<std::size_t>(d) < names.size()) {
        text += names[static_cast<std::size_t>(d)] + " ";
      }
      text += std::to_string(coordinates[static_cast<std::size_t>(d)]);
    }
    text += "]";
    const std::int64_t start = offset - relative % element_size;
    if (!expected.empty() && !actual.empty() &&
        start + element_size <= static_cast<std::int64_t>(expected.size()) &&
        start + element_size <= static_cast<std::int64_t>(actual.size())) {
      text += ": expected " + element_value(desc.dtype, expected.data() + start) + ", actual " +
              element_value(desc.dtype, actual.data() + start);
    }
    return text;
  };
}

std::vector<std::uint8_t> splice(const std::vector<std::uint8_t>& expected,
                                 const std::vector<std::uint8_t>& actual, std::int64_t begin,
                                 std::int64_t end) {
  std::vector<std::uint8_t> result = actual;
  const auto size = static_cast<std::int64_t>(std::min(expected.size(), actual.size()));
  for (std::int64_t i = std::max<std::int64_t>(begin, 0); i < std::min(end, size); ++i) {
    result[static_cast<std::size_t>(i)] = expected[static_cast<std::size_t>(i)];
  }
  return result;
}

// --- Values ----------------------------------------------------------------------------------

std::uint16_t bf16_bits(float value) { return zerojit::reference::float_to_bf16_rn(value); }

HostTensor random_cos_sin(Random& random, std::int64_t max_position, int rope_dim,
                          std::int64_t row_stride, DType dtype) {
  HostTensor table = make_tensor(dtype, {max_position, rope_dim}, {row_stride, 1});
  const int half = rope_dim / 2;
  for (std::int64_t p = 0; p < max_position; ++p) {
    for (int j = 0; j < half; ++j) {
      const float angle = random.uniform(-3.14159265f, 3.14159265f);
      const float c = std::cos(angle);
      const float s = std::sin(angle);
      const std::int64_t row = p * row_stride;
      if (dtype == DType::bf16) {
        table.set<std::uint16_t>(row + j, bf16_bits(c));
        table.set<std::uint16_t>(row + half + j, bf16_bits(s));
      } else {
        table.set<float>(row + j, c);
        table.set<float>(row + half + j, s);
      }
    }
  }
  return table;
}

// --- Indexer-Q ---------------------------------------------------------------------------------

namespace {

// A BF16-exact value of the E2M1 grid times 2^exponent; ties of the E2M1 rounding (0.25, 0.75,
// 1.25, 1.75, 2.5, 3.5, 5) are among them.
float e2m1_grid_value(Random& random, int exponent) {
  static constexpr float kGrid[] = {0.0f, 0.25f, 0.5f, 0.75f, 1.0f, 1.25f, 1.5f, 1.75f,
                                    2.0f, 2.5f,  3.0f, 3.5f,  4.0f, 5.0f,  6.0f};
  const float magnitude = kGrid[random.uniform_int(0, std::size(kGrid) - 1)];
  const float value = std::ldexp(magnitude, exponent);
  return random.chance(0.5) ? -value : value;
}

void fill_indexer_row(Random& random, std::uint16_t* row, int head_dim) {
  const std::int64_t kind = random.uniform_int(0, 99);
  auto put = [&](int d, float value) { row[d] = bf16_bits(value); };
  if (kind < 55) {  // random values over a wide range of magnitudes
    const float magnitude = std::ldexp(1.0f, static_cast<int>(random.uniform_int(-14, 8)));
    for (int d = 0; d < head_dim; ++d) put(d, random.uniform(-1.0f, 1.0f) * magnitude);
  } else if (kind < 70) {  // E2M1 grid: every 32-block reaches exactly 6 * 2^k
    for (int block = 0; block < head_dim / 32; ++block) {
      const int exponent = static_cast<int>(random.uniform_int(-10, 4));
      for (int d = 0; d < 32; ++d) put(block * 32 + d, e2m1_grid_value(random, exponent));
      const int at = block * 32 + static_cast<int>(random.uniform_int(0, 31));
      put(at, std::ldexp(random.chance(0.5) ? 6.0f : -6.0f, exponent));
    }
  } else if (kind < 80) {  // FP8: the row's amax is exactly 448 * 2^k
    const int exponent = static_cast<int>(random.uniform_int(-20, -2));
    const float top = std::ldexp(448.0f, exponent);
    // RoPE can grow a pair by sqrt(2): keep the others below top / 2 so `top` stays the amax.
    for (int d = 0; d < head_dim; ++d) put(d, random.uniform(-0.5f, 0.5f) * top);
    put(static_cast<int>(random.uniform_int(0, head_dim - 1)), random.chance(0.5) ? top : -top);
  } else if (kind < 85) {  // zeros, some negative
    for (int d = 0; d < head_dim; ++d) {
      row[d] = random.chance(0.5) ? std::uint16_t{0x8000} : std::uint16_t{0};
    }
  } else if (kind < 92) {  // one large value among tiny ones: most codes underflow
    const int exponent = static_cast<int>(random.uniform_int(-4, 6));
    const float tiny = std::ldexp(1.0f, exponent - 24);
    for (int d = 0; d < head_dim; ++d) put(d, random.uniform(-1.0f, 1.0f) * tiny);
    put(static_cast<int>(random.uniform_int(0, head_dim - 1)),
        std::ldexp(random.uniform(1.0f, 2.0f), exponent));
  } else {  // amax below the FP8 clamp (1e-4)
    for (int d = 0; d < head_dim; ++d) put(d, random.uniform(-1.0f, 1.0f) * 0x1p-22f);
  }
}

}  // namespace

IndexerQInputsHost make_indexer_q_inputs(Random& random, std::int64_t tokens, int num_heads,
                                         int head_dim, int rope_dim, DType cos_sin_dtype,
                                         std::int64_t cos_sin_row_stride,
                                         std::int64_t max_position) {
  IndexerQInputsHost inputs;
  inputs.positions = make_tensor(DType::i64, {tokens});
  for (std::int64_t t = 0; t < tokens; ++t) {
    inputs.positions.set<std::int64_t>(t, random.uniform_int(0, max_position - 1));
  }
  inputs.q = make_tensor(DType::bf16, {tokens, num_heads, head_dim});
  // Rows in chunks, each from its own generator seeded in order: as deterministic as one
  // sequence, and the chunks fill in parallel (a 16k-token q is 134M elements).
  constexpr std::int64_t kRowsPerChunk = 4096;
  const std::int64_t rows = tokens * num_heads;
  const std::int64_t chunks = (rows + kRowsPerChunk - 1) / kRowsPerChunk;
  std::vector<std::uint64_t> seeds(static_cast<std::size_t>(chunks));
  for (auto& seed : seeds) seed = random.next();
  std::uint16_t* q = inputs.q.as<std::uint16_t>();
  parallel_for(static_cast<std::size_t>(chunks), 0, [&](std::size_t chunk) {
    Random chunk_random(seeds[chunk]);
    std::vector<std::uint16_t> row(static_cast<std::size_t>(head_dim));
    const std::int64_t first = static_cast<std::int64_t>(chunk) * kRowsPerChunk;
    for (std::int64_t r = first; r < std::min(rows, first + kRowsPerChunk); ++r) {
      fill_indexer_row(chunk_random, row.data(), head_dim);
      std::memcpy(q + r * head_dim, row.data(), row.size() * sizeof(std::uint16_t));
    }
  });
  inputs.cos_sin_cache =
      random_cos_sin(random, max_position, rope_dim, cos_sin_row_stride, cos_sin_dtype);
  inputs.weights = make_tensor(DType::bf16, {tokens, num_heads});
  for (std::int64_t i = 0; i < tokens * num_heads; ++i) {
    inputs.weights.set<std::uint16_t>(i, bf16_bits(random.uniform(-2.0f, 2.0f)));
  }
  inputs.scale = static_cast<float>(std::pow(128.0, -0.5) * std::pow(64.0, -0.5));
  return inputs;
}

// --- fp8_ds_mla cache --------------------------------------------------------------------------

std::int64_t default_page_stride(std::int64_t block_size) {
  return (block_size * 584 + 575) / 576 * 576;
}

HostTensor make_ds_mla_cache(std::int64_t num_pages, std::int64_t block_size,
                             std::int64_t page_stride) {
  HostTensor cache = make_tensor(DType::u8, {num_pages, block_size, 584}, {page_stride, 584, 1}, 0);
  // The allocation holds whole pages, the last one's tail included.
  cache.bytes.assign(static_cast<std::size_t>(num_pages * page_stride), kSentinel);
  return cache;
}

void fill_ds_mla_cache(Random& random, HostTensor& cache, int exponent_low, int exponent_high) {
  const std::int64_t pages = cache.desc.size(0);
  const std::int64_t rows = cache.desc.size(1);
  const std::int64_t stride = cache.desc.stride(0);
  for (std::int64_t page = 0; page < pages; ++page) {
    std::uint8_t* base = cache.base() + page * stride;
    for (std::int64_t byte = 0; byte < stride; byte += 8) {
      const std::uint64_t bits = random.next();
      std::memcpy(base + byte, &bits,
                  static_cast<std::size_t>(std::min<std::int64_t>(8, stride - byte)));
    }
    for (std::int64_t r = 0; r < rows; ++r) {
      std::uint8_t* data = base + r * 576;
      for (int d = 0; d < 448; ++d) {
        if ((data[d] & 0x7F) == 0x7F) data[d] ^= 1;  // NaN codes -> +-448
      }
      std::uint8_t* scales = base + rows * 576 + r * 8;
      for (int k = 0; k < 7; ++k) {
        scales[k] = static_cast<std::uint8_t>(random.uniform_int(exponent_low, exponent_high));
      }
      scales[7] = 0;
    }
  }
}

// --- Block tables --------------------------------------------------------------------------

HostTensor permuted_block_table(Random& random, std::int64_t width,
                                std::span<const std::int64_t> first_column,
                                std::span<const std::int64_t> last_column, std::int64_t num_pages) {
  const auto rows = static_cast<std::int64_t>(first_column.size());
  HostTensor table = make_tensor(DType::i32, {rows, width});
  std::vector<std::int32_t> pages(static_cast<std::size_t>(num_pages));
  std::iota(pages.begin(), pages.end(), 0);
  random.shuffle(pages);
  std::size_t next = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < width; ++c) {
      const bool used = c >= first_column[static_cast<std::size_t>(r)] &&
                        c <= last_column[static_cast<std::size_t>(r)];
      if (used && next >= pages.size()) {
        throw std::invalid_argument("permuted_block_table: " + std::to_string(num_pages) +
                                    " pages do not cover the columns used");
      }
      table.set<std::int32_t>(r * width + c, used ? pages[next++] : -1);
    }
  }
  return table;
}

// --- Compressor batches ----------------------------------------------------------------------

CompressorTokens make_compressor_tokens(Random& random, std::span<const RequestChunk> requests,
                                        int ratio, std::int64_t kv_slots, double drop) {
  CompressorTokens tokens;
  std::vector<std::int64_t> free_slots(static_cast<std::size_t>(kv_slots));
  std::iota(free_slots.begin(), free_slots.end(), 0);
  random.shuffle(free_slots);
  std::size_t next_slot = 0;
  std::int64_t token_index = 0;
  for (std::size_t r = 0; r < requests.size(); ++r) {
    for (std::int64_t i = 0; i < requests[r].tokens; ++i, ++token_index) {
      const std::int64_t position = requests[r].first_position + i;
      tokens.token_to_req.push_back(static_cast<std::int32_t>(r));
      tokens.positions.push_back(position);
      std::int64_t slot = token_index;  // any non-negative state slot
      std::int64_t kv_slot = -1;
      if ((position + 1) % ratio == 0) {
        if (next_slot >= free_slots.size()) {
          throw std::invalid_argument("make_compressor_tokens: " + std::to_string(kv_slots) +
                                      " kv slots are too few for the boundary tokens");
        }
        kv_slot = free_slots[next_slot++];
        if (random.chance(drop / 2)) {
          slot = -1;
        } else if (random.chance(drop / 2)) {
          kv_slot = -1;
        } else {
          ++tokens.active_boundaries;
        }
      } else {
        kv_slot = random.chance(0.5) ? random.uniform_int(0, kv_slots - 1) : -1;
        if (random.chance(drop)) slot = -1;
      }
      tokens.slot_mapping.push_back(slot);
      tokens.kv_slot_mapping.push_back(kv_slot);
    }
  }
  return tokens;
}

CompressorState make_compressor_state(Random& random, std::span<const RequestChunk> requests,
                                      std::int64_t state_block_size, std::int64_t state_width,
                                      std::int64_t pooled_rows, std::int64_t row_padding,
                                      std::int64_t block_padding, std::int64_t extra_blocks) {
  std::vector<std::int64_t> first_column, last_column;
  std::int64_t width = 1;
  std::int64_t used = 0;
  for (const RequestChunk& request : requests) {
    const std::int64_t first = std::max<std::int64_t>(0, request.first_position - pooled_rows + 1);
    const std::int64_t last = request.first_position + request.tokens - 1;
    first_column.push_back(first / state_block_size);
    last_column.push_back(request.tokens > 0 ? last / state_block_size : -1);
    if (request.tokens > 0) used += last_column.back() - first_column.back() + 1;
    width = std::max(width, last_column.back() + 3);  // a few unused (-1) columns past the end
  }
  CompressorState result;
  const std::int64_t num_blocks = used + extra_blocks;
  result.block_table = permuted_block_table(random, width, first_column, last_column, num_blocks);
  const std::int64_t row_length = 2 * state_width;
  const std::int64_t row_stride = row_length + row_padding;
  const std::int64_t block_stride = state_block_size * row_stride + block_padding;
  result.state = make_tensor(DType::f32, {num_blocks, state_block_size, row_length},
                             {block_stride, row_stride, 1});
  float* state = result.state.as<float>();
  for (std::int64_t block = 0; block < num_blocks; ++block) {
    for (std::int64_t row = 0; row < state_block_size; ++row) {
      float* values = state + block * block_stride + row * row_stride;
      for (std::int64_t e = 0; e < state_width; ++e) values[e] = random.uniform(-2.0f, 2.0f);
      for (std::int64_t e = state_width; e < row_length; ++e) {
        values[e] = random.uniform(-4.0f, 4.0f);
      }
    }
  }
  return result;
}

HostTensor random_norm_weight(Random& random, DType dtype, std::int64_t length) {
  HostTensor weight = make_tensor(dtype, {length});
  for (std::int64_t e = 0; e < length; ++e) {
    const float value = random.uniform(0.5f, 1.5f);
    if (dtype == DType::bf16) {
      weight.set<std::uint16_t>(e, bf16_bits(value));
    } else {
      weight.set<float>(e, value);
    }
  }
  return weight;
}

// --- DCP -------------------------------------------------------------------------------------

float random_logit(Random& random, double negative_infinity_rate, double nan_rate) {
  if (random.chance(negative_infinity_rate)) return -INFINITY;
  if (random.chance(nan_rate)) {
    const std::uint32_t sign = random.chance(0.5) ? 0x80000000u : 0u;
    const auto payload = static_cast<std::uint32_t>(random.uniform_int(1, 0x3FFFFF));
    const std::uint32_t bits = sign | 0x7FC00000u | payload;
    float value;
    std::memcpy(&value, &bits, sizeof value);
    return value;
  }
  return static_cast<float>(random.uniform_int(-16, 16)) * 0.25f;
}

std::int64_t count_tokens(const std::vector<RequestChunk>& requests) {
  std::int64_t tokens = 0;
  for (const RequestChunk& r : requests) tokens += r.tokens;
  return tokens;
}

std::int64_t count_boundaries(const std::vector<RequestChunk>& requests, int ratio) {
  std::int64_t count = 0;
  for (const RequestChunk& r : requests) {
    for (std::int64_t p = r.first_position; p < r.first_position + r.tokens; ++p) {
      count += (p + 1) % ratio == 0 ? 1 : 0;
    }
  }
  return count;
}

}  // namespace zerojit::dsv4::testing
