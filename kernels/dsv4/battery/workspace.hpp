// What the serving battery's files share, and nothing outside the battery uses: the workspace
// state (the model's caches and the step buffers, allocated once), its constants and the host
// data helpers.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "dsv4/battery/battery.hpp"

namespace zerojit::dsv4::battery_internal {

inline constexpr int kC4StateBlockSize = 4;
inline constexpr int kC128StateBlockSize = 8;
// The widest logits row of a prefill DCP pack call (the columns of all chunks together); it
// bounds the buffer only, the key does not depend on it.
inline constexpr std::int64_t kMaxPrefillLogitColumns = 4096;
inline constexpr std::int64_t kDsMlaRow = kDsMlaRowBytes;  // 584
inline constexpr std::int64_t kHead = 512;

inline std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }
inline std::int64_t round_up(std::int64_t a, std::int64_t b) { return ceil_div(a, b) * b; }

// Boundary tokens (those that write a compressed row) among positions [begin, end).
inline std::int64_t boundaries(std::int64_t begin, std::int64_t end, std::int64_t ratio) {
  return end / ratio - begin / ratio;
}

// splitmix64: fast, and plenty for filling buffers with noise.
class Noise {
 public:
  explicit Noise(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  // Uniform in [low, high).
  float uniform(float low, float high) {
    const float unit = static_cast<float>(next() >> 40) * 0x1.0p-24f;
    return low + (high - low) * unit;
  }

 private:
  std::uint64_t state_;
};

// An E4M3 byte that is not NaN.
unsigned char e4m3_byte(Noise& noise);
std::uint16_t bf16_bits(float value);

// Fills `bytes` of a buffer by repeating `pattern` (whose size divides the stride of
// whatever structure it holds), so large caches are filled without a host copy of each.
void fill_tiled(BatteryMemory& memory, void* destination, std::size_t bytes,
                const std::vector<unsigned char>& pattern);
// Enough whole units of `unit_bytes` for a few MiB of pattern.
std::size_t pattern_units(std::size_t unit_bytes, std::int64_t units);
// fp8_ds_mla pages (spec 0.4): E4M3 nope bytes, BF16 rope values, sane UE8M0 scales, zero pad.
std::vector<unsigned char> ds_mla_pages(Noise& noise, std::int64_t rows, std::int64_t stride,
                                        std::size_t pages);
// Values uniform in [low, high) as f32, bf16 or (random non-NaN) e4m3 bytes.
std::vector<unsigned char> float_pattern(Noise& noise, DType dtype, std::size_t elements, float low,
                                         float high);

template <class T>
void upload_vector(BatteryMemory& memory, void* destination, const std::vector<T>& values) {
  if (!values.empty()) memory.upload(destination, values.data(), values.size() * sizeof(T));
}

}  // namespace zerojit::dsv4::battery_internal

namespace zerojit::dsv4 {

using namespace battery_internal;

struct BatteryWorkspace::State {
  struct Layer {
    LayerKind kind = LayerKind::sliding_window;
    int index = 0;
    void* window_cache = nullptr;       // u8 [kv_pool, block_size, 584]
    void* compressed_ds_mla = nullptr;  // u8 [kv_pool, B_k, 584]
    void* compressed_full = nullptr;    // bf16 | e4m3 [kv_pool, B_k, 512]
    void* state_cache = nullptr;        // f32 [state_pool, Bs, 2 W]
    void* norm_weight = nullptr;        // model dtype [512]
  };

  const AttentionKernels* kernels = nullptr;
  Dsv4Config config;
  BatteryOptions options;
  BatteryMemory* memory = nullptr;
  Device device;
  Noise noise{1};

  // What runs (choose_calls; the runtime asks the same gates).
  bool indexer = false;
  bool c4 = false;
  bool c128 = false;
  bool gathers = false;
  bool dcp = false;
  bool full_cache = false;
  bool full_fp8 = false;
  DType norm_dtype = DType::bf16;
  std::vector<LayerKind> kinds;

  // Dimensions.
  std::int64_t max_tokens = 0;
  std::int64_t max_len = 0;
  int block_size = 0;
  int rows_c4 = 1;    // B_k of the C4 cache
  int rows_c128 = 1;  // B_k of the C128 cache
  std::int64_t stride_window = 0;
  std::int64_t stride_c4 = 0;
  std::int64_t stride_c128 = 0;
  std::int64_t kv_width = 1;
  std::int64_t kv_pool = 1;
  std::int64_t state_pool = 1;
  std::int64_t c4_state_width = 1;
  std::int64_t c128_state_width = 1;
  int heads = 0;
  int head_dim = 0;
  int rope_dim = 0;
  int topk = 0;
  std::int64_t gather_rows = 0;
  std::int64_t logit_capacity = 0;

  // Shared buffers.
  void* positions = nullptr;
  void* token_to_req = nullptr;
  void* kv_table = nullptr;
  void* state_table_c4 = nullptr;
  void* state_table_c128 = nullptr;
  void* state_slots_c4 = nullptr;
  void* state_slots_c128 = nullptr;
  void* kv_slots_c4 = nullptr;
  void* kv_slots_c128 = nullptr;
  void* seq_lens = nullptr;
  void* lens_c4 = nullptr;
  void* lens_c128 = nullptr;
  void* gather_lens = nullptr;
  void* gather_out = nullptr;
  void* cos_sin = nullptr;
  void* q = nullptr;
  void* weights = nullptr;
  void* q_out = nullptr;    // q_fp8 or q_packed
  void* q_scale = nullptr;  // MXFP4 only
  void* weights_out = nullptr;
  void* compressed_kv = nullptr;
  void* fp8_scale = nullptr;
  void* logits = nullptr;
  void* topk_decode = nullptr;
  void* topk_prefill = nullptr;
  void* row_starts = nullptr;
  void* packed = nullptr;
  std::vector<Layer> layers;

  // Host copies of the static tables, for computing slots.
  std::vector<std::int32_t> kv_table_host;
  std::vector<std::int32_t> state_c4_host;
  std::vector<std::int32_t> state_c128_host;

  void* allocate(std::size_t bytes) { return memory->allocate(bytes); }

  TensorRef ref(void* data, DType dtype, std::initializer_list<std::int64_t> shape) const {
    return make_tensor_ref(data, TensorDesc::contiguous(dtype, shape, device));
  }
  TensorRef strided(void* data, DType dtype, std::initializer_list<std::int64_t> shape,
                    std::initializer_list<std::int64_t> strides) const {
    const std::vector<std::int64_t> s(shape), st(strides);
    return make_tensor_ref(data, TensorDesc::strided(dtype, s, st, device));
  }

  // setup: the geometry of the caches and tables, the step buffers, the layers' caches, then
  // the static tables (in that order: the allocations' order fixes their addresses).
  void setup();
  void size_geometry();
  void allocate_step_buffers();
  void allocate_layers();
  void make_static_tables();
  void fill_static();
  std::vector<AttentionCall> calls(const ServingStep& step);

  // calls.cpp: which calls the configuration makes (the flags above), one step's shared values
  // and its metadata upload, and the builders of the calls (CallBuilders, private to that file).
  void choose_calls();
  struct StepPlan;
  struct CallBuilders;
  StepPlan plan_step(const ServingStep& step) const;
  void upload_step(const ServingStep& step, const StepPlan& sp);
};

}  // namespace zerojit::dsv4
