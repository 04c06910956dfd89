// The workspace: the model's caches and the step buffers for a few layers of each kind,
// allocated once for the largest step and, with data-holding memory, filled with valid data.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "dsv4/battery/workspace.hpp"

namespace zerojit::dsv4 {

void BatteryWorkspace::State::setup() {
  const ModelConfig& model = config.model;
  choose_calls();
  full_cache = config.serving.kv_cache_dtype != KvCacheDtype::fp8_ds_mla;
  full_fp8 = config.serving.kv_cache_dtype == KvCacheDtype::fp8_e4m3;
  norm_dtype = to_dtype(model.dtype);
  kinds = layer_kinds(model);

  max_tokens = config.serving.max_num_batched_tokens;
  max_len = options.max_model_len;
  block_size = config.serving.block_size;
  if (block_size <= 0) return;  // no KV cache: no kernel runs, nothing to allocate
  size_geometry();
  allocate_step_buffers();
  allocate_layers();
  make_static_tables();
  if (memory->holds_data()) fill_static();
}

// The pages, pools and table widths of every cache, and the model's indexer geometry.
void BatteryWorkspace::State::size_geometry() {
  const ModelConfig& model = config.model;
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
}

// The buffers of one step, sized for the largest, for the calls this configuration makes.
void BatteryWorkspace::State::allocate_step_buffers() {
  const ModelConfig& model = config.model;
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
}

// Each kind's caches for `layers_per_kind` layers.
void BatteryWorkspace::State::allocate_layers() {
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
}

// Static tables: each request's pages distinct while the pool lasts; state blocks random.
void BatteryWorkspace::State::make_static_tables() {
  const auto pool = static_cast<std::size_t>(kv_pool);
  const auto seqs = static_cast<std::size_t>(options.max_num_seqs);
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

}  // namespace zerojit::dsv4
