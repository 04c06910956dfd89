// Random inputs for the DSv4 kernels, built on the host: the GPU tests upload them, run a kernel
// and compare with the CPU reference run on a copy; the kernel benchmarks time the kernels on
// them (library zerojit_dsv4_test_inputs, linked by both). call_inputs.hpp builds the whole
// inputs of one call from these pieces.
//
// Everything a builder makes is a HostTensor: a tensor's bytes inside a larger allocation whose
// unused bytes (guard regions, row padding, unused pages) hold a sentinel. A kernel and its
// reference start from identical allocations, so comparing whole allocations byte for byte
// checks both the values written and that nothing else was touched.
//
// The inputs follow spec section 10: random BF16 / FP32 values, cos/sin from random angles,
// permuted block tables, slots set to -1 here and there, positions that straddle the compress
// ratio boundaries (C4 positions below 7 included, so rows with pos < 0 occur).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <span>
#include <string>
#include <vector>

#include "zerojit/tensor.hpp"

namespace zerojit::dsv4::testing {

// The byte unused memory holds: vLLM's cache sentinel (165).
inline constexpr std::uint8_t kSentinel = 0xA5;
// Guard bytes before and after a tensor that is not a paged cache. A multiple of 256 keeps the
// tensor as aligned as the allocation.
inline constexpr std::int64_t kGuardBytes = 256;

// A small, fast, seedable generator (splitmix64): the inputs of a case are a function of its
// seed, so a failure reproduces.
class Random {
 public:
  explicit Random(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next();
  // Uniform in [low, high] (inclusive).
  std::int64_t uniform_int(std::int64_t low, std::int64_t high);
  // Uniform in [low, high).
  float uniform(float low, float high);
  bool chance(double probability);
  template <class T>
  void shuffle(std::vector<T>& values) {
    for (std::size_t i = values.size(); i > 1; --i) {
      const auto j = static_cast<std::size_t>(uniform_int(0, static_cast<std::int64_t>(i) - 1));
      std::swap(values[i - 1], values[j]);
    }
  }

 private:
  std::uint64_t state_;
};

// A tensor inside a sentinel-filled allocation.
struct HostTensor {
  TensorDesc desc;                  // dtype, shape, strides (elements); device cuda:0
  std::int64_t offset_bytes = 0;    // where element 0 sits in `bytes`
  std::vector<std::uint8_t> bytes;  // the whole allocation

  std::uint8_t* base() { return bytes.data(); }
  const std::uint8_t* base() const { return bytes.data(); }
  void* data() { return bytes.data() + offset_bytes; }
  const void* data() const { return bytes.data() + offset_bytes; }
  template <class T>
  T* as() {
    return static_cast<T*>(data());
  }
  template <class T>
  const T* as() const {
    return static_cast<const T*>(data());
  }
  // Element `index` (in elements from element 0, strides applied by the caller).
  template <class T>
  void set(std::int64_t index, T value) {
    std::memcpy(bytes.data() + offset_bytes + index * static_cast<std::int64_t>(sizeof(T)), &value,
                sizeof(T));
  }
  template <class T>
  T get(std::int64_t index) const {
    T value;
    std::memcpy(&value, bytes.data() + offset_bytes + index * static_cast<std::int64_t>(sizeof(T)),
                sizeof(T));
    return value;
  }
};

// A tensor of the given shape and element strides (row-major when `strides` is empty), with
// `guard_bytes` of sentinel before and after it.
HostTensor make_tensor(DType dtype, std::initializer_list<std::int64_t> shape,
                       std::initializer_list<std::int64_t> strides = {},
                       std::int64_t guard_bytes = kGuardBytes);
HostTensor make_tensor(DType dtype, std::span<const std::int64_t> shape,
                       std::span<const std::int64_t> strides, std::int64_t guard_bytes);

// 1-D tensors holding the given values (contiguous, with guards).
HostTensor tensor_of(std::span<const std::int32_t> values);
HostTensor tensor_of(std::span<const std::int64_t> values);
HostTensor tensor_of(std::span<const float> values);

// --- Byte comparison -----------------------------------------------------------------------

// Describes where a byte offset of an allocation lies ("token 3, head 7, dim 12"); empty
// when the offset is outside the tensor.
using ByteLocator = std::function<std::string(std::int64_t offset)>;

// Empty when `expected` and `actual` are identical; else the count of differing bytes and the
// first `max_listed` of them: offset, location (from `locate`), expected and actual byte. Bytes
// of one element (one location) are listed once.
std::string compare_bytes(std::span<const std::uint8_t> expected,
                          std::span<const std::uint8_t> actual, const ByteLocator& locate,
                          int max_listed = 8);

// A locator for a tensor's elements: "[token 3, head 7, dim 12]" for offsets inside it (`names`
// names the dims), "guard or padding ..." otherwise. Given both allocations (which must outlive
// the locator), it adds the element's expected and actual values ("0x3e00 = 0.125" for bf16).
ByteLocator element_locator(const HostTensor& tensor, std::vector<std::string> names = {},
                            std::span<const std::uint8_t> expected = {},
                            std::span<const std::uint8_t> actual = {});

// `actual` with its bytes [begin, end) taken from `expected`: comparing the result with
// `expected` checks only what lies outside [begin, end) (guards, other rows).
std::vector<std::uint8_t> splice(const std::vector<std::uint8_t>& expected,
                                 const std::vector<std::uint8_t>& actual, std::int64_t begin,
                                 std::int64_t end);

std::string hex(std::uint64_t value, int digits = 2);

// --- Values ----------------------------------------------------------------------------------

// cos/sin rows [max_position, rope_dim] (row stride `row_stride` elements): columns [0, R/2)
// cos a_j, [R/2, R) sin a_j for random angles a_j per row, as vLLM's tests build them.
HostTensor random_cos_sin(Random& random, std::int64_t max_position, int rope_dim,
                          std::int64_t row_stride, DType dtype);

std::uint16_t bf16_bits(float value);  // round to nearest even

// --- Indexer-Q (spec section 1) ----------------------------------------------------------------

struct IndexerQInputsHost {
  HostTensor positions;      // i64 [T]
  HostTensor q;              // bf16 [T, H, D]
  HostTensor cos_sin_cache;  // f32 | bf16 [max_pos, R]
  HostTensor weights;        // bf16 [T, H]
  float scale = 0.0f;        // 128^-0.5 * 64^-0.5 rounded to f32 once
};

// Rows of several kinds: random normals over a wide range of magnitudes; values on a power-of-
// two grid whose 32-element blocks reach exactly 6 * 2^k (so MXFP4 sees exact E2M1 ties and an
// unsaturated maximum) or whose rows reach exactly 448 * 2^k (FP8); all-zero rows with
// negative zeros; one large value among tiny ones (codes underflow to zero).
IndexerQInputsHost make_indexer_q_inputs(Random& random, std::int64_t tokens, int num_heads,
                                         int head_dim, int rope_dim, DType cos_sin_dtype,
                                         std::int64_t cos_sin_row_stride,
                                         std::int64_t max_position);

// --- fp8_ds_mla paged cache (spec section 0.4) ---------------------------------------------

// round_up(B * 584, 576).
std::int64_t default_page_stride(std::int64_t block_size);

// [num_pages, B, 584] u8 with page stride `page_stride` bytes (no guards: the pages past the
// used ones and the bytes past B * 584 of each page are the untouched memory).
HostTensor make_ds_mla_cache(std::int64_t num_pages, std::int64_t block_size,
                             std::int64_t page_stride);

// Fills every row of every page with valid fp8_ds_mla contents: e4m3 codes (never NaN), random
// BF16 tail bytes, UE8M0 exponents in [exponent_low, exponent_high] (realistic caches hold
// 105..140), pad byte 0. The bytes past B * 584 of a page get random bytes too: they are never
// read, so they must never matter.
void fill_ds_mla_cache(Random& random, HostTensor& cache, int exponent_low = 100,
                       int exponent_high = 140);

// --- Block tables ----------------------------------------------------------------------------

// A block table [rows, width] of distinct page ids in random order. Row r uses columns
// [first_column[r], last_column[r]] (inclusive; last < first means none); every other entry is
// -1. Pages come from [0, num_pages) (num_pages must cover the columns used).
HostTensor permuted_block_table(Random& random, std::int64_t width,
                                std::span<const std::int64_t> first_column,
                                std::span<const std::int64_t> last_column, std::int64_t num_pages);

// --- Compressor batches (spec sections 0.5, 3-7) --------------------------------------------

// One request's tokens in a batch: positions [first_position, first_position + tokens).
struct RequestChunk {
  std::int64_t first_position = 0;
  std::int64_t tokens = 0;
};

// How many positions of the chunks are compress boundaries ((p + 1) % ratio == 0).
std::int64_t count_boundaries(const std::vector<RequestChunk>& requests, int ratio);

// The tokens of all chunks together.
std::int64_t count_tokens(const std::vector<RequestChunk>& requests);

// The per-token metadata of a compressor call.
struct CompressorTokens {
  std::vector<std::int32_t> token_to_req;
  std::vector<std::int64_t> positions;
  std::vector<std::int64_t> slot_mapping;     // state slots; some -1
  std::vector<std::int64_t> kv_slot_mapping;  // compressed-cache slots (see below)
  std::int64_t active_boundaries = 0;         // boundary tokens left with both slots valid
};

// Tokens of the requests in order. Boundary tokens ((p + 1) % ratio == 0) get distinct kv slots
// drawn from [0, kv_slots); a fraction `drop` of the boundary tokens loses its state slot or its
// kv slot (-1) and so writes nothing. Other tokens get random kv slots that may equal an active
// token's: an inactive token that wrote anyway would show.
CompressorTokens make_compressor_tokens(Random& random, std::span<const RequestChunk> requests,
                                        int ratio, std::int64_t kv_slots, double drop = 0.03);

// The compressor state: [num_blocks, Bs, 2 * width] f32 (row stride and block stride in
// elements; both multiples of 16) holding kv in [-2, 2) and scores in [-4, 4), and a permuted
// block table covering, for each request, the state rows its boundary tokens pool
// (first_position - pooled_rows + 1 .. last position; negative positions excluded).
struct CompressorState {
  HostTensor state;        // f32
  HostTensor block_table;  // i32 [requests, width]
};
CompressorState make_compressor_state(Random& random, std::span<const RequestChunk> requests,
                                      std::int64_t state_block_size, std::int64_t state_width,
                                      std::int64_t pooled_rows, std::int64_t row_padding,
                                      std::int64_t block_padding, std::int64_t extra_blocks);

// A RMSNorm weight [512] of bf16 or f32 values in [0.5, 1.5).
HostTensor random_norm_weight(Random& random, DType dtype, std::int64_t length = 512);

// --- DCP (spec section 12) ---------------------------------------------------------------------

// Logits values drawn from a few levels (so ties are common), with -inf and NaN (both signs of
// NaN payload) at the given rates.
float random_logit(Random& random, double negative_infinity_rate, double nan_rate);

}  // namespace zerojit::dsv4::testing
