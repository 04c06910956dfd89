#include "dsv4/model.hpp"

namespace zerojit::dsv4 {

DType to_dtype(FloatDtype dtype) { return dtype == FloatDtype::bf16 ? DType::bf16 : DType::f32; }

AttentionKernels::AttentionKernels(Dsv4Config config) : config_(std::move(config)) {
  validate(config_);
  indexer_q_ = indexer_q_gate(config_);
  dequant_gather_ = dequant_gather_gate(config_);
  c4_ds_mla_ = c4_ds_mla_store_gate(config_);
  c4_full_ = c4_full_store_gate(config_);
  c128_compress_ = c128_compress_gate(config_);
  c128_ds_mla_ = c128_ds_mla_store_gate(config_);
  c128_full_ = c128_full_store_gate(config_);
  dcp_pack_ = dcp_pack_gate(config_);
}

void AttentionKernels::register_warmup(WarmupRegistry& registry) const {
  if (indexer_q_) {
    const IndexerQGate gate = *indexer_q_;
    IndexerQKernel& kernel = gate.variant == IndexerDtype::mxfp4
                                 ? static_cast<IndexerQKernel&>(IndexerQMxFp4Kernel::instance())
                                 : static_cast<IndexerQKernel&>(IndexerQFp8Kernel::instance());
    // A tag per distinct space, so that registrations of several configurations all count
    // and only true repeats (every layer of a kind) are dropped.
    const std::string tag =
        "indexer H=" + std::to_string(gate.num_heads) + " D=" + std::to_string(gate.head_dim) +
        " R=" + std::to_string(gate.rope_dim) + " T<=" + std::to_string(gate.max_num_tokens);
    auto build = [&kernel, gate] {
      return kernel.warmup_space(gate.head_dim, gate.rope_dim, gate.num_heads,
                                 to_dtype(gate.cos_sin_dtype), gate.max_num_tokens);
    };
    if (gate.variant == IndexerDtype::mxfp4) {
      registry.add(IndexerQMxFp4Kernel::instance(), tag, build);
    } else {
      registry.add(IndexerQFp8Kernel::instance(), tag, build);
    }
  }
  if (!dequant_gather_.empty()) {
    std::vector<DequantGatherKernel::Call> calls;
    for (const auto& call : dequant_gather_)
      calls.push_back({call.block_size, call.has_gather_lens});
    std::string tag = "prefill";
    for (const auto& call : calls) {
      tag += " " + std::to_string(call.block_size) + (call.has_gather_lens ? "+lens" : "");
    }
    DequantGatherKernel& kernel = DequantGatherKernel::instance();
    registry.add(kernel, tag, [&kernel, calls] { return kernel.warmup_space(calls); });
  }
  const int block_size = config_.serving.block_size;
  if (c4_ds_mla_) {
    const DType norm = to_dtype(c4_ds_mla_->norm_weight_dtype);
    const int rows = compressed_block_size(block_size, kCsaCompressRatio);
    C4StoreKernel& kernel = C4StoreKernel::instance();
    registry.add(kernel, "c4 B=" + std::to_string(rows) + " " + std::string(dtype_name(norm)),
                 [&kernel, norm, rows] { return kernel.warmup_space(norm, rows); });
  }
  if (c4_full_) {
    const DType norm = to_dtype(c4_full_->norm_weight_dtype);
    const bool fp8 = c4_full_->store_full_fp8;
    const int rows = compressed_block_size(block_size, kCsaCompressRatio);
    C4StoreFullKernel& kernel = C4StoreFullKernel::instance();
    registry.add(kernel,
                 "c4 B=" + std::to_string(rows) + (fp8 ? " e4m3 " : " bf16 ") +
                     std::string(dtype_name(norm)),
                 [&kernel, norm, fp8, rows] { return kernel.warmup_space(norm, fp8, rows); });
  }
  if (c128_compress_) {
    const int head = c128_compress_->head_size;
    C128CompressKernel& kernel = C128CompressKernel::instance();
    registry.add(kernel, "c128 head=" + std::to_string(head),
                 [&kernel, head] { return kernel.warmup_space(head); });
  }
  if (c128_ds_mla_) {
    const C128DsMlaStoreGate gate = *c128_ds_mla_;
    C128StoreKernel& kernel = C128StoreKernel::instance();
    registry.add(kernel,
                 "c128 B=" + std::to_string(gate.kv_cache_block_size) +
                     " stride=" + std::to_string(gate.page_stride_bytes) + " " +
                     std::string(dtype_name(to_dtype(gate.norm_weight_dtype))),
                 [&kernel, gate] {
                   return kernel.warmup_space(to_dtype(gate.norm_weight_dtype),
                                              gate.kv_cache_block_size, gate.page_stride_bytes);
                 });
  }
  if (c128_full_) {
    const DType norm = to_dtype(c128_full_->norm_weight_dtype);
    const bool fp8 = c128_full_->store_full_fp8;
    const int rows = compressed_block_size(block_size, kHcaCompressRatio);
    C128StoreFullKernel& kernel = C128StoreFullKernel::instance();
    registry.add(kernel,
                 "c128 B=" + std::to_string(rows) + (fp8 ? " e4m3 " : " bf16 ") +
                     std::string(dtype_name(norm)),
                 [&kernel, norm, fp8, rows] { return kernel.warmup_space(norm, fp8, rows); });
  }
  if (dcp_pack_) {
    const DcpPackGate gate = *dcp_pack_;
    DcpPackKernel& kernel = DcpPackKernel::instance();
    registry.add(kernel,
                 "dcp topk=" + std::to_string(gate.topk) +
                     " W=" + std::to_string(gate.dcp_world_size) +
                     " I=" + std::to_string(gate.cp_interleave),
                 [&kernel, gate] {
                   return kernel.warmup_space(gate.topk, gate.dcp_world_size, gate.cp_interleave);
                 });
  }
}

void AttentionKernels::run_indexer_q_fp8(const IndexerQInputs& inputs,
                                         const IndexerQFp8Outputs& outputs,
                                         cuda::Stream stream) const {
  if (!indexer_q_ || indexer_q_->variant != IndexerDtype::fp8) {
    throw Error("dsv4: this configuration does not run the FP8 indexer-Q kernel");
  }
  IndexerQFp8Kernel::instance()(inputs, outputs, stream);
}

void AttentionKernels::run_indexer_q_mxfp4(const IndexerQInputs& inputs,
                                           const IndexerQMxFp4Outputs& outputs,
                                           cuda::Stream stream) const {
  if (!indexer_q_ || indexer_q_->variant != IndexerDtype::mxfp4) {
    throw Error("dsv4: this configuration does not run the MXFP4 indexer-Q kernel");
  }
  IndexerQMxFp4Kernel::instance()(inputs, outputs, stream);
}

void AttentionKernels::run_compressor(const CompressorCall& call, cuda::Stream stream) const {
  route_compressor(call, [stream](auto& kernel, const auto& args) { kernel(args, stream); });
}

void AttentionKernels::run_dequant_gather(const DequantGatherArgs& args,
                                          cuda::Stream stream) const {
  if (dequant_gather_.empty()) throw Error("dsv4: this configuration has no K-cache gather");
  DequantGatherKernel::instance()(args, stream);
}

void AttentionKernels::run_dcp_pack(const DcpPackArgs& args, cuda::Stream stream) const {
  if (!dcp_pack_) throw Error("dsv4: this configuration has no decode context parallelism");
  DcpPackKernel::instance()(args, stream);
}

std::vector<KernelBase*> all_kernels() {
  return {&IndexerQFp8Kernel::instance(),   &IndexerQMxFp4Kernel::instance(),
          &DequantGatherKernel::instance(), &C4StoreKernel::instance(),
          &C4StoreFullKernel::instance(),   &C128CompressKernel::instance(),
          &C128StoreKernel::instance(),     &C128StoreFullKernel::instance(),
          &DcpPackKernel::instance()};
}

}  // namespace zerojit::dsv4
