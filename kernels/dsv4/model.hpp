// The DSv4 wiring: which attention-side kernels a model and serving configuration use, decided
// once by the gates (gates.hpp), registered for warmup under those same decisions, and called
// at run time through them. The warmup path and the runtime path share the decision, so they
// cannot disagree about which kernels run.
#pragma once

#include <optional>
#include <vector>

#include "dsv4/c128_compress.hpp"
#include "dsv4/c128_store.hpp"
#include "dsv4/c4_store.hpp"
#include "dsv4/config.hpp"
#include "dsv4/dcp_pack.hpp"
#include "dsv4/dequant_gather.hpp"
#include "dsv4/gates.hpp"
#include "dsv4/indexer_q.hpp"
#include "zerojit/zerojit.hpp"

namespace zerojit::dsv4 {

DType to_dtype(FloatDtype dtype);

// The compressor call of one layer: C4 layers use `c4`, C128 layers `c128`, both store into
// the layer's compressed K cache.
struct CompressorCall {
  int compress_ratio = 4;
  C4StoreArgs c4;                  // ratio 4 (its compress_ratio is set from the field above)
  C128CompressArgs c128_compress;  // ratio 128, stage 1
  C128StoreArgs c128_store;        // ratio 128, stage 2 (compressed_kv = stage 1's output)
};

class AttentionKernels {
 public:
  // Validates the configuration (throws ConfigError) and evaluates every gate once.
  explicit AttentionKernels(Dsv4Config config);

  const Dsv4Config& config() const { return config_; }

  // Registers every kernel this configuration uses with the warmup space its gate implies.
  void register_warmup(WarmupRegistry& registry) const;

  // Which kernels run (the gates' answers).
  const std::optional<IndexerQGate>& indexer_q() const { return indexer_q_; }
  const std::vector<DequantGatherCall>& dequant_gather() const { return dequant_gather_; }
  const std::optional<C4DsMlaStoreGate>& c4_ds_mla_store() const { return c4_ds_mla_; }
  const std::optional<C4FullStoreGate>& c4_full_store() const { return c4_full_; }
  const std::optional<C128CompressGate>& c128_compress() const { return c128_compress_; }
  const std::optional<C128DsMlaStoreGate>& c128_ds_mla_store() const { return c128_ds_mla_; }
  const std::optional<C128FullStoreGate>& c128_full_store() const { return c128_full_; }
  const std::optional<DcpPackGate>& dcp_pack() const { return dcp_pack_; }

  // --- Runtime entry points, as the attention layer calls them ---
  // The indexer's query quantization in the variant the configuration selected. Throws
  // zerojit::Error when this configuration has no indexer.
  void run_indexer_q_fp8(const IndexerQInputs& inputs, const IndexerQFp8Outputs& outputs,
                         cuda::Stream stream = nullptr) const;
  void run_indexer_q_mxfp4(const IndexerQInputs& inputs, const IndexerQMxFp4Outputs& outputs,
                           cuda::Stream stream = nullptr) const;
  // Compress + norm + RoPE + store for one layer (spec section 7's orchestration): ratio 4 ->
  // the C4 kernel, ratio 128 -> C128 compress then the C128 store, into the ds_mla or the full
  // cache as configured. No tokens: nothing runs. Another ratio is an error.
  void run_compressor(const CompressorCall& call, cuda::Stream stream = nullptr) const;

  // The routing behind run_compressor, for callers that do something else with the kernels
  // (the dispatch-only battery plans them): calls visit(kernel, args) for each kernel the call
  // runs, in order, with kernel one of the compressor owners and args its argument struct.
  // Throws zerojit::Error for a ratio or a kernel this configuration does not have.
  template <class Visitor>
  void route_compressor(const CompressorCall& call, Visitor&& visit) const;
  void run_dequant_gather(const DequantGatherArgs& args, cuda::Stream stream = nullptr) const;
  void run_dcp_pack(const DcpPackArgs& args, cuda::Stream stream = nullptr) const;

 private:
  Dsv4Config config_;
  std::optional<IndexerQGate> indexer_q_;
  std::vector<DequantGatherCall> dequant_gather_;
  std::optional<C4DsMlaStoreGate> c4_ds_mla_;
  std::optional<C4FullStoreGate> c4_full_;
  std::optional<C128CompressGate> c128_compress_;
  std::optional<C128DsMlaStoreGate> c128_ds_mla_;
  std::optional<C128FullStoreGate> c128_full_;
  std::optional<DcpPackGate> dcp_pack_;
};

template <class Visitor>
void AttentionKernels::route_compressor(const CompressorCall& call, Visitor&& visit) const {
  if (call.compress_ratio == kCsaCompressRatio) {
    if (call.c4.positions.desc.ndim == 1 && call.c4.positions.desc.size(0) == 0) return;
    C4StoreArgs args = call.c4;
    args.compress_ratio = call.compress_ratio;
    if (c4_ds_mla_) {
      visit(C4StoreKernel::instance(), args);
    } else if (c4_full_) {
      visit(C4StoreFullKernel::instance(), args);
    } else {
      throw Error("dsv4: this configuration has no C4 compressor");
    }
  } else if (call.compress_ratio == kHcaCompressRatio) {
    if (!c128_compress_) throw Error("dsv4: this configuration has no C128 compressor");
    if (call.c128_compress.positions.desc.ndim == 1 &&
        call.c128_compress.positions.desc.size(0) == 0) {
      return;
    }
    visit(C128CompressKernel::instance(), call.c128_compress);
    if (c128_ds_mla_) {
      visit(C128StoreKernel::instance(), call.c128_store);
    } else if (c128_full_) {
      visit(C128StoreFullKernel::instance(), call.c128_store);
    } else {
      throw Error("dsv4: this configuration has no C128 store");
    }
  } else {
    throw Error("dsv4: no compressor for compress ratio " + std::to_string(call.compress_ratio) +
                " (DSv4 layers use 4 or 128)");
  }
}

// Every DSv4 kernel owner, for tools that list or reset them.
std::vector<KernelBase*> all_kernels();

}  // namespace zerojit::dsv4
