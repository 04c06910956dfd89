// Owners of the indexer-Q RoPE + quant kernels (spec section 1): FP8 (one pow2 scale per
// (token, head) row, folded into the weights) and MXFP4 (a UE8M0 scale per 32 elements). Both
// share the key, the descriptors and the dispatch; they differ in their outputs.
#pragma once

#include <tuple>

#include "dsv4/indexer_q/gate.hpp"
#include "dsv4/indexer_q/indexer_q_params.h"
#include "dsv4/owner_common.hpp"

namespace zerojit::dsv4 {

struct IndexerQKey {
  int head_dim = 128;  // D
  int rope_dim = 64;   // R: the last R dims are rotated
  int num_heads = 64;  // H
  DType cos_sin_dtype = DType::f32;
  int coarsen = 1;  // heads per subwarp: 1 below 512 tokens, else 4

  static constexpr auto fields() {
    return std::tuple{field("head_dim", &IndexerQKey::head_dim),
                      field("rope_dim", &IndexerQKey::rope_dim),
                      field("num_heads", &IndexerQKey::num_heads),
                      field("cos_sin_dtype", &IndexerQKey::cos_sin_dtype),
                      field("coarsen", &IndexerQKey::coarsen)};
  }
  auto operator<=>(const IndexerQKey&) const = default;
};

struct IndexerQDescriptors {
  TensorDesc positions;      // i64 [T]
  TensorDesc q;              // bf16 [T, H, D]
  TensorDesc cos_sin_cache;  // f32 | bf16 [max_pos, R]
  TensorDesc weights;        // bf16 [T, H]

  static constexpr auto fields() {
    return std::tuple{field("positions", &IndexerQDescriptors::positions),
                      field("q", &IndexerQDescriptors::q),
                      field("cos_sin_cache", &IndexerQDescriptors::cos_sin_cache),
                      field("weights", &IndexerQDescriptors::weights)};
  }
};

struct IndexerQInputs {
  TensorRef positions;
  TensorRef q;
  TensorRef cos_sin_cache;
  TensorRef weights;
  float scale = 0.0f;  // softmax_scale * head_scale
  // Launch with programmatic dependent launch (PDL): the kernel may start while the kernel
  // before it in the stream still runs, and waits for it before reading what it writes. A launch
  // option, not a key field (docs/DESIGN.md, "Programmatic dependent launch").
  bool pdl = false;

  IndexerQDescriptors descriptors() const {
    return {positions.desc, q.desc, cos_sin_cache.desc, weights.desc};
  }
};

struct IndexerQFp8Outputs {
  TensorRef q_fp8;        // u8 | e4m3 [T, H, D]
  TensorRef weights_out;  // f32 [T, H]
};

struct IndexerQMxFp4Outputs {
  TensorRef q_packed;     // u8 | e2m1x2 [T, H, D/2]
  TensorRef q_scale;      // u8 | ue8m0 [T, H, D/32]
  TensorRef weights_out;  // f32 [T, H]
};

struct IndexerQFp8Args {
  IndexerQInputs inputs;
  IndexerQFp8Outputs outputs;

  IndexerQDescriptors descriptors() const { return inputs.descriptors(); }
};

struct IndexerQMxFp4Args {
  IndexerQInputs inputs;
  IndexerQMxFp4Outputs outputs;

  IndexerQDescriptors descriptors() const { return inputs.descriptors(); }
};

// Dispatch for both variants: (T, H, D) = q.shape, R = cos_sin_cache.shape[-1], cos/sin dtype
// as given, coarsen 1 for T < 512 tokens else 4 (1 when 4 does not divide H). `mxfp4` selects
// the variant's key constraints.
IndexerQKey indexer_q_dispatch(const ArgumentChecks& checks, const IndexerQDescriptors& d,
                               bool mxfp4);
// T in {1, 2, 4, ..., max_tokens} (and max_tokens itself) with the model's indexer shape and
// the one cos/sin dtype the model's RoPE cache has.
WarmupSpace<IndexerQDescriptors> indexer_q_warmup_space(const IndexerQGate& gate);

class IndexerQFp8Kernel final
    : public JitKernel<IndexerQFp8Kernel, IndexerQKey, IndexerQDescriptors> {
 public:
  IndexerQKey dispatch(const IndexerQDescriptors& d) const override {
    return indexer_q_dispatch(checks(), d, false);
  }
  Program program(const IndexerQKey& key) const override;
  // Returns the outputs.
  LaunchSpecWithOutputs<IndexerQKey, IndexerQFp8Outputs> plan(const IndexerQFp8Args& args) const;
  WarmupSpace<IndexerQDescriptors> warmup_space(const IndexerQGate& gate) const {
    return indexer_q_warmup_space(gate);
  }

  // The CPU reference of the kernel compiled for `key`, on the argument block plan() packs
  // (defined with the references, reference.cpp beside this file).
  static void reference(const IndexerQKey& key, const zj::dsv4::IndexerQParams& params);

 private:
  friend JitKernel;
  IndexerQFp8Kernel() : JitKernel("dsv4.indexer_q_fp8", embedded_files()) {}
};

class IndexerQMxFp4Kernel final
    : public JitKernel<IndexerQMxFp4Kernel, IndexerQKey, IndexerQDescriptors> {
 public:
  IndexerQKey dispatch(const IndexerQDescriptors& d) const override {
    return indexer_q_dispatch(checks(), d, true);
  }
  Program program(const IndexerQKey& key) const override;
  LaunchSpecWithOutputs<IndexerQKey, IndexerQMxFp4Outputs> plan(
      const IndexerQMxFp4Args& args) const;
  WarmupSpace<IndexerQDescriptors> warmup_space(const IndexerQGate& gate) const {
    return indexer_q_warmup_space(gate);
  }

  // The CPU reference of the kernel compiled for `key`, on the argument block plan() packs
  // (defined with the references, reference.cpp beside this file).
  static void reference(const IndexerQKey& key, const zj::dsv4::IndexerQParams& params);

 private:
  friend JitKernel;
  IndexerQMxFp4Kernel() : JitKernel("dsv4.indexer_q_mxfp4", embedded_files()) {}
};

}  // namespace zerojit::dsv4
