// The serving battery on the CPU: its calls plan through the kernels' own checks, its
// descriptors stay inside the buffers it allocated, and the metadata it uploads (positions,
// slots, block tables, lengths, indices) only addresses pages, rows and blocks that exist, so
// `zerojit run` on a GPU never reads or writes out of range.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "dsv4/battery/battery.hpp"

namespace zerojit::dsv4 {
namespace {

// Host buffers standing in for device memory: uploads are copies, so the test can read back
// every value the battery would give a kernel.
class HostMemory final : public BatteryMemory {
 public:
  Device device() const override { return Device::cuda(0); }
  bool holds_data() const override { return true; }
  void* allocate(std::size_t bytes) override {
    buffers_.push_back(std::make_unique<unsigned char[]>(bytes + 256));
    auto address = reinterpret_cast<std::uintptr_t>(buffers_.back().get());
    address = (address + 255) / 256 * 256;  // as aligned as cuMemAlloc's
    regions_.push_back({address, bytes});
    allocated_ += bytes;
    return reinterpret_cast<void*>(address);
  }
  void upload(void* destination, const void* source, std::size_t bytes) override {
    EXPECT_TRUE(inside(reinterpret_cast<std::uintptr_t>(destination), bytes))
        << "upload of " << bytes << " bytes";
    std::memcpy(destination, source, bytes);
  }
  std::size_t allocated_bytes() const override { return allocated_; }

  bool inside(std::uintptr_t begin, std::size_t bytes) const {
    for (const auto& [base, size] : regions_) {
      if (begin >= base && begin + bytes <= base + size) return true;
    }
    return false;
  }
  // Every element the descriptor can address lies in one allocation.
  bool covers(const TensorRef& ref) const {
    const TensorDesc& d = ref.desc;
    if (d.numel() == 0) return true;
    std::int64_t last = 0;
    for (int i = 0; i < d.ndim; ++i) last += (d.size(i) - 1) * d.stride(i);
    const auto bytes = static_cast<std::size_t>((last + 1) * dtype_size_bytes(d.dtype));
    return inside(reinterpret_cast<std::uintptr_t>(ref.data), bytes);
  }

 private:
  std::vector<std::unique_ptr<unsigned char[]>> buffers_;
  std::vector<std::pair<std::uintptr_t, std::size_t>> regions_;
  std::size_t allocated_ = 0;
};

template <class T>
T at(const TensorRef& ref, std::int64_t index) {
  return static_cast<const T*>(ref.data)[index];
}

// The state-cache blocks a compressor token reads (rows first .. p), as the kernels address them.
void check_state_rows(const TensorRef& table, const TensorRef& state, std::int32_t request,
                      std::int64_t first, std::int64_t p, const std::string& where) {
  const std::int64_t rows = state.desc.size(1);
  for (std::int64_t pos = std::max<std::int64_t>(first, 0); pos <= p; ++pos) {
    const std::int64_t column = pos / rows;
    ASSERT_LT(column, table.desc.size(1)) << where;
    const std::int32_t block = at<std::int32_t>(table, request * table.desc.stride(0) + column);
    ASSERT_GE(block, 0) << where;
    ASSERT_LT(block, state.desc.size(0)) << where;
  }
}

void check_kv_slot(std::int64_t slot, const TensorRef& cache, const std::string& where) {
  ASSERT_GE(slot, 0) << where;
  ASSERT_LT(slot / cache.desc.size(1), cache.desc.size(0)) << where;
}

// The inputs of an indexer-Q call (FP8 or MXFP4: the variants share them).
template <class Args>
void check_indexer_inputs(const HostMemory& memory, const Args& in, const std::string& where) {
  for (const TensorRef* ref : {&in.positions, &in.q, &in.cos_sin_cache, &in.weights}) {
    ASSERT_TRUE(memory.covers(*ref)) << where << ": " << to_string(ref->desc);
  }
  for (std::int64_t t = 0; t < in.positions.desc.size(0); ++t) {
    const auto p = at<std::int64_t>(in.positions, t);
    ASSERT_GE(p, 0) << where;
    ASSERT_LT(p, in.cos_sin_cache.desc.size(0)) << where;
  }
}

void check_call(const HostMemory& memory, const AttentionCall& call, const std::string& where) {
  if (const auto* fp8 = std::get_if<IndexerQFp8Args>(&call.args)) {
    check_indexer_inputs(memory, *fp8, where);
  } else if (const auto* mxfp4 = std::get_if<IndexerQMxFp4Args>(&call.args)) {
    check_indexer_inputs(memory, *mxfp4, where);
  } else if (const auto* compressor = std::get_if<CompressorCall>(&call.args)) {
    if (compressor->compress_ratio == 4) {
      const C4StoreArgs& a = compressor->c4;
      for (const TensorRef* ref :
           {&a.state_cache, &a.token_to_req, &a.positions, &a.slot_mapping, &a.block_table,
            &a.rms_norm_weight, &a.cos_sin_cache, &a.k_cache, &a.kv_slot_mapping}) {
        ASSERT_TRUE(memory.covers(*ref)) << where << ": " << to_string(ref->desc);
      }
      for (std::int64_t t = 0; t < a.slot_mapping.desc.size(0); ++t) {
        const auto p = at<std::int64_t>(a.positions, t);
        const auto request = at<std::int32_t>(a.token_to_req, t);
        ASSERT_GE(at<std::int64_t>(a.slot_mapping, t), 0) << where;
        ASSERT_GE(request, 0) << where;
        ASSERT_LT(request, a.block_table.desc.size(0)) << where;
        const auto kv = at<std::int64_t>(a.kv_slot_mapping, t);
        if ((p + 1) % 4 != 0) {
          EXPECT_EQ(kv, -1) << where;
          continue;
        }
        check_kv_slot(kv, a.k_cache, where);
        check_state_rows(a.block_table, a.state_cache, request, p - 7, p, where);
        ASSERT_LT(p, a.cos_sin_cache.desc.size(0)) << where;
      }
    } else {
      const C128CompressArgs& s1 = compressor->c128_compress;
      const C128StoreArgs& s2 = compressor->c128_store;
      for (const TensorRef* ref :
           {&s1.state_cache, &s1.token_to_req, &s1.positions, &s1.slot_mapping, &s1.block_table,
            &s1.compressed_kv, &s2.rms_norm_weight, &s2.cos_sin_cache, &s2.k_cache,
            &s2.kv_slot_mapping}) {
        ASSERT_TRUE(memory.covers(*ref)) << where << ": " << to_string(ref->desc);
      }
      for (std::int64_t t = 0; t < s1.slot_mapping.desc.size(0); ++t) {
        const auto p = at<std::int64_t>(s1.positions, t);
        const auto request = at<std::int32_t>(s1.token_to_req, t);
        ASSERT_LT(request, s1.block_table.desc.size(0)) << where;
        if ((p + 1) % 128 != 0) continue;
        check_state_rows(s1.block_table, s1.state_cache, request, p - 127, p, where);
        check_kv_slot(at<std::int64_t>(s2.kv_slot_mapping, t), s2.k_cache, where);
      }
    }
  } else if (const auto* gather = std::get_if<DequantGatherArgs>(&call.args)) {
    for (const TensorRef* ref :
         {&gather->out, &gather->k_cache, &gather->seq_lens, &gather->block_table}) {
      ASSERT_TRUE(memory.covers(*ref)) << where << ": " << to_string(ref->desc);
    }
    const std::int64_t rows = gather->k_cache.desc.size(1);
    for (std::int64_t r = 0; r < gather->out.desc.size(0); ++r) {
      const auto length = at<std::int32_t>(gather->seq_lens, r);
      const std::int32_t count =
          gather->gather_lens ? at<std::int32_t>(*gather->gather_lens, r) : length;
      ASSERT_GE(count, 0) << where;
      ASSERT_LE(count, length) << where;
      ASSERT_LE(gather->offset + count, gather->out.desc.size(1)) << where;
      for (std::int64_t pos = length - count; pos < length; ++pos) {
        ASSERT_LT(pos / rows, gather->block_table.desc.size(1)) << where;
        const auto page = at<std::int32_t>(gather->block_table,
                                           r * gather->block_table.desc.stride(0) + pos / rows);
        ASSERT_GE(page, 0) << where;
        ASSERT_LT(page, gather->k_cache.desc.size(0)) << where;
      }
    }
  } else if (const auto* pack = std::get_if<DcpPackArgs>(&call.args)) {
    for (const TensorRef* ref : {&pack->logits, &pack->topk_indices, &pack->packed}) {
      ASSERT_TRUE(memory.covers(*ref)) << where << ": " << to_string(ref->desc);
    }
    const std::int64_t columns = pack->logits.desc.size(1);
    for (std::int64_t r = 0; r < pack->logits.desc.size(0); ++r) {
      const std::int32_t start = pack->row_starts ? at<std::int32_t>(*pack->row_starts, r) : 0;
      for (std::int64_t c = 0; c < pack->topk_indices.desc.size(1); ++c) {
        const auto local =
            at<std::int32_t>(pack->topk_indices, r * pack->topk_indices.desc.size(1) + c);
        ASSERT_GE(local, -1) << where;
        ASSERT_LT(local + start, columns) << where;
      }
    }
  }
}

void check_battery(Dsv4Config config, const std::string& name) {
  config.serving.max_num_batched_tokens = 1024;  // still past the indexer's coarsening at 512
  const AttentionKernels kernels(config);
  BatteryOptions options;
  options.seed = 7;
  options.max_model_len = 8192;
  options.max_num_seqs = 16;
  options.kv_pool_blocks = 64;
  options.state_pool_blocks = 64;
  HostMemory memory;
  BatteryWorkspace workspace(kernels, options, memory);
  StepGenerator steps(config, options);
  std::size_t calls = 0;
  for (int i = 0; i < 300; ++i) {
    const ServingStep step = steps.next();
    ASSERT_GE(step.num_tokens(), 1);
    ASSERT_LE(step.num_tokens(), 1024);
    for (const AttentionCall& call : workspace.calls(step)) {
      const std::string where = name + ", " + step.summary() + ", " + std::string(call.kind) +
                                " of a " + std::string(to_string(call.layer)) + " layer";
      ASSERT_NO_THROW(plan_call(kernels, call)) << where;
      check_call(memory, call, where);
      if (::testing::Test::HasFatalFailure()) return;
      ++calls;
    }
  }
  EXPECT_GT(calls, 300u) << name;
}

TEST(Dsv4Battery, FlashDefaultAddressesOnlyWhatExists) { check_battery(default_config(), "flash"); }

TEST(Dsv4Battery, OtherConfigurationsAddressOnlyWhatExists) {
  Dsv4Config pro{dsv4_pro(), ServingConfig{}};
  check_battery(pro, "pro");
  Dsv4Config dcp = default_config();
  dcp.serving.dcp_world_size = 2;
  dcp.serving.cp_interleave = 4;
  check_battery(dcp, "dcp 2");
  Dsv4Config block64 = default_config();
  block64.serving.block_size = 64;
  check_battery(block64, "block 64");
  Dsv4Config packed = default_config();
  packed.serving.c128_page_stride_bytes = 39168;
  check_battery(packed, "packed c128 pages");
  Dsv4Config bf16 = default_config();
  bf16.serving.kv_cache_dtype = KvCacheDtype::bf16;
  check_battery(bf16, "bf16 cache");
  Dsv4Config e4m3 = default_config();
  e4m3.serving.kv_cache_dtype = KvCacheDtype::fp8_e4m3;
  check_battery(e4m3, "e4m3 cache");
}

TEST(Dsv4Battery, StepsCoverBothEndsAndBoundaries) {
  const Dsv4Config config = default_config();
  StepGenerator steps(config, BatteryOptions{});
  bool single = false, full = false, decode_boundary = false, fresh_prefill = false, mixed = false;
  for (int i = 0; i < 2000; ++i) {
    const ServingStep step = steps.next();
    single = single || step.num_tokens() == 1;
    full = full || step.num_tokens() == config.serving.max_num_batched_tokens;
    mixed = mixed || (step.num_decodes() > 0 && step.num_prefills() > 0);
    for (const auto& r : step.requests) {
      EXPECT_LE(r.seq_len(), 65536);
      decode_boundary = decode_boundary || (!r.prefill && (r.context_len + 1) % 128 == 0);
      fresh_prefill = fresh_prefill || (r.prefill && r.context_len == 0);
    }
  }
  EXPECT_TRUE(single);
  EXPECT_TRUE(full);
  EXPECT_TRUE(mixed);
  EXPECT_TRUE(decode_boundary);
  EXPECT_TRUE(fresh_prefill);
}

TEST(Dsv4Battery, SameSeedSameSteps) {
  const Dsv4Config config = default_config();
  StepGenerator a(config, BatteryOptions{}), b(config, BatteryOptions{});
  BatteryOptions other;
  other.seed = 2;
  StepGenerator c(config, other);
  bool differs = false;
  for (int i = 0; i < 50; ++i) {
    const ServingStep x = a.next(), y = b.next(), z = c.next();
    EXPECT_EQ(x.summary(), y.summary());
    differs = differs || x.summary() != z.summary();
  }
  EXPECT_TRUE(differs);
}

TEST(Dsv4Battery, EachCompressRatioHasItsLayerKind) {
  EXPECT_EQ(layer_kind(0), LayerKind::sliding_window);
  EXPECT_EQ(layer_kind(4), LayerKind::csa);
  EXPECT_EQ(layer_kind(128), LayerKind::hca);
  try {
    layer_kind(8);
    ADD_FAILURE() << "compress ratio 8 was given a layer kind";
  } catch (const ConfigError& error) {
    EXPECT_NE(std::string(error.what()).find("compress ratio 8"), std::string::npos)
        << error.what();
  }
  // Every decoder layer of both models has a kind, and the kinds are those layer_kinds lists.
  for (const ModelConfig& model : {dsv4_flash(), dsv4_pro()}) {
    const std::vector<LayerKind> kinds = layer_kinds(model);
    for (const int ratio : model.compress_ratios) {
      EXPECT_NE(std::find(kinds.begin(), kinds.end(), layer_kind(ratio)), kinds.end());
    }
  }
}

}  // namespace
}  // namespace zerojit::dsv4
