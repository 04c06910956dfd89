// The serving battery: a seeded stream of serving steps (prefill chunks and decode tokens) for
// a DSv4 configuration, and for each step the kernel calls the attention layers make, with
// descriptors shaped exactly as the runtime's.
//
// It exists to test the warmup contract from the outside: warmup spaces are written from the
// configuration, the battery from what a serving engine does, and the two must meet. The tool
// (`zerojit run`) and the GPU tests drive it in two ways:
//   - dispatch only: plan_call() returns the key of every kernel a call would launch, using
//     descriptors whose pointers are never dereferenced (no GPU, no compiler);
//   - on a device: run_call() calls AttentionKernels::run with real device buffers.
//
//   StepGenerator steps(config, options);
//   BatteryWorkspace workspace(kernels, options, memory);   // memory: virtual or a device
//   for (int i = 0; i < n; ++i)
//     for (const AttentionCall& call : workspace.calls(steps.next())) run_call(kernels, call);
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "dsv4/family.hpp"

namespace zerojit::dsv4 {

struct BatteryOptions {
  std::uint64_t seed = 1;
  // The longest sequence (context + new tokens). 0: min(max_position_embeddings, 65536).
  std::int64_t max_model_len = 0;
  int max_num_seqs = 128;   // requests in one step
  int max_prefills = 4;     // prefill chunks in one step
  int layers_per_kind = 1;  // layers of each kind (sliding window, C4, C128) that run the calls
  // Pages of each KV cache. Requests share pages once the pool is exhausted: harmless, since
  // no result is checked and every slot stays in range (at least one request's worth of
  // pages is always allocated, so a request's own pages never repeat).
  std::int64_t kv_pool_blocks = 1024;
  // Blocks of each compressor state cache (read only by the kernels, so sharing is fine).
  std::int64_t state_pool_blocks = 2048;
};

// The options with max_model_len resolved and everything checked against the configuration.
// Throws ConfigError naming the option.
BatteryOptions resolved_battery_options(const Dsv4Config& config, BatteryOptions options);

// One request's share of a step: `query_len` new tokens at positions
// [context_len, context_len + query_len).
struct BatteryRequest {
  std::int64_t context_len = 0;
  std::int64_t query_len = 1;
  bool prefill = false;

  std::int64_t seq_len() const { return context_len + query_len; }
};

struct ServingStep {
  std::int64_t index = 0;
  std::vector<BatteryRequest> requests;  // decodes first, then prefills (the engine's order)

  int num_decodes() const;
  int num_prefills() const;
  std::int64_t num_tokens() const;
  std::int64_t num_decode_tokens() const;
  std::int64_t num_prefill_tokens() const;
  // "step 12: 3 decodes, 1 prefill (T=517; contexts 0..4095)".
  std::string summary() const;
};

// A deterministic stream of steps. Token counts cover 1 .. max_num_batched_tokens (both ends
// included often); contexts start at 0, sit just before compress (4, 128) and page boundaries,
// or spread log-uniformly up to max_model_len, so chunks cross every kind of boundary.
class StepGenerator {
 public:
  StepGenerator(const Dsv4Config& config, const BatteryOptions& options);
  ServingStep next();

 private:
  std::int64_t random_context(std::int64_t limit);
  std::int64_t log_uniform(std::int64_t low, std::int64_t high);

  std::int64_t max_tokens_;
  std::int64_t max_model_len_;
  int max_num_seqs_;
  int max_prefills_;
  int block_size_;
  std::int64_t index_ = 0;
  std::mt19937_64 random_;
};

// The kinds of attention layer, by compress ratio.
enum class LayerKind { sliding_window, csa, hca };  // ratio 0, 4, 128
std::string_view to_string(LayerKind kind);
// The kind of a layer of this compress ratio. Throws ConfigError for another ratio.
LayerKind layer_kind(int compress_ratio);
// The kinds the model has among its decoder and MTP layers, in the order above.
std::vector<LayerKind> layer_kinds(const ModelConfig& model);

// Bytes a launched kernel must move: each input read once, each output written once.
struct KernelTraffic {
  std::string_view kernel;
  double bytes = 0.0;
};

// One call an attention layer makes. In the order a layer makes them:
//   C4 layer:  compressor, indexer-Q, DCP pack (decode rows, then prefill rows), and for
//              prefill the compressed-cache gather then the sliding-window gather;
//   C128 layer: compressor (compress + store), prefill gathers;
//   sliding-window layer: the prefill sliding-window gather.
struct AttentionCall {
  // "compressor", "indexer-q", "dcp-pack decode", "dcp-pack prefill", "gather compressed",
  // "gather window".
  std::string_view kind;
  LayerKind layer = LayerKind::sliding_window;
  int layer_index = 0;                 // which layer of its kind
  Dsv4Call args;                       // routed by AttentionKernels::run / route
  std::vector<KernelTraffic> traffic;  // per kernel the call launches
};

// Where the workspace's buffers live: fake addresses that are never dereferenced (dispatch
// only) or device memory. Both hand out 256-byte aligned bases, as cudaMalloc does, so views
// at offsets carry the same alignment in both.
class BatteryMemory {
 public:
  virtual ~BatteryMemory() = default;
  virtual Device device() const = 0;
  // Whether buffers hold data (metadata is then computed and uploaded for each step).
  virtual bool holds_data() const = 0;
  virtual void* allocate(std::size_t bytes) = 0;
  virtual void upload(void* destination, const void* source, std::size_t bytes) = 0;
  virtual std::size_t allocated_bytes() const = 0;
};

// Addresses only; descriptors built over it are exactly the device ones.
std::unique_ptr<BatteryMemory> make_virtual_battery_memory(int device_ordinal = 0);
// cuMemAlloc on `device` (made current on the calling thread); freed with the object. Throws
// UnavailableError without a driver, CudaError when out of memory.
std::unique_ptr<BatteryMemory> make_device_battery_memory(int device);

// The model's caches and the step buffers for a few layers of each kind, allocated once and
// sized for the largest step; with data-holding memory, filled with valid random contents.
class BatteryWorkspace {
 public:
  BatteryWorkspace(const AttentionKernels& kernels, const BatteryOptions& options,
                   BatteryMemory& memory);
  ~BatteryWorkspace();
  BatteryWorkspace(const BatteryWorkspace&) = delete;
  BatteryWorkspace& operator=(const BatteryWorkspace&) = delete;

  // The calls of one step, layer by layer. With data-holding memory, the step's metadata
  // (positions, slots, lengths, indices) is uploaded first: valid values only, so no kernel
  // reads or writes out of range.
  std::vector<AttentionCall> calls(const ServingStep& step);

  std::size_t allocated_bytes() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// A kernel launch a call makes, as dispatch sees it.
struct PlannedLaunch {
  KernelBase* kernel = nullptr;
  std::string key;          // describe(key), as the manifest prints it
  std::string descriptors;  // describe(descriptors): the runtime descriptors behind the key
};

// Plans every launch of the call (validating its arguments like the runtime does) without
// launching, routed as AttentionKernels::run routes them. Throws what the kernels throw.
std::vector<PlannedLaunch> plan_call(const AttentionKernels& kernels, const AttentionCall& call);

// Makes the call through AttentionKernels::run, exactly as the attention layer does.
void run_call(const AttentionKernels& kernels, const AttentionCall& call,
              cuda::Stream stream = nullptr);

}  // namespace zerojit::dsv4
