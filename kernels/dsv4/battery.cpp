#include "dsv4/battery.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <numeric>
#include <type_traits>

#include "zerojit/cuda.hpp"

namespace zerojit::dsv4 {
namespace {

constexpr std::int64_t kDefaultMaxModelLen = 65536;
constexpr std::int64_t kAddressAlignment = 256;
constexpr int kC4StateBlockSize = 4;
constexpr int kC128StateBlockSize = 8;
// The widest logits row of a prefill DCP pack call (the columns of all chunks together); it
// bounds the buffer only, the key does not depend on it.
constexpr std::int64_t kMaxPrefillLogitColumns = 4096;
constexpr std::int64_t kDsMlaRow = kDsMlaRowBytes;  // 584
constexpr std::int64_t kHead = 512;

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }
std::int64_t round_up(std::int64_t a, std::int64_t b) { return ceil_div(a, b) * b; }

// Boundary tokens (those that write a compressed row) among positions [begin, end).
std::int64_t boundaries(std::int64_t begin, std::int64_t end, std::int64_t ratio) {
  return end / ratio - begin / ratio;
}

// --- Host data ---------------------------------------------------------------------------------

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

std::uint16_t bf16_bits(float value) {
  std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  bits += 0x7FFFu + ((bits >> 16) & 1u);  // round to nearest even (finite inputs)
  return static_cast<std::uint16_t>(bits >> 16);
}

// An E4M3 byte that is not NaN.
unsigned char e4m3_byte(Noise& noise) {
  auto byte = static_cast<unsigned char>(noise.next());
  if ((byte & 0x7F) == 0x7F) byte ^= 0x01;
  return byte;
}

template <class T>
void put(std::vector<unsigned char>& bytes, std::size_t offset, T value) {
  std::memcpy(bytes.data() + offset, &value, sizeof(T));
}

// Fills `bytes` of a buffer by repeating `pattern` (whose size divides the stride of
// whatever structure it holds), so large caches are filled without a host copy of each.
void fill_tiled(BatteryMemory& memory, void* destination, std::size_t bytes,
                const std::vector<unsigned char>& pattern) {
  auto* out = static_cast<unsigned char*>(destination);
  for (std::size_t done = 0; done < bytes;) {
    const std::size_t chunk = std::min(pattern.size(), bytes - done);
    memory.upload(out + done, pattern.data(), chunk);
    done += chunk;
  }
}

// Enough whole units of `unit_bytes` for a few MiB of pattern.
std::size_t pattern_units(std::size_t unit_bytes, std::int64_t units) {
  const std::size_t wanted = std::max<std::size_t>(1, (std::size_t{4} << 20) / unit_bytes);
  return std::min<std::size_t>(wanted, static_cast<std::size_t>(std::max<std::int64_t>(1, units)));
}

// fp8_ds_mla pages (spec 0.4): E4M3 nope bytes, BF16 rope values, sane UE8M0 scales, zero pad.
std::vector<unsigned char> ds_mla_pages(Noise& noise, std::int64_t rows, std::int64_t stride,
                                        std::size_t pages) {
  std::vector<unsigned char> bytes(pages * static_cast<std::size_t>(stride), 0);
  for (std::size_t page = 0; page < pages; ++page) {
    const std::size_t base = page * static_cast<std::size_t>(stride);
    for (std::int64_t row = 0; row < rows; ++row) {
      const std::size_t data = base + static_cast<std::size_t>(row * 576);
      for (int i = 0; i < 448; ++i) bytes[data + static_cast<std::size_t>(i)] = e4m3_byte(noise);
      for (int j = 0; j < 64; ++j) {
        put(bytes, data + 448 + 2 * static_cast<std::size_t>(j), bf16_bits(noise.uniform(-2, 2)));
      }
      const std::size_t scales = base + static_cast<std::size_t>(rows * 576 + row * 8);
      for (int k = 0; k < 7; ++k) {
        bytes[scales + static_cast<std::size_t>(k)] =
            static_cast<unsigned char>(120 + noise.next() % 10);
      }
    }
  }
  return bytes;
}

std::vector<unsigned char> float_pattern(Noise& noise, DType dtype, std::size_t elements, float low,
                                         float high) {
  std::vector<unsigned char> bytes(elements * static_cast<std::size_t>(dtype_size_bytes(dtype)));
  for (std::size_t i = 0; i < elements; ++i) {
    const float value = noise.uniform(low, high);
    if (dtype == DType::f32) {
      put(bytes, 4 * i, value);
    } else if (dtype == DType::bf16) {
      put(bytes, 2 * i, bf16_bits(value));
    } else {  // e4m3
      bytes[i] = e4m3_byte(noise);
    }
  }
  return bytes;
}

template <class T>
void upload_vector(BatteryMemory& memory, void* destination, const std::vector<T>& values) {
  if (!values.empty()) memory.upload(destination, values.data(), values.size() * sizeof(T));
}

// --- Memories ----------------------------------------------------------------------------------

class VirtualMemory final : public BatteryMemory {
 public:
  explicit VirtualMemory(int device) : device_(device) {}
  Device device() const override { return Device::cuda(device_); }
  bool holds_data() const override { return false; }
  void* allocate(std::size_t bytes) override {
    // A plausible device address range; never dereferenced.
    const std::uint64_t address = next_;
    next_ += static_cast<std::uint64_t>(
        round_up(static_cast<std::int64_t>(bytes) + 1, kAddressAlignment));
    allocated_ += bytes;
    return reinterpret_cast<void*>(static_cast<std::uintptr_t>(address));
  }
  void upload(void*, const void*, std::size_t) override {}
  std::size_t allocated_bytes() const override { return allocated_; }

 private:
  int device_;
  std::uint64_t next_ = 0x7f0000000000ULL;
  std::size_t allocated_ = 0;
};

class DeviceMemory final : public BatteryMemory {
 public:
  explicit DeviceMemory(int device) : device_(device) { cuda::make_device_current(device); }
  ~DeviceMemory() override {
    if (buffers_.empty()) return;
    const cuda::DriverApi& api = cuda::driver();
    cuda::make_device_current(device_);
    api.cuCtxSynchronize();
    for (cuda::DevicePtr pointer : buffers_) api.cuMemFree(pointer);
  }
  Device device() const override { return Device::cuda(device_); }
  bool holds_data() const override { return true; }
  void* allocate(std::size_t bytes) override {
    cuda::DevicePtr pointer = 0;
    cuda::check(cuda::driver().cuMemAlloc(&pointer, std::max<std::size_t>(bytes, 1)),
                "cuMemAlloc(" + std::to_string(bytes) +
                    " bytes for the serving battery on device " + std::to_string(device_) + ")");
    buffers_.push_back(pointer);
    allocated_ += bytes;
    return reinterpret_cast<void*>(static_cast<std::uintptr_t>(pointer));
  }
  void upload(void* destination, const void* source, std::size_t bytes) override {
    // Synchronous: it also orders the upload after the previous step's launches on the
    // legacy default stream, which read the same metadata buffers.
    cuda::check(cuda::driver().cuMemcpyHtoD(
                    static_cast<cuda::DevicePtr>(reinterpret_cast<std::uintptr_t>(destination)),
                    source, bytes),
                "cuMemcpyHtoD");
  }
  std::size_t allocated_bytes() const override { return allocated_; }

 private:
  int device_;
  std::vector<cuda::DevicePtr> buffers_;
  std::size_t allocated_ = 0;
};

}  // namespace

std::unique_ptr<BatteryMemory> make_virtual_battery_memory(int device_ordinal) {
  return std::make_unique<VirtualMemory>(device_ordinal);
}

std::unique_ptr<BatteryMemory> make_device_battery_memory(int device) {
  return std::make_unique<DeviceMemory>(device);
}

// --- Options, steps, generator -----------------------------------------------------------------

BatteryOptions resolved_battery_options(const Dsv4Config& config, BatteryOptions options) {
  const std::int64_t positions = config.model.max_position_embeddings;
  if (options.max_model_len == 0) options.max_model_len = std::min(positions, kDefaultMaxModelLen);
  if (options.max_model_len < 1 || options.max_model_len > positions) {
    throw ConfigError("battery: max_model_len must be in [1, max_position_embeddings = " +
                      std::to_string(positions) + "], got " +
                      std::to_string(options.max_model_len));
  }
  if (options.max_num_seqs < 1) throw ConfigError("battery: max_num_seqs must be >= 1");
  if (options.max_prefills < 1) throw ConfigError("battery: max_prefills must be >= 1");
  if (options.layers_per_kind < 1) throw ConfigError("battery: layers must be >= 1");
  if (options.kv_pool_blocks < 1 || options.state_pool_blocks < 1) {
    throw ConfigError("battery: the KV and state pools need at least one block");
  }
  return options;
}

int ServingStep::num_decodes() const {
  return static_cast<int>(std::count_if(requests.begin(), requests.end(),
                                        [](const BatteryRequest& r) { return !r.prefill; }));
}
int ServingStep::num_prefills() const { return static_cast<int>(requests.size()) - num_decodes(); }
std::int64_t ServingStep::num_tokens() const { return num_decode_tokens() + num_prefill_tokens(); }
std::int64_t ServingStep::num_decode_tokens() const {
  std::int64_t tokens = 0;
  for (const auto& r : requests) tokens += r.prefill ? 0 : r.query_len;
  return tokens;
}
std::int64_t ServingStep::num_prefill_tokens() const {
  std::int64_t tokens = 0;
  for (const auto& r : requests) tokens += r.prefill ? r.query_len : 0;
  return tokens;
}

std::string ServingStep::summary() const {
  std::int64_t longest = 0;
  for (const auto& r : requests) longest = std::max(longest, r.seq_len());
  return "step " + std::to_string(index) + ": " + std::to_string(num_decodes()) + " decodes, " +
         std::to_string(num_prefills()) + " prefill chunks (T=" + std::to_string(num_tokens()) +
         ", " + std::to_string(num_prefill_tokens()) + " prefill tokens, longest sequence " +
         std::to_string(longest) + ")";
}

StepGenerator::StepGenerator(const Dsv4Config& config, const BatteryOptions& options)
    : random_(options.seed) {
  const BatteryOptions resolved = resolved_battery_options(config, options);
  max_tokens_ = config.serving.max_num_batched_tokens;
  max_model_len_ = resolved.max_model_len;
  max_num_seqs_ = resolved.max_num_seqs;
  max_prefills_ = resolved.max_prefills;
  block_size_ = config.serving.block_size;
}

std::int64_t StepGenerator::log_uniform(std::int64_t low, std::int64_t high) {
  if (high <= low) return low;
  std::uniform_real_distribution<double> unit(std::log(static_cast<double>(low) + 1.0),
                                              std::log(static_cast<double>(high) + 1.0));
  const auto value = static_cast<std::int64_t>(std::llround(std::exp(unit(random_)) - 1.0));
  return std::clamp(value, low, high);
}

std::int64_t StepGenerator::random_context(std::int64_t limit) {
  if (limit <= 0) return 0;
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const double u = unit(random_);
  if (u < 0.2) return 0;  // a first chunk: positions < 7 reach the C4 window's masked rows
  if (u < 0.55) {
    // Just before a compress or page boundary, so the step's tokens cross it.
    std::vector<std::int64_t> periods = {4, 128};
    if (block_size_ > 0) periods.push_back(block_size_);
    const std::int64_t period =
        periods[std::uniform_int_distribution<std::size_t>(0, periods.size() - 1)(random_)];
    const std::int64_t multiples = std::max<std::int64_t>(1, limit / period);
    const std::int64_t k = std::uniform_int_distribution<std::int64_t>(1, multiples)(random_);
    const std::int64_t back = std::uniform_int_distribution<std::int64_t>(0, 3)(random_);
    return std::clamp<std::int64_t>(k * period - back, 0, limit);
  }
  return log_uniform(0, limit);
}

ServingStep StepGenerator::next() {
  ServingStep step;
  step.index = index_++;
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  // The token budget: both ends often (the coarsening and grid edges live there), the rest
  // log-uniform.
  const double size_draw = unit(random_);
  const std::int64_t budget = size_draw < 0.1   ? 1
                              : size_draw < 0.2 ? max_tokens_
                                                : log_uniform(1, max_tokens_);
  const double mix = unit(random_);
  const bool decode_only = mix < 0.35;
  const bool prefill_only = !decode_only && mix < 0.65;
  std::int64_t decodes = 0;
  if (decode_only) {
    decodes = std::min<std::int64_t>(budget, max_num_seqs_);
  } else if (!prefill_only && budget >= 2 && max_num_seqs_ >= 2) {
    decodes = std::uniform_int_distribution<std::int64_t>(
        1, std::min<std::int64_t>(max_num_seqs_ - 1, budget - 1))(random_);
  }
  std::int64_t remaining = decode_only ? 0 : budget - decodes;
  const std::int64_t free_slots = max_num_seqs_ - decodes;
  std::vector<std::int64_t> chunks;
  if (remaining > 0 && free_slots > 0) {
    const std::int64_t count = std::uniform_int_distribution<std::int64_t>(
        1, std::min<std::int64_t>({max_prefills_, remaining, free_slots}))(random_);
    // Random proportions, each chunk at least one token, summing to `remaining`.
    std::vector<double> weights(static_cast<std::size_t>(count));
    for (double& w : weights) w = 0.05 + unit(random_);
    const double total = std::accumulate(weights.begin(), weights.end(), 0.0);
    std::int64_t assigned = 0;
    for (std::size_t i = 0; i < weights.size(); ++i) {
      const std::int64_t left = static_cast<std::int64_t>(weights.size() - i - 1);
      std::int64_t chunk =
          i + 1 == weights.size()
              ? remaining - assigned
              : static_cast<std::int64_t>(static_cast<double>(remaining) * weights[i] / total);
      chunk = std::clamp<std::int64_t>(chunk, 1, remaining - assigned - left);
      chunks.push_back(std::min(chunk, max_model_len_));
      assigned += chunk;
    }
  }
  if (decodes == 0 && chunks.empty()) decodes = 1;
  for (std::int64_t i = 0; i < decodes; ++i) {
    step.requests.push_back({random_context(max_model_len_ - 1), 1, false});
  }
  for (const std::int64_t chunk : chunks) {
    step.requests.push_back({random_context(max_model_len_ - chunk), chunk, true});
  }
  return step;
}

// --- Names -------------------------------------------------------------------------------------

std::string_view to_string(LayerKind kind) {
  switch (kind) {
    case LayerKind::sliding_window:
      return "sliding-window";
    case LayerKind::csa:
      return "c4";
    case LayerKind::hca:
      return "c128";
  }
  return "?";
}

std::vector<LayerKind> layer_kinds(const ModelConfig& model) {
  std::vector<LayerKind> kinds;
  if (has_compress_ratio(model, kSlidingWindowOnlyRatio))
    kinds.push_back(LayerKind::sliding_window);
  if (has_compress_ratio(model, kCsaCompressRatio)) kinds.push_back(LayerKind::csa);
  if (has_compress_ratio(model, kHcaCompressRatio)) kinds.push_back(LayerKind::hca);
  return kinds;
}

std::string_view to_string(CallKind kind) {
  switch (kind) {
    case CallKind::compressor:
      return "compressor";
    case CallKind::indexer_q:
      return "indexer-q";
    case CallKind::dcp_pack_decode:
      return "dcp-pack decode";
    case CallKind::dcp_pack_prefill:
      return "dcp-pack prefill";
    case CallKind::gather_compressed:
      return "gather compressed";
    case CallKind::gather_window:
      return "gather window";
  }
  return "?";
}

// --- Workspace ---------------------------------------------------------------------------------

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

  // What runs (the runtime checks the same features).
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

  void setup();
  void fill_static();
  std::vector<AttentionCall> calls(const ServingStep& step);
};

void BatteryWorkspace::State::setup() {
  const ModelConfig& model = config.model;
  indexer = kernels->indexer_q().has_value();
  c4 = kernels->c4_ds_mla_store().has_value() || kernels->c4_full_store().has_value();
  c128 = kernels->c128_compress().has_value();
  gathers = !kernels->dequant_gather().empty();
  dcp = kernels->dcp_pack().has_value();
  full_cache = config.serving.kv_cache_dtype != KvCacheDtype::fp8_ds_mla;
  full_fp8 = config.serving.kv_cache_dtype == KvCacheDtype::fp8_e4m3;
  norm_dtype = to_dtype(model.dtype);
  kinds = layer_kinds(model);

  max_tokens = config.serving.max_num_batched_tokens;
  max_len = options.max_model_len;
  block_size = config.serving.block_size;
  if (block_size <= 0) return;  // no KV cache: no kernel runs, nothing to allocate
  rows_c4 = compressed_block_size(block_size, kCsaCompressRatio);
  rows_c128 = compressed_block_size(block_size, kHcaCompressRatio);
  stride_window = default_ds_mla_page_stride_bytes(block_size);
  stride_c4 = default_ds_mla_page_stride_bytes(rows_c4);
  stride_c128 = effective_c128_page_stride_bytes(config.serving);
  // Wide enough for a position's page in every cache (a compressed cache page holds B_k
  // compressed rows, which may span more or fewer tokens than a window page).
  kv_width = std::max({ceil_div(max_len, block_size),
                       ceil_div(ceil_div(max_len, kCsaCompressRatio), rows_c4),
                       ceil_div(ceil_div(max_len, kHcaCompressRatio), rows_c128)}) +
             1;
  kv_pool = std::min<std::int64_t>(options.max_num_seqs * kv_width,
                                   std::max<std::int64_t>(kv_width, options.kv_pool_blocks));
  state_pool = options.state_pool_blocks;
  c4_state_width = ceil_div(max_len, kC4StateBlockSize) + 1;
  c128_state_width = ceil_div(max_len, kC128StateBlockSize) + 1;
  heads = model.index_n_heads;
  head_dim = model.index_head_dim;
  rope_dim = model.qk_rope_head_dim;
  topk = model.index_topk;

  const auto seqs = static_cast<std::size_t>(options.max_num_seqs);
  const auto tokens = static_cast<std::size_t>(max_tokens);
  const auto prefills = static_cast<std::size_t>(options.max_prefills);
  positions = allocate(tokens * 8);
  token_to_req = allocate(tokens * 4);
  kv_table = allocate(seqs * static_cast<std::size_t>(kv_width) * 4);
  cos_sin = allocate(static_cast<std::size_t>(max_len) * 64 * 4);
  if (c4) {
    state_table_c4 = allocate(seqs * static_cast<std::size_t>(c4_state_width) * 4);
    state_slots_c4 = allocate(tokens * 8);
    kv_slots_c4 = allocate(tokens * 8);
  }
  if (c128) {
    state_table_c128 = allocate(seqs * static_cast<std::size_t>(c128_state_width) * 4);
    state_slots_c128 = allocate(tokens * 8);
    kv_slots_c128 = allocate(tokens * 8);
    compressed_kv = allocate(tokens * kHead * 4);
  }
  if ((c4 || c128) && full_fp8) fp8_scale = allocate(4);
  if (gathers) {
    seq_lens = allocate(prefills * 4);
    lens_c4 = allocate(prefills * 4);
    lens_c128 = allocate(prefills * 4);
    gather_lens = allocate(prefills * 4);
    const std::int64_t window_rows =
        std::min<std::int64_t>(max_len, max_tokens + model.sliding_window - 1);
    gather_rows = ceil_div(max_len, kCsaCompressRatio) + window_rows + 1;
    gather_out = allocate(prefills * static_cast<std::size_t>(gather_rows) * kHead * 2);
  }
  if (indexer) {
    const auto elements =
        tokens * static_cast<std::size_t>(heads) * static_cast<std::size_t>(head_dim);
    q = allocate(elements * 2);
    weights = allocate(tokens * static_cast<std::size_t>(heads) * 2);
    weights_out = allocate(tokens * static_cast<std::size_t>(heads) * 4);
    if (config.serving.indexer_dtype == IndexerDtype::fp8) {
      q_out = allocate(elements);
    } else {
      q_out = allocate(elements / 2);
      q_scale = allocate(elements / 32);
    }
  }
  if (dcp) {
    const int world = config.serving.dcp_world_size;
    const std::int64_t decode_columns = ceil_div(ceil_div(max_len, kCsaCompressRatio), world);
    logit_capacity = std::max<std::int64_t>(options.max_num_seqs * decode_columns,
                                            max_tokens * kMaxPrefillLogitColumns);
    logits = allocate(static_cast<std::size_t>(logit_capacity) * 4);
    topk_decode = allocate(seqs * static_cast<std::size_t>(topk) * 4);
    topk_prefill = allocate(tokens * static_cast<std::size_t>(topk) * 4);
    row_starts = allocate(tokens * 4);
    packed = allocate(std::max(tokens, seqs) * static_cast<std::size_t>(topk) * 2 * 4);
  }
  const auto pool = static_cast<std::size_t>(kv_pool);
  for (int index = 0; index < options.layers_per_kind; ++index) {
    for (const LayerKind kind : kinds) {
      Layer layer;
      layer.kind = kind;
      layer.index = index;
      if (gathers) layer.window_cache = allocate(pool * static_cast<std::size_t>(stride_window));
      const bool compressed = (kind == LayerKind::csa && c4) || (kind == LayerKind::hca && c128);
      if (compressed) {
        const bool is_c4 = kind == LayerKind::csa;
        const int rows = is_c4 ? rows_c4 : rows_c128;
        const std::int64_t stride = is_c4 ? stride_c4 : stride_c128;
        if (gathers || !full_cache)
          layer.compressed_ds_mla = allocate(pool * static_cast<std::size_t>(stride));
        if (full_cache) {
          layer.compressed_full =
              allocate(pool * static_cast<std::size_t>(rows) * kHead * (full_fp8 ? 1 : 2));
        }
        const int state_rows = is_c4 ? kC4StateBlockSize : kC128StateBlockSize;
        const std::int64_t state_width = is_c4 ? 2 * kHead : kHead;
        layer.state_cache =
            allocate(static_cast<std::size_t>(state_pool) * static_cast<std::size_t>(state_rows) *
                     static_cast<std::size_t>(2 * state_width) * 4);
        layer.norm_weight =
            allocate(kHead * static_cast<std::size_t>(dtype_size_bytes(norm_dtype)));
      } else if (kind == LayerKind::hca && gathers) {
        // The gather reads the compressed cache even where this build has no compressor.
        layer.compressed_ds_mla = allocate(pool * static_cast<std::size_t>(stride_c128));
      } else if (kind == LayerKind::csa && gathers) {
        layer.compressed_ds_mla = allocate(pool * static_cast<std::size_t>(stride_c4));
      }
      layers.push_back(layer);
    }
  }

  // Static tables: each request's pages distinct while the pool lasts; state blocks random.
  std::mt19937_64 random(options.seed ^ 0x5DEECE66DULL);
  std::vector<std::int32_t> permutation(pool);
  std::iota(permutation.begin(), permutation.end(), 0);
  std::shuffle(permutation.begin(), permutation.end(), random);
  kv_table_host.resize(seqs * static_cast<std::size_t>(kv_width));
  for (std::size_t i = 0; i < kv_table_host.size(); ++i) kv_table_host[i] = permutation[i % pool];
  std::uniform_int_distribution<std::int32_t> state_block(
      0, static_cast<std::int32_t>(state_pool - 1));
  if (c4) {
    state_c4_host.resize(seqs * static_cast<std::size_t>(c4_state_width));
    for (auto& block : state_c4_host) block = state_block(random);
  }
  if (c128) {
    state_c128_host.resize(seqs * static_cast<std::size_t>(c128_state_width));
    for (auto& block : state_c128_host) block = state_block(random);
  }
  if (memory->holds_data()) fill_static();
}

void BatteryWorkspace::State::fill_static() {
  BatteryMemory& mem = *memory;
  upload_vector(mem, kv_table, kv_table_host);
  if (c4) upload_vector(mem, state_table_c4, state_c4_host);
  if (c128) upload_vector(mem, state_table_c128, state_c128_host);
  // RoPE cache rows: cos(p * theta_j), sin(p * theta_j).
  {
    std::vector<float> rows(static_cast<std::size_t>(max_len) * 64);
    std::vector<double> theta(32);
    for (int j = 0; j < 32; ++j)
      theta[static_cast<std::size_t>(j)] =
          std::pow(config.model.compress_rope_theta, -2.0 * j / 64.0);
    for (std::int64_t p = 0; p < max_len; ++p) {
      for (int j = 0; j < 32; ++j) {
        const double angle = static_cast<double>(p) * theta[static_cast<std::size_t>(j)];
        rows[static_cast<std::size_t>(p * 64 + j)] = static_cast<float>(std::cos(angle));
        rows[static_cast<std::size_t>(p * 64 + 32 + j)] = static_cast<float>(std::sin(angle));
      }
    }
    upload_vector(mem, cos_sin, rows);
  }
  if (fp8_scale) {
    const float scale = 0.5f;
    mem.upload(fp8_scale, &scale, sizeof scale);
  }
  if (indexer) {
    const auto elements = static_cast<std::size_t>(max_tokens) * static_cast<std::size_t>(heads);
    fill_tiled(
        mem, q, elements * static_cast<std::size_t>(head_dim) * 2,
        float_pattern(noise, DType::bf16,
                      pattern_units(2, static_cast<std::int64_t>(elements) * head_dim), -4, 4));
    fill_tiled(mem, weights, elements * 2,
               float_pattern(noise, DType::bf16,
                             pattern_units(2, static_cast<std::int64_t>(elements)), -1, 1));
  }
  if (dcp) {
    fill_tiled(mem, logits, static_cast<std::size_t>(logit_capacity) * 4,
               float_pattern(noise, DType::f32, pattern_units(4, logit_capacity), -8, 8));
  }
  for (const Layer& layer : layers) {
    const auto pool = static_cast<std::size_t>(kv_pool);
    if (layer.window_cache) {
      fill_tiled(mem, layer.window_cache, pool * static_cast<std::size_t>(stride_window),
                 ds_mla_pages(noise, block_size, stride_window,
                              pattern_units(static_cast<std::size_t>(stride_window), kv_pool)));
    }
    const bool is_c4 = layer.kind == LayerKind::csa;
    if (layer.compressed_ds_mla) {
      const std::int64_t stride = is_c4 ? stride_c4 : stride_c128;
      fill_tiled(mem, layer.compressed_ds_mla, pool * static_cast<std::size_t>(stride),
                 ds_mla_pages(noise, is_c4 ? rows_c4 : rows_c128, stride,
                              pattern_units(static_cast<std::size_t>(stride), kv_pool)));
    }
    if (layer.compressed_full) {
      const DType dtype = full_fp8 ? DType::e4m3 : DType::bf16;
      const std::int64_t elements = kv_pool * (is_c4 ? rows_c4 : rows_c128) * kHead;
      fill_tiled(mem, layer.compressed_full,
                 static_cast<std::size_t>(elements * dtype_size_bytes(dtype)),
                 float_pattern(noise, dtype, pattern_units(2, elements), -2, 2));
    }
    if (layer.state_cache) {
      const std::int64_t elements =
          state_pool * (is_c4 ? kC4StateBlockSize * 4 * kHead : kC128StateBlockSize * 2 * kHead);
      fill_tiled(mem, layer.state_cache, static_cast<std::size_t>(elements) * 4,
                 float_pattern(noise, DType::f32, pattern_units(4, elements), -2, 2));
    }
    if (layer.norm_weight) {
      upload_vector(mem, layer.norm_weight, float_pattern(noise, norm_dtype, kHead, 0.5f, 1.5f));
    }
  }
}

std::vector<AttentionCall> BatteryWorkspace::State::calls(const ServingStep& step) {
  std::vector<AttentionCall> out;
  if (block_size <= 0 || step.requests.empty()) return out;
  const ModelConfig& model = config.model;
  const auto num_reqs = static_cast<std::int64_t>(step.requests.size());
  const std::int64_t tokens = step.num_tokens();
  const int decodes = step.num_decodes();
  const int prefills = step.num_prefills();
  const std::int64_t decode_tokens = step.num_decode_tokens();
  const std::int64_t prefill_tokens = step.num_prefill_tokens();
  if (tokens > max_tokens || num_reqs > options.max_num_seqs || prefills > options.max_prefills) {
    throw Error("battery: " + step.summary() + " exceeds the workspace (max " +
                std::to_string(max_tokens) + " tokens, " + std::to_string(options.max_num_seqs) +
                " requests, " + std::to_string(options.max_prefills) + " prefills)");
  }
  for (const auto& request : step.requests) {
    if (request.context_len < 0 || request.query_len < 1 || request.seq_len() > max_len) {
      throw Error("battery: " + step.summary() +
                  " has a request outside [0, max_model_len = " + std::to_string(max_len) + ")");
    }
  }
  const int world = config.serving.dcp_world_size;

  // Per-prefill lengths (shapes need their maxima, the data needs them all).
  std::vector<std::int32_t> seq_host, c4_host, c128_host, gather_host;
  std::int64_t max_c4 = 0, max_c128 = 0, max_gather = 0;
  for (const auto& r : step.requests) {
    if (!r.prefill) continue;
    const std::int64_t gather = std::min(r.seq_len(), r.query_len + model.sliding_window - 1);
    seq_host.push_back(static_cast<std::int32_t>(r.seq_len()));
    c4_host.push_back(static_cast<std::int32_t>(r.seq_len() / kCsaCompressRatio));
    c128_host.push_back(static_cast<std::int32_t>(r.seq_len() / kHcaCompressRatio));
    gather_host.push_back(static_cast<std::int32_t>(gather));
    max_c4 = std::max(max_c4, r.seq_len() / kCsaCompressRatio);
    max_c128 = std::max(max_c128, r.seq_len() / kHcaCompressRatio);
    max_gather = std::max(max_gather, gather);
  }
  // DCP logits widths: a decode row spans the rank's share of the compressed positions; a
  // prefill row one segment per chunk (at its row start), capped to bound the buffer.
  std::int64_t decode_columns = 1;
  std::vector<std::int64_t> segment_width, segment_start;
  std::int64_t prefill_columns = 0;
  for (const auto& r : step.requests) {
    const std::int64_t local =
        std::max<std::int64_t>(1, ceil_div(r.seq_len() / kCsaCompressRatio, world));
    if (!r.prefill) {
      decode_columns = std::max(decode_columns, local);
    } else {
      segment_width.push_back(local);
      prefill_columns += local;
    }
  }
  if (prefill_columns > kMaxPrefillLogitColumns) {
    // Scaled down so that the sum stays within the cap even after rounding each up to 1.
    const std::int64_t budget =
        kMaxPrefillLogitColumns - static_cast<std::int64_t>(segment_width.size());
    const std::int64_t total = prefill_columns;
    prefill_columns = 0;
    for (auto& width : segment_width) {
      width = std::max<std::int64_t>(1, width * budget / total);
      prefill_columns += width;
    }
  }
  for (std::int64_t start = 0; const auto width : segment_width) {
    segment_start.push_back(start);
    start += width;
  }

  std::int64_t boundaries_c4 = 0, boundaries_c128 = 0;
  for (const auto& r : step.requests) {
    boundaries_c4 += boundaries(r.context_len, r.seq_len(), kCsaCompressRatio);
    boundaries_c128 += boundaries(r.context_len, r.seq_len(), kHcaCompressRatio);
  }

  if (memory->holds_data()) {
    BatteryMemory& mem = *memory;
    std::vector<std::int64_t> positions_host;
    std::vector<std::int32_t> request_host;
    positions_host.reserve(static_cast<std::size_t>(tokens));
    request_host.reserve(static_cast<std::size_t>(tokens));
    for (std::int64_t r = 0; r < num_reqs; ++r) {
      const auto& request = step.requests[static_cast<std::size_t>(r)];
      for (std::int64_t p = request.context_len; p < request.seq_len(); ++p) {
        positions_host.push_back(p);
        request_host.push_back(static_cast<std::int32_t>(r));
      }
    }
    upload_vector(mem, positions, positions_host);
    upload_vector(mem, token_to_req, request_host);
    const auto kv_page = [&](std::int32_t request, std::int64_t page) {
      return static_cast<std::int64_t>(
          kv_table_host[static_cast<std::size_t>(request * kv_width + page)]);
    };
    // Compressor slots: the state slot of every token, and the compressed-cache slot of each
    // boundary token (-1 elsewhere).
    const auto compressor_slots = [&](std::int64_t ratio, int state_rows, std::int64_t state_width,
                                      const std::vector<std::int32_t>& state_table, int rows,
                                      void* state_slots, void* kv_slots) {
      std::vector<std::int64_t> state(static_cast<std::size_t>(tokens));
      std::vector<std::int64_t> kv(static_cast<std::size_t>(tokens));
      for (std::size_t t = 0; t < state.size(); ++t) {
        const std::int64_t p = positions_host[t];
        const std::int32_t request = request_host[t];
        state[t] =
            static_cast<std::int64_t>(
                state_table[static_cast<std::size_t>(request * state_width + p / state_rows)]) *
                state_rows +
            p % state_rows;
        if ((p + 1) % ratio == 0) {
          const std::int64_t row = p / ratio;
          kv[t] = kv_page(request, row / rows) * rows + row % rows;
        } else {
          kv[t] = -1;
        }
      }
      upload_vector(mem, state_slots, state);
      upload_vector(mem, kv_slots, kv);
    };
    if (c4) {
      compressor_slots(kCsaCompressRatio, kC4StateBlockSize, c4_state_width, state_c4_host, rows_c4,
                       state_slots_c4, kv_slots_c4);
    }
    if (c128) {
      compressor_slots(kHcaCompressRatio, kC128StateBlockSize, c128_state_width, state_c128_host,
                       rows_c128, state_slots_c128, kv_slots_c128);
    }
    if (gathers && prefills > 0) {
      upload_vector(mem, seq_lens, seq_host);
      upload_vector(mem, lens_c4, c4_host);
      upload_vector(mem, lens_c128, c128_host);
      upload_vector(mem, gather_lens, gather_host);
    }
    if (dcp) {
      // Millions of indices per large step: the fast generator, not mt19937.
      Noise random(options.seed + static_cast<std::uint64_t>(step.index) * 7919);
      // Local top-k: indices in [0, width) with about 1 in 9 set to -1 (padding) anywhere.
      const auto fill_topk = [&](std::int64_t rows, const auto& width_of_row, void* target) {
        std::vector<std::int32_t> indices(static_cast<std::size_t>(rows * topk));
        for (std::int64_t row = 0; row < rows; ++row) {
          const std::int64_t width = width_of_row(row);
          const auto span = static_cast<std::uint64_t>(width + width / 8 + 1);
          for (int c = 0; c < topk; ++c) {
            const auto draw = static_cast<std::int64_t>(random.next() % span) - width / 8 - 1;
            indices[static_cast<std::size_t>(row * topk + c)] =
                static_cast<std::int32_t>(std::max<std::int64_t>(-1, draw));
          }
        }
        upload_vector(mem, target, indices);
      };
      if (decode_tokens > 0) {
        fill_topk(
            decode_tokens, [&](std::int64_t) { return decode_columns; }, topk_decode);
      }
      if (prefill_tokens > 0) {
        std::vector<std::int32_t> starts;
        std::vector<std::int64_t> widths;
        for (std::size_t i = 0, prefill = 0; i < step.requests.size(); ++i) {
          const auto& r = step.requests[i];
          if (!r.prefill) continue;
          for (std::int64_t t = 0; t < r.query_len; ++t) {
            starts.push_back(static_cast<std::int32_t>(segment_start[prefill]));
            widths.push_back(segment_width[prefill]);
          }
          ++prefill;
        }
        fill_topk(
            prefill_tokens, [&](std::int64_t row) { return widths[static_cast<std::size_t>(row)]; },
            topk_prefill);
        upload_vector(mem, row_starts, starts);
      }
    }
  }

  // Descriptors shared by the calls.
  const TensorRef positions_ref = ref(positions, DType::i64, {tokens});
  const TensorRef requests_ref = ref(token_to_req, DType::i32, {tokens});
  const TensorRef cos_sin_ref = ref(cos_sin, DType::f32, {max_len, 64});
  const TensorRef kv_table_prefill =
      strided(static_cast<std::int32_t*>(kv_table) + decodes * kv_width, DType::i32,
              {prefills, kv_width}, {kv_width, 1});
  const std::optional<TensorRef> scale_ref =
      fp8_scale ? std::optional<TensorRef>(ref(fp8_scale, DType::f32, {1})) : std::nullopt;
  const auto pool = kv_pool;
  const double metadata_bytes = static_cast<double>(tokens) * (8 + 4 + 8 + 8);
  const double full_row_bytes = full_cache ? (full_fp8 ? 512.0 : 1024.0) : 584.0;
  std::mt19937_64 rank_random(options.seed + static_cast<std::uint64_t>(step.index));

  const auto compressor = [&](const Layer& layer, bool is_c4) {
    AttentionCall call;
    call.kind = CallKind::compressor;
    call.layer = layer.kind;
    call.layer_index = layer.index;
    CompressorCall c;
    const int rows = is_c4 ? rows_c4 : rows_c128;
    const std::int64_t stride = is_c4 ? stride_c4 : stride_c128;
    TensorRef cache = full_cache ? ref(layer.compressed_full, full_fp8 ? DType::e4m3 : DType::bf16,
                                       {pool, rows, kHead})
                                 : strided(layer.compressed_ds_mla, DType::u8,
                                           {pool, rows, kDsMlaRow}, {stride, kDsMlaRow, 1});
    const TensorRef weight = ref(layer.norm_weight, norm_dtype, {kHead});
    const auto eps = static_cast<float>(model.rms_norm_eps);
    const double weight_bytes = kHead * dtype_size_bytes(norm_dtype);
    if (is_c4) {
      c.compress_ratio = kCsaCompressRatio;
      C4StoreArgs& a = c.c4;
      a.compress_ratio = kCsaCompressRatio;
      a.state_cache =
          ref(layer.state_cache, DType::f32, {state_pool, kC4StateBlockSize, 4 * kHead});
      a.token_to_req = requests_ref;
      a.positions = positions_ref;
      a.slot_mapping = ref(state_slots_c4, DType::i64, {tokens});
      a.block_table = ref(state_table_c4, DType::i32, {num_reqs, c4_state_width});
      a.rms_norm_weight = weight;
      a.eps = eps;
      a.cos_sin_cache = cos_sin_ref;
      a.k_cache = cache;
      a.kv_slot_mapping = ref(kv_slots_c4, DType::i64, {tokens});
      if (full_fp8) a.fp8_scale = scale_ref;
      const std::string_view kernel =
          full_cache ? C4StoreFullKernel::instance().name() : C4StoreKernel::instance().name();
      call.traffic.push_back({kernel, metadata_bytes + weight_bytes +
                                          static_cast<double>(boundaries_c4) *
                                              (8.0 * 2 * kHead * 4 + 64 * 4 + full_row_bytes)});
    } else {
      c.compress_ratio = kHcaCompressRatio;
      C128CompressArgs& s1 = c.c128_compress;
      s1.state_cache =
          ref(layer.state_cache, DType::f32, {state_pool, kC128StateBlockSize, 2 * kHead});
      s1.token_to_req = requests_ref;
      s1.positions = positions_ref;
      s1.slot_mapping = ref(state_slots_c128, DType::i64, {tokens});
      s1.block_table = ref(state_table_c128, DType::i32, {num_reqs, c128_state_width});
      s1.compressed_kv = ref(compressed_kv, DType::f32, {tokens, kHead});
      C128StoreArgs& s2 = c.c128_store;
      s2.compressed_kv = s1.compressed_kv;
      s2.positions = positions_ref;
      s2.slot_mapping = s1.slot_mapping;
      s2.rms_norm_weight = weight;
      s2.eps = eps;
      s2.cos_sin_cache = cos_sin_ref;
      s2.k_cache = cache;
      s2.kv_slot_mapping = ref(kv_slots_c128, DType::i64, {tokens});
      if (full_fp8) s2.fp8_scale = scale_ref;
      const double active = static_cast<double>(boundaries_c128);
      call.traffic.push_back({C128CompressKernel::instance().name(),
                              static_cast<double>(tokens) * (8 + 4 + 8) +
                                  active * (128.0 * 2 * kHead * 4 + kHead * 4)});
      const std::string_view store =
          full_cache ? C128StoreFullKernel::instance().name() : C128StoreKernel::instance().name();
      call.traffic.push_back({store, static_cast<double>(tokens) * (8 + 8 + 8) + weight_bytes +
                                         active * (kHead * 4 + 64 * 4 + full_row_bytes)});
    }
    call.args = std::move(c);
    out.push_back(std::move(call));
  };

  const auto gather = [&](const Layer& layer, bool window, std::int64_t compressed_rows,
                          int ratio) {
    AttentionCall call;
    call.kind = window ? CallKind::gather_window : CallKind::gather_compressed;
    call.layer = layer.kind;
    call.layer_index = layer.index;
    DequantGatherArgs a;
    const std::int64_t rows_out = compressed_rows + max_gather;
    a.out = ref(gather_out, DType::bf16, {prefills, rows_out, kHead});
    a.block_table = kv_table_prefill;
    double rows_moved = 0;
    if (window) {
      a.k_cache = strided(layer.window_cache, DType::u8, {pool, block_size, kDsMlaRow},
                          {stride_window, kDsMlaRow, 1});
      a.seq_lens = ref(seq_lens, DType::i32, {prefills});
      a.gather_lens = ref(gather_lens, DType::i32, {prefills});
      a.offset = compressed_rows;
      for (const auto g : gather_host) rows_moved += g;
    } else {
      const bool is_c4 = ratio == kCsaCompressRatio;
      a.k_cache = strided(layer.compressed_ds_mla, DType::u8,
                          {pool, is_c4 ? rows_c4 : rows_c128, kDsMlaRow},
                          {is_c4 ? stride_c4 : stride_c128, kDsMlaRow, 1});
      a.seq_lens = ref(is_c4 ? lens_c4 : lens_c128, DType::i32, {prefills});
      a.offset = 0;
      for (const auto l : (is_c4 ? c4_host : c128_host)) rows_moved += l;
    }
    call.traffic.push_back({DequantGatherKernel::instance().name(),
                            rows_moved * (kDsMlaRow + 2 * kHead) + prefills * 8.0});
    call.args = std::move(a);
    out.push_back(std::move(call));
  };

  const auto dcp_pack = [&](const Layer& layer, bool prefill) {
    AttentionCall call;
    call.kind = prefill ? CallKind::dcp_pack_prefill : CallKind::dcp_pack_decode;
    call.layer = layer.kind;
    call.layer_index = layer.index;
    DcpPackArgs a;
    const std::int64_t rows = prefill ? prefill_tokens : decode_tokens;
    const std::int64_t columns = prefill ? prefill_columns : decode_columns;
    a.logits = ref(logits, DType::f32, {rows, columns});
    a.topk_indices = ref(prefill ? topk_prefill : topk_decode, DType::i32, {rows, topk});
    if (prefill) a.row_starts = ref(row_starts, DType::i32, {rows});
    a.packed = ref(packed, DType::f32, {rows, topk, 2});
    a.dcp_world_size = world;
    a.cp_interleave = config.serving.cp_interleave;
    a.dcp_rank = std::uniform_int_distribution<int>(0, world - 1)(rank_random);
    call.traffic.push_back({DcpPackKernel::instance().name(),
                            static_cast<double>(rows) * (topk * (4 + 4 + 8) + (prefill ? 4 : 0))});
    call.args = std::move(a);
    out.push_back(std::move(call));
  };

  const auto indexer_q = [&](const Layer& layer) {
    AttentionCall call;
    call.kind = CallKind::indexer_q;
    call.layer = layer.kind;
    call.layer_index = layer.index;
    IndexerQCall c;
    c.variant = config.serving.indexer_dtype;
    c.inputs.positions = positions_ref;
    c.inputs.q = ref(q, DType::bf16, {tokens, heads, head_dim});
    c.inputs.cos_sin_cache = ref(cos_sin, DType::f32, {max_len, rope_dim});
    c.inputs.weights = ref(weights, DType::bf16, {tokens, heads});
    c.inputs.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim)) /
                                        std::sqrt(static_cast<double>(heads)));
    const double elements = static_cast<double>(tokens) * heads * head_dim;
    double bytes = static_cast<double>(tokens) * (8 + rope_dim * 4) + elements * 2 +
                   static_cast<double>(tokens) * heads * (2 + 4);
    const TensorRef weights_out_ref = ref(weights_out, DType::f32, {tokens, heads});
    if (c.variant == IndexerDtype::fp8) {
      c.fp8.q_fp8 = ref(q_out, DType::u8, {tokens, heads, head_dim});
      c.fp8.weights_out = weights_out_ref;
      bytes += elements;
      call.traffic.push_back({IndexerQFp8Kernel::instance().name(), bytes});
    } else {
      c.mxfp4.q_packed = ref(q_out, DType::u8, {tokens, heads, head_dim / 2});
      c.mxfp4.q_scale = ref(q_scale, DType::u8, {tokens, heads, head_dim / 32});
      c.mxfp4.weights_out = weights_out_ref;
      bytes += elements / 2 + elements / 32;
      call.traffic.push_back({IndexerQMxFp4Kernel::instance().name(), bytes});
    }
    call.args = std::move(c);
    out.push_back(std::move(call));
  };

  for (const Layer& layer : layers) {
    switch (layer.kind) {
      case LayerKind::csa:
        if (c4) compressor(layer, true);
        if (indexer) indexer_q(layer);
        if (dcp && decode_tokens > 0) dcp_pack(layer, false);
        if (dcp && prefill_tokens > 0) dcp_pack(layer, true);
        if (gathers && prefills > 0) {
          gather(layer, false, max_c4, kCsaCompressRatio);
          gather(layer, true, max_c4, kCsaCompressRatio);
        }
        break;
      case LayerKind::hca:
        if (c128) compressor(layer, false);
        if (gathers && prefills > 0) {
          gather(layer, false, max_c128, kHcaCompressRatio);
          gather(layer, true, max_c128, kHcaCompressRatio);
        }
        break;
      case LayerKind::sliding_window:
        if (gathers && prefills > 0) gather(layer, true, 0, 0);
        break;
    }
  }
  return out;
}

BatteryWorkspace::BatteryWorkspace(const AttentionKernels& kernels, const BatteryOptions& options,
                                   BatteryMemory& memory)
    : state_(std::make_unique<State>()) {
  state_->kernels = &kernels;
  state_->config = kernels.config();
  state_->options = resolved_battery_options(kernels.config(), options);
  state_->memory = &memory;
  state_->device = memory.device();
  state_->noise = Noise(state_->options.seed);
  state_->setup();
}

BatteryWorkspace::~BatteryWorkspace() = default;

std::vector<AttentionCall> BatteryWorkspace::calls(const ServingStep& step) {
  return state_->calls(step);
}

std::size_t BatteryWorkspace::allocated_bytes() const { return state_->memory->allocated_bytes(); }

// --- Planning and running ----------------------------------------------------------------------

namespace {

template <class Kernel, class Spec, class Descriptors>
void add_planned(std::vector<PlannedLaunch>& out, Kernel& kernel, const Spec& spec,
                 const Descriptors& descriptors) {
  // An empty grid launches nothing, so it compiles nothing either (JitKernel::launch).
  if (spec.geometry.empty()) return;
  out.push_back({&kernel, describe(spec.key), describe(descriptors)});
}

}  // namespace

std::vector<PlannedLaunch> plan_call(const AttentionKernels& kernels, const AttentionCall& call) {
  std::vector<PlannedLaunch> out;
  if (const auto* indexer = std::get_if<IndexerQCall>(&call.args)) {
    const IndexerQDescriptors descriptors = indexer->inputs.descriptors();
    if (indexer->variant == IndexerDtype::fp8) {
      if (!kernels.indexer_q() || kernels.indexer_q()->variant != IndexerDtype::fp8) {
        throw Error("dsv4: this configuration does not run the FP8 indexer-Q kernel");
      }
      auto& kernel = IndexerQFp8Kernel::instance();
      add_planned(out, kernel, kernel.plan(indexer->inputs, indexer->fp8), descriptors);
    } else {
      if (!kernels.indexer_q() || kernels.indexer_q()->variant != IndexerDtype::mxfp4) {
        throw Error("dsv4: this configuration does not run the MXFP4 indexer-Q kernel");
      }
      auto& kernel = IndexerQMxFp4Kernel::instance();
      add_planned(out, kernel, kernel.plan(indexer->inputs, indexer->mxfp4), descriptors);
    }
  } else if (const auto* compressor = std::get_if<CompressorCall>(&call.args)) {
    kernels.route_compressor(*compressor, [&out](auto& kernel, const auto& args) {
      add_planned(out, kernel, kernel.plan(args), args.descriptors());
    });
  } else if (const auto* gather = std::get_if<DequantGatherArgs>(&call.args)) {
    if (kernels.dequant_gather().empty())
      throw Error("dsv4: this configuration has no K-cache gather");
    auto& kernel = DequantGatherKernel::instance();
    add_planned(out, kernel, kernel.plan(*gather), gather->descriptors());
  } else if (const auto* pack = std::get_if<DcpPackArgs>(&call.args)) {
    if (!kernels.dcp_pack())
      throw Error("dsv4: this configuration has no decode context parallelism");
    auto& kernel = DcpPackKernel::instance();
    add_planned(out, kernel, kernel.plan(*pack), pack->descriptors());
  }
  return out;
}

void run_call(const AttentionKernels& kernels, const AttentionCall& call, cuda::Stream stream) {
  if (const auto* indexer = std::get_if<IndexerQCall>(&call.args)) {
    if (indexer->variant == IndexerDtype::fp8) {
      kernels.run_indexer_q_fp8(indexer->inputs, indexer->fp8, stream);
    } else {
      kernels.run_indexer_q_mxfp4(indexer->inputs, indexer->mxfp4, stream);
    }
  } else if (const auto* compressor = std::get_if<CompressorCall>(&call.args)) {
    kernels.run_compressor(*compressor, stream);
  } else if (const auto* gather = std::get_if<DequantGatherArgs>(&call.args)) {
    kernels.run_dequant_gather(*gather, stream);
  } else if (const auto* pack = std::get_if<DcpPackArgs>(&call.args)) {
    kernels.run_dcp_pack(*pack, stream);
  }
}

}  // namespace zerojit::dsv4
