// The serving battery's call builder: for each step, the kernel calls the attention layers make,
// in the order vLLM's DSv4 attention makes them, with descriptors shaped exactly as the
// runtime's. The order (and what each call's arguments are) is knowledge of the engine; the
// routing to kernels is the family's (family.hpp).
#include <algorithm>
#include <cmath>

#include "dsv4/battery/workspace.hpp"

namespace zerojit::dsv4 {

// The calls this configuration makes: a kernel's call when its gate runs it (the runtime asks
// the same gates).
void BatteryWorkspace::State::choose_calls() {
  indexer = kernels->runs<IndexerQFp8Kernel>() || kernels->runs<IndexerQMxFp4Kernel>();
  c4 = kernels->runs<C4StoreKernel>() || kernels->runs<C4StoreFullKernel>();
  c128 = kernels->runs<C128CompressKernel>();
  gathers = kernels->runs<DequantGatherKernel>();
  dcp = kernels->runs<DcpPackKernel>();
}

// What one step's calls share: its sizes, the per-prefill lengths, the DCP logits layout and the
// descriptors every call uses.
struct BatteryWorkspace::State::StepPlan {
  std::int64_t num_reqs = 0;
  std::int64_t tokens = 0;
  int decodes = 0;
  int prefills = 0;
  std::int64_t decode_tokens = 0;
  std::int64_t prefill_tokens = 0;
  int world = 1;
  std::vector<std::int32_t> seq_host, c4_host, c128_host, gather_host;
  std::int64_t max_c4 = 0, max_c128 = 0, max_gather = 0;
  std::int64_t decode_columns = 1;
  std::vector<std::int64_t> segment_width, segment_start;
  std::int64_t prefill_columns = 0;
  std::int64_t boundaries_c4 = 0, boundaries_c128 = 0;
  TensorRef positions_ref, requests_ref, cos_sin_ref, kv_table_prefill;
  std::optional<TensorRef> scale_ref;
  double metadata_bytes = 0;
  double full_row_bytes = 0;
  std::mt19937_64 rank_random;
};

BatteryWorkspace::State::StepPlan BatteryWorkspace::State::plan_step(
    const ServingStep& step) const {
  const ModelConfig& model = config.model;
  StepPlan sp;
  sp.num_reqs = static_cast<std::int64_t>(step.requests.size());
  sp.tokens = step.num_tokens();
  sp.decodes = step.num_decodes();
  sp.prefills = step.num_prefills();
  sp.decode_tokens = step.num_decode_tokens();
  sp.prefill_tokens = step.num_prefill_tokens();
  if (sp.tokens > max_tokens || sp.num_reqs > options.max_num_seqs ||
      sp.prefills > options.max_prefills) {
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
  sp.world = config.serving.dcp_world_size;

  // Per-prefill lengths (shapes need their maxima, the data needs them all).
  for (const auto& r : step.requests) {
    if (!r.prefill) continue;
    const std::int64_t gather = std::min(r.seq_len(), r.query_len + model.sliding_window - 1);
    sp.seq_host.push_back(static_cast<std::int32_t>(r.seq_len()));
    sp.c4_host.push_back(static_cast<std::int32_t>(r.seq_len() / kCsaCompressRatio));
    sp.c128_host.push_back(static_cast<std::int32_t>(r.seq_len() / kHcaCompressRatio));
    sp.gather_host.push_back(static_cast<std::int32_t>(gather));
    sp.max_c4 = std::max(sp.max_c4, r.seq_len() / kCsaCompressRatio);
    sp.max_c128 = std::max(sp.max_c128, r.seq_len() / kHcaCompressRatio);
    sp.max_gather = std::max(sp.max_gather, gather);
  }
  // DCP logits widths: a decode row spans the rank's share of the compressed positions; a
  // prefill row one segment per chunk (at its row start), capped to bound the buffer.
  for (const auto& r : step.requests) {
    const std::int64_t local =
        std::max<std::int64_t>(1, ceil_div(r.seq_len() / kCsaCompressRatio, sp.world));
    if (!r.prefill) {
      sp.decode_columns = std::max(sp.decode_columns, local);
    } else {
      sp.segment_width.push_back(local);
      sp.prefill_columns += local;
    }
  }
  if (sp.prefill_columns > kMaxPrefillLogitColumns) {
    // Scaled down so that the sum stays within the cap even after rounding each up to 1.
    const std::int64_t budget =
        kMaxPrefillLogitColumns - static_cast<std::int64_t>(sp.segment_width.size());
    const std::int64_t total = sp.prefill_columns;
    sp.prefill_columns = 0;
    for (auto& width : sp.segment_width) {
      width = std::max<std::int64_t>(1, width * budget / total);
      sp.prefill_columns += width;
    }
  }
  for (std::int64_t start = 0; const auto width : sp.segment_width) {
    sp.segment_start.push_back(start);
    start += width;
  }

  for (const auto& r : step.requests) {
    sp.boundaries_c4 += boundaries(r.context_len, r.seq_len(), kCsaCompressRatio);
    sp.boundaries_c128 += boundaries(r.context_len, r.seq_len(), kHcaCompressRatio);
  }

  // Descriptors shared by the calls.
  sp.positions_ref = ref(positions, DType::i64, {sp.tokens});
  sp.requests_ref = ref(token_to_req, DType::i32, {sp.tokens});
  sp.cos_sin_ref = ref(cos_sin, DType::f32, {max_len, 64});
  sp.kv_table_prefill = strided(static_cast<std::int32_t*>(kv_table) + sp.decodes * kv_width,
                                DType::i32, {sp.prefills, kv_width}, {kv_width, 1});
  sp.scale_ref =
      fp8_scale ? std::optional<TensorRef>(ref(fp8_scale, DType::f32, {1})) : std::nullopt;
  sp.metadata_bytes = static_cast<double>(sp.tokens) * (8 + 4 + 8 + 8);
  sp.full_row_bytes = full_cache ? (full_fp8 ? 512.0 : 1024.0) : 584.0;
  sp.rank_random.seed(options.seed + static_cast<std::uint64_t>(step.index));
  return sp;
}

// Uploads the step's metadata (positions, slots, lengths, indices): valid values only, so no
// kernel reads or writes out of range.
void BatteryWorkspace::State::upload_step(const ServingStep& step, const StepPlan& sp) {
  BatteryMemory& mem = *memory;
  std::vector<std::int64_t> positions_host;
  std::vector<std::int32_t> request_host;
  positions_host.reserve(static_cast<std::size_t>(sp.tokens));
  request_host.reserve(static_cast<std::size_t>(sp.tokens));
  for (std::int64_t r = 0; r < sp.num_reqs; ++r) {
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
    std::vector<std::int64_t> state(static_cast<std::size_t>(sp.tokens));
    std::vector<std::int64_t> kv(static_cast<std::size_t>(sp.tokens));
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
  if (gathers && sp.prefills > 0) {
    upload_vector(mem, seq_lens, sp.seq_host);
    upload_vector(mem, lens_c4, sp.c4_host);
    upload_vector(mem, lens_c128, sp.c128_host);
    upload_vector(mem, gather_lens, sp.gather_host);
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
    if (sp.decode_tokens > 0) {
      fill_topk(
          sp.decode_tokens, [&](std::int64_t) { return sp.decode_columns; }, topk_decode);
    }
    if (sp.prefill_tokens > 0) {
      std::vector<std::int32_t> starts;
      std::vector<std::int64_t> widths;
      for (std::size_t i = 0, prefill = 0; i < step.requests.size(); ++i) {
        const auto& r = step.requests[i];
        if (!r.prefill) continue;
        for (std::int64_t t = 0; t < r.query_len; ++t) {
          starts.push_back(static_cast<std::int32_t>(sp.segment_start[prefill]));
          widths.push_back(sp.segment_width[prefill]);
        }
        ++prefill;
      }
      fill_topk(
          sp.prefill_tokens,
          [&](std::int64_t row) { return widths[static_cast<std::size_t>(row)]; }, topk_prefill);
      upload_vector(mem, row_starts, starts);
    }
  }
}

// One builder per kind of call: the call's arguments over the workspace's buffers, shaped for
// this step, and the bytes each kernel of the call moves.
struct BatteryWorkspace::State::CallBuilders {
  static void add_compressor_call(const State& ws, StepPlan& sp, const Layer& layer, bool is_c4,
                                  std::vector<AttentionCall>& out) {
    const ModelConfig& model = ws.config.model;
    AttentionCall call;
    call.kind = "compressor";
    call.layer = layer.kind;
    call.layer_index = layer.index;
    CompressorCall c;
    const int rows = is_c4 ? ws.rows_c4 : ws.rows_c128;
    const std::int64_t stride = is_c4 ? ws.stride_c4 : ws.stride_c128;
    TensorRef cache = ws.full_cache
                          ? ws.ref(layer.compressed_full, ws.full_fp8 ? DType::e4m3 : DType::bf16,
                                   {ws.kv_pool, rows, kHead})
                          : ws.strided(layer.compressed_ds_mla, DType::u8,
                                       {ws.kv_pool, rows, kDsMlaRow}, {stride, kDsMlaRow, 1});
    const TensorRef weight = ws.ref(layer.norm_weight, ws.norm_dtype, {kHead});
    const auto eps = static_cast<float>(model.rms_norm_eps);
    const double weight_bytes = kHead * dtype_size_bytes(ws.norm_dtype);
    if (is_c4) {
      c.compress_ratio = kCsaCompressRatio;
      C4StoreArgs& a = c.c4;
      a.compress_ratio = kCsaCompressRatio;
      a.state_cache =
          ws.ref(layer.state_cache, DType::f32, {ws.state_pool, kC4StateBlockSize, 4 * kHead});
      a.token_to_req = sp.requests_ref;
      a.positions = sp.positions_ref;
      a.slot_mapping = ws.ref(ws.state_slots_c4, DType::i64, {sp.tokens});
      a.block_table = ws.ref(ws.state_table_c4, DType::i32, {sp.num_reqs, ws.c4_state_width});
      a.rms_norm_weight = weight;
      a.eps = eps;
      a.cos_sin_cache = sp.cos_sin_ref;
      a.k_cache = cache;
      a.kv_slot_mapping = ws.ref(ws.kv_slots_c4, DType::i64, {sp.tokens});
      if (ws.full_fp8) a.fp8_scale = sp.scale_ref;
      const std::string_view kernel =
          ws.full_cache ? C4StoreFullKernel::instance().name() : C4StoreKernel::instance().name();
      call.traffic.push_back({kernel, sp.metadata_bytes + weight_bytes +
                                          static_cast<double>(sp.boundaries_c4) *
                                              (8.0 * 2 * kHead * 4 + 64 * 4 + sp.full_row_bytes)});
    } else {
      c.compress_ratio = kHcaCompressRatio;
      C128CompressArgs& s1 = c.c128_compress;
      s1.state_cache =
          ws.ref(layer.state_cache, DType::f32, {ws.state_pool, kC128StateBlockSize, 2 * kHead});
      s1.token_to_req = sp.requests_ref;
      s1.positions = sp.positions_ref;
      s1.slot_mapping = ws.ref(ws.state_slots_c128, DType::i64, {sp.tokens});
      s1.block_table = ws.ref(ws.state_table_c128, DType::i32, {sp.num_reqs, ws.c128_state_width});
      s1.compressed_kv = ws.ref(ws.compressed_kv, DType::f32, {sp.tokens, kHead});
      C128StoreArgs& s2 = c.c128_store;
      s2.compressed_kv = s1.compressed_kv;
      s2.positions = sp.positions_ref;
      s2.slot_mapping = s1.slot_mapping;
      s2.rms_norm_weight = weight;
      s2.eps = eps;
      s2.cos_sin_cache = sp.cos_sin_ref;
      s2.k_cache = cache;
      s2.kv_slot_mapping = ws.ref(ws.kv_slots_c128, DType::i64, {sp.tokens});
      if (ws.full_fp8) s2.fp8_scale = sp.scale_ref;
      const double active = static_cast<double>(sp.boundaries_c128);
      call.traffic.push_back({C128CompressKernel::instance().name(),
                              static_cast<double>(sp.tokens) * (8 + 4 + 8) +
                                  active * (128.0 * 2 * kHead * 4 + kHead * 4)});
      const std::string_view store = ws.full_cache ? C128StoreFullKernel::instance().name()
                                                   : C128StoreKernel::instance().name();
      call.traffic.push_back({store, static_cast<double>(sp.tokens) * (8 + 8 + 8) + weight_bytes +
                                         active * (kHead * 4 + 64 * 4 + sp.full_row_bytes)});
    }
    call.args = std::move(c);
    out.push_back(std::move(call));
  }

  static void add_gather_call(const State& ws, StepPlan& sp, const Layer& layer, bool window,
                              std::int64_t compressed_rows, int ratio,
                              std::vector<AttentionCall>& out) {
    AttentionCall call;
    call.kind = window ? "gather window" : "gather compressed";
    call.layer = layer.kind;
    call.layer_index = layer.index;
    DequantGatherArgs a;
    const std::int64_t rows_out = compressed_rows + sp.max_gather;
    a.out = ws.ref(ws.gather_out, DType::bf16, {sp.prefills, rows_out, kHead});
    a.block_table = sp.kv_table_prefill;
    double rows_moved = 0;
    if (window) {
      a.k_cache = ws.strided(layer.window_cache, DType::u8, {ws.kv_pool, ws.block_size, kDsMlaRow},
                             {ws.stride_window, kDsMlaRow, 1});
      a.seq_lens = ws.ref(ws.seq_lens, DType::i32, {sp.prefills});
      a.gather_lens = ws.ref(ws.gather_lens, DType::i32, {sp.prefills});
      a.offset = compressed_rows;
      for (const auto g : sp.gather_host) rows_moved += g;
    } else {
      const bool is_c4 = ratio == kCsaCompressRatio;
      a.k_cache = ws.strided(layer.compressed_ds_mla, DType::u8,
                             {ws.kv_pool, is_c4 ? ws.rows_c4 : ws.rows_c128, kDsMlaRow},
                             {is_c4 ? ws.stride_c4 : ws.stride_c128, kDsMlaRow, 1});
      a.seq_lens = ws.ref(is_c4 ? ws.lens_c4 : ws.lens_c128, DType::i32, {sp.prefills});
      a.offset = 0;
      for (const auto l : (is_c4 ? sp.c4_host : sp.c128_host)) rows_moved += l;
    }
    call.traffic.push_back({DequantGatherKernel::instance().name(),
                            rows_moved * (kDsMlaRow + 2 * kHead) + sp.prefills * 8.0});
    call.args = std::move(a);
    out.push_back(std::move(call));
  }

  static void add_dcp_pack_call(const State& ws, StepPlan& sp, const Layer& layer, bool prefill,
                                std::vector<AttentionCall>& out) {
    AttentionCall call;
    call.kind = prefill ? "dcp-pack prefill" : "dcp-pack decode";
    call.layer = layer.kind;
    call.layer_index = layer.index;
    DcpPackArgs a;
    const std::int64_t rows = prefill ? sp.prefill_tokens : sp.decode_tokens;
    const std::int64_t columns = prefill ? sp.prefill_columns : sp.decode_columns;
    a.logits = ws.ref(ws.logits, DType::f32, {rows, columns});
    a.topk_indices =
        ws.ref(prefill ? ws.topk_prefill : ws.topk_decode, DType::i32, {rows, ws.topk});
    if (prefill) a.row_starts = ws.ref(ws.row_starts, DType::i32, {rows});
    a.packed = ws.ref(ws.packed, DType::f32, {rows, ws.topk, 2});
    a.dcp_world_size = sp.world;
    a.cp_interleave = ws.config.serving.cp_interleave;
    a.dcp_rank = std::uniform_int_distribution<int>(0, sp.world - 1)(sp.rank_random);
    call.traffic.push_back(
        {DcpPackKernel::instance().name(),
         static_cast<double>(rows) * (ws.topk * (4 + 4 + 8) + (prefill ? 4 : 0))});
    call.args = std::move(a);
    out.push_back(std::move(call));
  }

  static void add_indexer_q_call(const State& ws, StepPlan& sp, const Layer& layer,
                                 std::vector<AttentionCall>& out) {
    AttentionCall call;
    call.kind = "indexer-q";
    call.layer = layer.kind;
    call.layer_index = layer.index;
    // The inputs both variants take, set on whichever the configuration runs.
    const auto set_inputs = [&](auto& args) {
      args.positions = sp.positions_ref;
      args.q = ws.ref(ws.q, DType::bf16, {sp.tokens, ws.heads, ws.head_dim});
      args.cos_sin_cache = ws.ref(ws.cos_sin, DType::f32, {ws.max_len, ws.rope_dim});
      args.weights = ws.ref(ws.weights, DType::bf16, {sp.tokens, ws.heads});
      args.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(ws.head_dim)) /
                                      std::sqrt(static_cast<double>(ws.heads)));
    };
    const double elements = static_cast<double>(sp.tokens) * ws.heads * ws.head_dim;
    double bytes = static_cast<double>(sp.tokens) * (8 + ws.rope_dim * 4) + elements * 2 +
                   static_cast<double>(sp.tokens) * ws.heads * (2 + 4);
    const TensorRef weights_out_ref = ws.ref(ws.weights_out, DType::f32, {sp.tokens, ws.heads});
    if (ws.config.serving.indexer_dtype == IndexerDtype::fp8) {
      IndexerQFp8Args args;
      set_inputs(args);
      args.q_fp8 = ws.ref(ws.q_out, DType::u8, {sp.tokens, ws.heads, ws.head_dim});
      args.weights_out = weights_out_ref;
      bytes += elements;
      call.traffic.push_back({IndexerQFp8Kernel::instance().name(), bytes});
      call.args = args;
    } else {
      IndexerQMxFp4Args args;
      set_inputs(args);
      args.q_packed = ws.ref(ws.q_out, DType::u8, {sp.tokens, ws.heads, ws.head_dim / 2});
      args.q_scale = ws.ref(ws.q_scale, DType::u8, {sp.tokens, ws.heads, ws.head_dim / 32});
      args.weights_out = weights_out_ref;
      bytes += elements / 2 + elements / 32;
      call.traffic.push_back({IndexerQMxFp4Kernel::instance().name(), bytes});
      call.args = args;
    }
    out.push_back(std::move(call));
  }
};

// Layer by layer, each kind's calls in the order its attention layer makes them.
std::vector<AttentionCall> BatteryWorkspace::State::calls(const ServingStep& step) {
  std::vector<AttentionCall> out;
  if (block_size <= 0 || step.requests.empty()) return out;
  StepPlan sp = plan_step(step);
  if (memory->holds_data()) upload_step(step, sp);
  for (const Layer& layer : layers) {
    switch (layer.kind) {
      case LayerKind::csa:
        if (c4) CallBuilders::add_compressor_call(*this, sp, layer, true, out);
        if (indexer) CallBuilders::add_indexer_q_call(*this, sp, layer, out);
        if (dcp && sp.decode_tokens > 0)
          CallBuilders::add_dcp_pack_call(*this, sp, layer, false, out);
        if (dcp && sp.prefill_tokens > 0)
          CallBuilders::add_dcp_pack_call(*this, sp, layer, true, out);
        if (gathers && sp.prefills > 0) {
          CallBuilders::add_gather_call(*this, sp, layer, false, sp.max_c4, kCsaCompressRatio, out);
          CallBuilders::add_gather_call(*this, sp, layer, true, sp.max_c4, kCsaCompressRatio, out);
        }
        break;
      case LayerKind::hca:
        if (c128) CallBuilders::add_compressor_call(*this, sp, layer, false, out);
        if (gathers && sp.prefills > 0) {
          CallBuilders::add_gather_call(*this, sp, layer, false, sp.max_c128, kHcaCompressRatio,
                                        out);
          CallBuilders::add_gather_call(*this, sp, layer, true, sp.max_c128, kHcaCompressRatio,
                                        out);
        }
        break;
      case LayerKind::sliding_window:
        if (gathers && sp.prefills > 0)
          CallBuilders::add_gather_call(*this, sp, layer, true, 0, 0, out);
        break;
    }
  }
  return out;
}

}  // namespace zerojit::dsv4
