// Serving-like batteries after warmup, under the monitor in error mode, that must compile and
// load nothing: the serving battery (kernels/dsv4/battery/battery.hpp) on the default
// manifest, and a compact one written here on the default manifest plus DCP, with each call
// routed through AttentionKernels::run as the attention layer makes it. The harness is
// dsv4/support/gpu_harness.hpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "dsv4/battery/battery.hpp"
#include "dsv4/support/gpu_harness.hpp"

namespace zerojit::dsv4 {
namespace {

using namespace zerojit::dsv4::testing;
namespace in = zerojit::dsv4::testing;

// Warms `config`'s manifest (`expected_keys` keys) from scratch with the monitor in error mode.
void warm_from_scratch(const AttentionKernels& kernels, std::size_t expected_keys) {
  for (KernelBase* kernel : all_kernels()) kernel->reset_for_testing();
  WarmupRegistry registry;
  kernels.register_warmup(registry);
  const Manifest manifest = registry.manifest();
  std::string lines;
  for (const std::string& line : manifest.lines()) lines += "\n  " + line;
  ASSERT_EQ(manifest.size(), expected_keys) << "the manifest:" << lines;
  Monitor::instance().set_mode(MonitorMode::error);
  const WarmupReport report = registry.warmup(WarmupOptions{.progress = ProgressStyle::none});
  ASSERT_TRUE(report.ok()) << "warmup failed: " << report.to_json();
  ASSERT_TRUE(Monitor::instance().armed()) << "warmup must arm the monitor";
}

std::vector<KernelCounters> all_counters() {
  std::vector<KernelCounters> counters;
  for (KernelBase* kernel : all_kernels()) counters.push_back(kernel->counters());
  return counters;
}

// No kernel compiled, loaded or missed its executor cache since `before`; returns the launches
// served from the cache meanwhile.
std::uint64_t expect_no_runtime_jit(const std::vector<KernelCounters>& before) {
  const std::vector<KernelBase*> owners = all_kernels();
  std::uint64_t hits = 0;
  for (std::size_t i = 0; i < owners.size(); ++i) {
    const KernelCounters after = owners[i]->counters();
    EXPECT_EQ(after.compiles, before[i].compiles) << owners[i]->name() << " compiled after warmup";
    EXPECT_EQ(after.loads, before[i].loads) << owners[i]->name() << " loaded a module after warmup";
    EXPECT_EQ(after.misses, before[i].misses) << owners[i]->name() << " missed its executor cache";
    EXPECT_EQ(after.runtime_jit, 0u) << owners[i]->name() << " saw a runtime JIT";
    hits += after.hits - before[i].hits;
  }
  const std::vector<JitEvent> events = Monitor::instance().events();
  EXPECT_TRUE(events.empty()) << "the monitor saw " << events.size()
                              << " runtime JIT events, the first: " << events.front().kernel << " ["
                              << events.front().key << "] from " << events.front().descriptors;
  return hits;
}

TEST_F(Dsv4Gpu, WarmedDefaultManifestServesTheServingBatteryWithoutCompiling) {
  // The serving battery (kernels/dsv4/battery/battery.hpp): engine-shaped steps of decodes and
  // prefill chunks (1 .. 8192 tokens), every call the attention layers make, 3 layers of each kind
  // with their own caches, after warming the default configuration's 8 keys.
  const AttentionKernels kernels(default_config());
  warm_from_scratch(kernels, 9);  // section 11 with both C128 compress scans
  if (HasFatalFailure()) return;
  if (reference_backend_) reference_backend_->execute = false;  // dry run: count, do not run
  BatteryOptions options;
  options.seed = 2024;
  options.layers_per_kind = 3;
  const std::unique_ptr<BatteryMemory> memory =
      dry_run() ? make_virtual_battery_memory(0) : make_device_battery_memory(0);
  BatteryWorkspace workspace(kernels, options, *memory);
  StepGenerator steps(kernels.config(), options);
  const std::vector<KernelCounters> before = all_counters();
  std::map<std::string, int> calls;
  std::int64_t fewest_tokens = 1 << 30, most_tokens = 0;
  constexpr int kSteps = 48;
  for (int i = 0; i < kSteps; ++i) {
    const ServingStep step = steps.next();
    fewest_tokens = std::min(fewest_tokens, step.num_tokens());
    most_tokens = std::max(most_tokens, step.num_tokens());
    for (const AttentionCall& call : workspace.calls(step)) {
      try {
        run_call(kernels, call);
      } catch (const std::exception& error) {
        FAIL() << "serving battery, " << step.summary() << ": the " << call.kind << " call of "
               << to_string(call.layer) << " layer " << call.layer_index
               << " failed (a RuntimeJitError means the warmup missed a key the runtime "
                  "reaches): "
               << error.what();
      }
      ++calls[std::string(call.kind)];
    }
  }
  finish();
  const std::uint64_t hits = expect_no_runtime_jit(before);
  EXPECT_GT(hits, 0u) << "the battery launched nothing";
  EXPECT_EQ(fewest_tokens, 1) << "the battery never ran a one-token step";
  EXPECT_GE(most_tokens, 4096) << "the battery never ran a large prefill step";
  for (const char* kind : {"compressor", "indexer-q", "gather compressed", "gather window"}) {
    EXPECT_GT(calls[kind], 0) << "the serving battery never made a " << kind << " call";
  }
}

// Device tensors sized for the largest call, and views of them for each call's size.
struct BatteryBuffers {
  in::HostTensor positions, q, cos_sin, weights, q_fp8, weights_out;  // indexer
  // Dequant-gather: three caches (window B=256, C4 B=64, C128 B=2).
  in::HostTensor out, seq_lens, gather_lens;
  std::vector<GatherInputs> gather_caches;
  // Compressors: per-token metadata and, per layer, a state and a cache.
  TokenTensors c4_tokens, c128_tokens;
  std::vector<in::CompressorState> c4_states, c128_states;
  std::vector<KCache> c4_caches, c128_caches;
  in::HostTensor compressed_kv, norm_weight;
  // DCP.
  in::HostTensor logits, topk_indices, row_starts, packed;
};

TEST_F(Dsv4Gpu, WarmedManifestWithDcpServesACompactBatteryWithoutCompiling) {
  // A second battery written independently of the serving one: the default configuration plus
  // decode context parallelism over 2 ranks (spec section 11's 8 keys and section 12.9's 2 DCP
  // pack keys), token counts log-uniform in [1, 8192], 3 layers' caches per compressor kind,
  // DCP packs for both ranks with and without row starts.
  Dsv4Config config = default_config();
  config.serving.dcp_world_size = 2;
  const AttentionKernels kernels(config);
  warm_from_scratch(kernels, 11);
  if (HasFatalFailure()) return;
  if (reference_backend_) reference_backend_->execute = false;  // dry run: count, do not run

  constexpr std::int64_t kMaxTokens = 8192;
  constexpr std::int64_t kLayers = 3;
  in::Random random(91);
  BatteryBuffers b;
  // Indexer-Q FP8, f32 cos/sin (the dtype the model's RoPE cache has).
  b.positions = in::make_tensor(DType::i64, {kMaxTokens});
  for (std::int64_t t = 0; t < kMaxTokens; ++t) b.positions.set<std::int64_t>(t, t % 65536);
  b.q = in::make_tensor(DType::bf16, {kMaxTokens, 64, 128});
  b.cos_sin = in::random_cos_sin(random, 65536, 64, 64, DType::f32);
  b.weights = in::make_tensor(DType::bf16, {kMaxTokens, 64});
  b.q_fp8 = in::make_tensor(DType::u8, {kMaxTokens, 64, 128});
  b.weights_out = in::make_tensor(DType::f32, {kMaxTokens, 64});
  // Dequant-gather: 8 requests of up to 2048 positions.
  constexpr std::int64_t kRequests = 8;
  constexpr std::int32_t kLongest = 2048;
  const std::vector<std::int32_t> full_lengths(kRequests, kLongest);
  for (const int block : {256, 64, 2}) {
    GatherCase c{.block_size = block, .seq_lens = full_lengths, .extra_pages = 1};
    b.gather_caches.push_back(make_gather_inputs(random, c));
  }
  b.out = in::make_tensor(DType::bf16, {kRequests, kLongest + 128, 512});
  b.seq_lens = in::make_tensor(DType::i32, {kRequests});
  b.gather_lens = in::make_tensor(DType::i32, {kRequests});
  // Compressors: 8192 tokens of 2 requests; each layer has its own state and cache.
  const std::vector<in::RequestChunk> requests = {{0, kMaxTokens / 2}, {100, kMaxTokens / 2}};
  const std::int64_t c4_pages = (in::count_boundaries(requests, 4) + 63) / 64 + 1;
  const std::int64_t c128_pages = (in::count_boundaries(requests, 128) + 1) / 2 + 1;
  b.c4_tokens = make_token_tensors(
      random, in::make_compressor_tokens(random, requests, 4, c4_pages * 64), 0, 0, 64);
  b.c128_tokens = make_token_tensors(
      random, in::make_compressor_tokens(random, requests, 128, c128_pages * 2), 0, 0, 64);
  for (std::int64_t layer = 0; layer < kLayers; ++layer) {
    b.c4_states.push_back(in::make_compressor_state(random, requests, 4, 1024, 8, 0, 0, 1));
    b.c128_states.push_back(in::make_compressor_state(random, requests, 8, 512, 128, 0, 0, 1));
    b.c4_caches.push_back(make_k_cache(CacheKind::ds_mla, 64, c4_pages, 0, 0));
    b.c128_caches.push_back(make_k_cache(CacheKind::ds_mla, 2, c128_pages, 0, 0));
  }
  b.compressed_kv = in::make_tensor(DType::f32, {kMaxTokens, 512});
  b.norm_weight = in::random_norm_weight(random, DType::bf16);
  // DCP pack: up to 64 decode rows over a 4096-wide local shard.
  b.logits = in::make_tensor(DType::f32, {64, 4096});
  b.topk_indices = in::make_tensor(DType::i32, {64, 512});
  for (std::int64_t i = 0; i < 64 * 512; ++i) {
    b.topk_indices.set<std::int32_t>(i, static_cast<std::int32_t>(random.uniform_int(-1, 4095)));
  }
  b.row_starts = in::make_tensor(DType::i32, {64});
  for (std::int64_t i = 0; i < 64; ++i) b.row_starts.set<std::int32_t>(i, 0);
  b.packed = in::make_tensor(DType::f32, {64, 512, 2});

  Placement device;
  auto put = [&device](const in::HostTensor& t) { return device.put(t); };
  const TensorRef positions = put(b.positions), q = put(b.q), cos_sin = put(b.cos_sin),
                  weights = put(b.weights), q_fp8 = put(b.q_fp8), weights_out = put(b.weights_out);
  const TensorRef out = put(b.out);
  std::vector<TensorRef> caches, tables;
  for (const GatherInputs& g : b.gather_caches) {
    caches.push_back(put(g.cache));
    tables.push_back(put(g.block_table));
  }
  auto token_refs = [&](const TokenTensors& t) {
    return std::vector<TensorRef>{put(t.token_to_req), put(t.positions), put(t.slot_mapping),
                                  put(t.kv_slot_mapping), put(t.cos_sin)};
  };
  const std::vector<TensorRef> c4_meta = token_refs(b.c4_tokens);
  const std::vector<TensorRef> c128_meta = token_refs(b.c128_tokens);
  std::vector<TensorRef> c4_state, c4_table, c4_cache, c128_state, c128_table, c128_cache;
  for (std::int64_t layer = 0; layer < kLayers; ++layer) {
    const auto l = static_cast<std::size_t>(layer);
    c4_state.push_back(put(b.c4_states[l].state));
    c4_table.push_back(put(b.c4_states[l].block_table));
    c4_cache.push_back(put(b.c4_caches[l].tensor));
    c128_state.push_back(put(b.c128_states[l].state));
    c128_table.push_back(put(b.c128_states[l].block_table));
    c128_cache.push_back(put(b.c128_caches[l].tensor));
  }
  const TensorRef compressed = put(b.compressed_kv), weight = put(b.norm_weight);
  const TensorRef logits = put(b.logits), topk = put(b.topk_indices), starts = put(b.row_starts),
                  packed = put(b.packed);

  // A prefix view: the first `count` entries of dim 0, the rest of the layout unchanged.
  auto prefix = [](TensorRef ref, std::int64_t count) {
    ref.desc.shape[0] = count;
    return ref;
  };
  // Per-call lengths (seq_lens / gather_lens), uploaded per call.
  std::deque<in::HostTensor> call_tensors;

  const std::vector<KernelCounters> before = all_counters();
  std::map<std::string, int> calls;
  constexpr int kCalls = 120;
  for (int call = 0; call < kCalls; ++call) {
    // Token counts log-uniform in [1, 8192]: decode and prefill alike.
    const auto tokens = static_cast<std::int64_t>(
        std::clamp(std::exp2(random.uniform(0.0f, 13.0f)), 1.0f, static_cast<float>(kMaxTokens)));
    const auto layer = static_cast<std::size_t>(random.uniform_int(0, kLayers - 1));
    const std::int64_t kind = random.uniform_int(0, 5);
    SCOPED_TRACE("battery call " + std::to_string(call) + ", kind " + std::to_string(kind) + ", " +
                 std::to_string(tokens) + " tokens, layer " + std::to_string(layer));
    try {
      if (kind == 0) {
        kernels.run(IndexerQFp8Args{prefix(positions, tokens), prefix(q, tokens), cos_sin,
                                    prefix(weights, tokens), 0.011048543f, prefix(q_fp8, tokens),
                                    prefix(weights_out, tokens)});
        ++calls["indexer_q_fp8"];
      } else if (kind == 1) {
        // One prefill's two gathers: compressed (C4 or C128 cache), then the window.
        const std::int64_t reqs = random.uniform_int(1, kRequests);
        std::vector<std::int32_t> lengths, windows;
        std::int32_t longest_compressed = 0;
        const bool c128 = random.chance(0.5);
        std::vector<std::int32_t> compressed_lengths;
        for (std::int64_t r = 0; r < reqs; ++r) {
          lengths.push_back(static_cast<std::int32_t>(random.uniform_int(1, kLongest)));
          windows.push_back(std::min(lengths.back(), 128));
          compressed_lengths.push_back(lengths.back() / (c128 ? 128 : 4));
          longest_compressed = std::max(longest_compressed, compressed_lengths.back());
        }
        const in::HostTensor& seq =
            call_tensors.emplace_back(in::tensor_of(std::span<const std::int32_t>(lengths)));
        const in::HostTensor& window =
            call_tensors.emplace_back(in::tensor_of(std::span<const std::int32_t>(windows)));
        const in::HostTensor& compressed_seq = call_tensors.emplace_back(
            in::tensor_of(std::span<const std::int32_t>(compressed_lengths)));
        TensorRef workspace = prefix(out, reqs);
        workspace.desc.shape[1] = longest_compressed + 128;
        DequantGatherArgs first;
        first.out = workspace;
        first.k_cache = caches[c128 ? 2 : 1];
        first.seq_lens = put(compressed_seq);
        first.block_table = prefix(tables[c128 ? 2 : 1], reqs);
        first.offset = 0;
        kernels.run(first);
        DequantGatherArgs second;
        second.out = workspace;
        second.k_cache = caches[0];
        second.seq_lens = put(seq);
        second.gather_lens = put(window);
        second.block_table = prefix(tables[0], reqs);
        second.offset = longest_compressed;
        kernels.run(second);
        ++calls["dequant_gather"];
      } else if (kind == 2 || kind == 3) {
        CompressorCall compressor;
        compressor.compress_ratio = 4;
        C4StoreArgs& a = compressor.c4;
        a.state_cache = c4_state[layer];
        a.token_to_req = prefix(c4_meta[0], tokens);
        a.positions = prefix(c4_meta[1], tokens);
        a.slot_mapping = prefix(c4_meta[2], tokens);
        a.block_table = c4_table[layer];
        a.rms_norm_weight = weight;
        a.cos_sin_cache = c4_meta[4];
        a.k_cache = c4_cache[layer];
        a.kv_slot_mapping = prefix(c4_meta[3], tokens);
        kernels.run(compressor);
        ++calls["c4"];
      } else if (kind == 4) {
        CompressorCall compressor;
        compressor.compress_ratio = 128;
        C128CompressArgs& a = compressor.c128_compress;
        a.state_cache = c128_state[layer];
        a.token_to_req = prefix(c128_meta[0], tokens);
        a.positions = prefix(c128_meta[1], tokens);
        a.slot_mapping = prefix(c128_meta[2], tokens);
        a.block_table = c128_table[layer];
        a.compressed_kv = prefix(compressed, tokens);
        C128StoreArgs& s = compressor.c128_store;
        s.compressed_kv = prefix(compressed, tokens);
        s.positions = prefix(c128_meta[1], tokens);
        s.slot_mapping = prefix(c128_meta[2], tokens);
        s.rms_norm_weight = weight;
        s.cos_sin_cache = c128_meta[4];
        s.k_cache = c128_cache[layer];
        s.kv_slot_mapping = prefix(c128_meta[3], tokens);
        kernels.run(compressor);
        ++calls["c128"];
      } else {
        const std::int64_t rows = random.uniform_int(1, 64);
        DcpPackArgs a;
        a.logits = prefix(logits, rows);
        a.topk_indices = prefix(topk, rows);
        if (random.chance(0.5)) a.row_starts = prefix(starts, rows);
        a.packed = prefix(packed, rows);
        a.dcp_rank = static_cast<int>(random.uniform_int(0, 1));
        a.dcp_world_size = 2;
        a.cp_interleave = 1;
        kernels.run(a);
        ++calls["dcp_pack"];
      }
    } catch (const std::exception& error) {
      FAIL() << "a warmed call failed (a RuntimeJitError means the warmup missed a key the "
                "runtime reaches): "
             << error.what();
    }
  }
  finish();
  const std::uint64_t hits = expect_no_runtime_jit(before);
  EXPECT_GE(hits, static_cast<std::uint64_t>(kCalls)) << "the battery launched too little";
  for (const char* kind : {"indexer_q_fp8", "dequant_gather", "c4", "c128", "dcp_pack"}) {
    EXPECT_GT(calls[kind], 0) << "the battery never called " << kind;
  }
}

}  // namespace
}  // namespace zerojit::dsv4
