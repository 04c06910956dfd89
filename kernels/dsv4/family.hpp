// The DSv4 attention-side kernel family as one table: each kernel once, with its gate (does a
// configuration run it, and with which compile-relevant parameters). Warmup registration, the
// list of kernels, the runtime entry point and the dispatch-only planning of the serving
// battery all come from this table and one router, so the kernels warmed and the kernels the
// runtime reaches are decided in one place.
//
// Adding a kernel: its folder (owner, .cu, params, reference, gate, warmup space), one row
// below, its call in the serving battery (battery/calls.cpp) and its Python binding
// (docs/ADDING_A_KERNEL.md).
#pragma once

#include <optional>
#include <variant>
#include <vector>

#include "dsv4/c128_compress/c128_compress.hpp"
#include "dsv4/c128_store/c128_store.hpp"
#include "dsv4/c4_store/c4_store.hpp"
#include "dsv4/config.hpp"
#include "dsv4/dcp_pack/dcp_pack.hpp"
#include "dsv4/dequant_gather/dequant_gather.hpp"
#include "dsv4/indexer_q/indexer_q.hpp"
#include "zerojit/family.hpp"

namespace zerojit::dsv4 {

// The family: one row per kernel, in the order the manifest lists them, with its Python op
// (vLLM's function, bound from the kernel's declared arguments). The stores share one op per
// compressor, the K cache's dtype picking the kernel as vLLM's compressor picks its layout.
inline constexpr KernelTable kFamily{
    "dsv4",
    KernelRow<IndexerQFp8Kernel, IndexerQGate, Dsv4Config>{&indexer_q_fp8_gate, "indexer_q_fp8"},
    KernelRow<IndexerQMxFp4Kernel, IndexerQGate, Dsv4Config>{&indexer_q_mxfp4_gate,
                                                             "indexer_q_mxfp4"},
    KernelRow<DequantGatherKernel, DequantGatherGate, Dsv4Config>{&dequant_gather_gate,
                                                                  "dequant_gather"},
    KernelRow<C4StoreKernel, C4DsMlaStoreGate, Dsv4Config>{&c4_ds_mla_store_gate, "c4_store",
                                                           when_dtype("k_cache", {DType::u8})},
    KernelRow<C4StoreFullKernel, C4FullStoreGate, Dsv4Config>{
        &c4_full_store_gate, "c4_store", when_dtype("k_cache", {DType::bf16, DType::e4m3})},
    KernelRow<C128CompressKernel, C128CompressGate, Dsv4Config>{&c128_compress_gate,
                                                                "c128_compress"},
    KernelRow<C128StoreKernel, C128DsMlaStoreGate, Dsv4Config>{
        &c128_ds_mla_store_gate, "c128_store", when_dtype("k_cache", {DType::u8})},
    KernelRow<C128StoreFullKernel, C128FullStoreGate, Dsv4Config>{
        &c128_full_store_gate, "c128_store", when_dtype("k_cache", {DType::bf16, DType::e4m3})},
    KernelRow<DcpPackKernel, DcpPackGate, Dsv4Config>{&dcp_pack_gate, "dcp_pack"},
};

// The compressor call of one layer (spec section 7's orchestration): C4 layers use `c4`, C128
// layers `c128_compress` then `c128_store`; both store into the layer's compressed K cache.
struct CompressorCall {
  int compress_ratio = 4;
  C4StoreArgs c4;                  // ratio 4 (its compress_ratio is set from the field above)
  C128CompressArgs c128_compress;  // ratio 128, stage 1
  C128StoreArgs c128_store;        // ratio 128, stage 2 (compressed_kv = stage 1's output)
};

// Every call the family's router takes: one kernel's arguments, or a compressor call.
using Dsv4Call = std::variant<IndexerQFp8Args, IndexerQMxFp4Args, CompressorCall, DequantGatherArgs,
                              DcpPackArgs>;

// validate(config), then every row's gate: a gate whose kernel runs refuses the values its kernel
// cannot build, with a ConfigError naming the config.json field and the values that work.
void validate_for_kernels(const Dsv4Config& config);

class AttentionKernels {
 public:
  // Validates the configuration (validate_for_kernels: throws ConfigError) and evaluates every
  // gate once.
  explicit AttentionKernels(Dsv4Config config);

  const Dsv4Config& config() const { return config_; }

  // Registers every kernel this configuration runs with the warmup space its gate implies.
  void register_warmup(WarmupRegistry& registry) const {
    kFamily.register_warmup(registry, decisions_);
  }

  // The gate's answer for a kernel of the table (nullopt: the configuration never runs it).
  template <class Kernel>
  const auto& gate() const {
    return std::get<row_of<Kernel>()>(decisions_);
  }
  template <class Kernel>
  bool runs() const {
    return gate<Kernel>().has_value();
  }

  // The runtime entry point, as the attention layer calls it: the kernel(s) this configuration
  // runs for the call, launched on the arguments' device and `stream`. A call is the argument
  // struct of a kernel (IndexerQFp8Args, DequantGatherArgs, DcpPackArgs, ...) or a
  // CompressorCall. Throws zerojit::Error when the configuration runs no kernel for it.
  template <class Call>
  void run(const Call& call, cuda::Stream stream = nullptr) const {
    route(call, [stream](auto& kernel, const auto& args) { kernel(args, stream); });
  }
  void run(const Dsv4Call& call, cuda::Stream stream = nullptr) const {
    std::visit([&](const auto& args) { run(args, stream); }, call);
  }

  // The routing behind run, for callers that do something else with the kernels (the
  // dispatch-only battery plans them): calls visit(kernel, args) for each kernel the call
  // runs, in order.
  template <class Call, class Visitor>
  void route(const Call& call, Visitor&& visit) const {
    kFamily.route(decisions_, call, visit);
  }
  // A compressor call: ratio 4 -> the C4 store of the configured cache; ratio 128 -> C128
  // compress then the C128 store of the configured cache. No tokens: nothing runs. Another
  // ratio is an error.
  template <class Visitor>
  void route(const CompressorCall& call, Visitor&& visit) const;

 private:
  template <class Kernel, std::size_t I = 0>
  static constexpr std::size_t row_of() {
    using Row = std::tuple_element_t<I, std::remove_cvref_t<decltype(kFamily)>::RowTuple>;
    if constexpr (std::is_same_v<typename Row::KernelType, Kernel>) {
      return I;
    } else {
      return row_of<Kernel, I + 1>();
    }
  }

  Dsv4Config config_;
  std::remove_cvref_t<decltype(kFamily)>::Decisions decisions_;
};

template <class Visitor>
void AttentionKernels::route(const CompressorCall& call, Visitor&& visit) const {
  auto no_tokens = [](const TensorRef& positions) {
    return positions.desc.ndim == 1 && positions.desc.size(0) == 0;
  };
  if (call.compress_ratio == kCsaCompressRatio) {
    if (no_tokens(call.c4.positions)) return;
    C4StoreArgs args = call.c4;
    args.compress_ratio = call.compress_ratio;
    kFamily.route(decisions_, args, visit);
  } else if (call.compress_ratio == kHcaCompressRatio) {
    if (!runs<C128CompressKernel>()) {
      throw Error("dsv4: this configuration does not run " + C128CompressKernel::instance().name());
    }
    if (no_tokens(call.c128_compress.positions)) return;
    kFamily.route(decisions_, call.c128_compress, visit);
    kFamily.route(decisions_, call.c128_store, visit);
  } else {
    throw Error("dsv4: no compressor for compress ratio " + std::to_string(call.compress_ratio) +
                " (DSv4 layers use 4 or 128)");
  }
}

// Programmatic dependent launch for every kernel a call launches (the launch option each
// kernel's arguments carry as `pdl`; docs/DESIGN.md, "Programmatic dependent launch").
inline void set_pdl(IndexerQFp8Args& args, bool pdl) { args.pdl = pdl; }
inline void set_pdl(IndexerQMxFp4Args& args, bool pdl) { args.pdl = pdl; }
inline void set_pdl(DequantGatherArgs& args, bool pdl) { args.pdl = pdl; }
inline void set_pdl(C4StoreArgs& args, bool pdl) { args.pdl = pdl; }
inline void set_pdl(C128CompressArgs& args, bool pdl) { args.pdl = pdl; }
inline void set_pdl(C128StoreArgs& args, bool pdl) { args.pdl = pdl; }
inline void set_pdl(DcpPackArgs& args, bool pdl) { args.pdl = pdl; }
inline void set_pdl(CompressorCall& call, bool pdl) {
  set_pdl(call.c4, pdl);
  set_pdl(call.c128_compress, pdl);
  set_pdl(call.c128_store, pdl);
}
inline void set_pdl(Dsv4Call& call, bool pdl) {
  std::visit([pdl](auto& args) { set_pdl(args, pdl); }, call);
}

// Every DSv4 kernel owner, for tools that list or reset them.
inline std::vector<KernelBase*> all_kernels() { return kFamily.kernels(); }

}  // namespace zerojit::dsv4
