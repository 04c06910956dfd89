// Owners of the indexer-Q RoPE + quant kernels (spec section 1): FP8 (one pow2 scale per
// (token, head) row, folded into the weights) and MXFP4 (a UE8M0 scale per 32 elements). Both
// share the key, the inputs and the dispatch; they differ in their outputs.
#pragma once

#include <optional>
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

// weights_out, f32 [T, H] of the query [T, H, D]: what both variants allocate beside their
// quantized query.
constexpr OutputAllocation weights_out_like_q() {
  return allocated_like(DType::f32, "q", 2).with_like_rank(3);
}

// The FP8 call's arguments, in the order of vLLM's Python function
// (fused_indexer_q_rope_quant_fp8, whose softmax and head scales arrive as their product). With
// TensorRef what a caller passes, with TensorDesc what dispatch sees (zerojit/arguments.hpp).
// The query's shape sizes the outputs a binding allocates.
template <class Tensor>
struct IndexerQFp8Arguments {
  Tensor positions;      // i64 [T]
  Tensor q;              // bf16 [T, H, D]
  Tensor cos_sin_cache;  // f32 | bf16 [max_pos, R]
  Tensor weights;        // bf16 [T, H]
  float scale = 0.0f;    // softmax_scale * head_scale
  Tensor q_fp8;          // u8 | e4m3 [T, H, D]; written
  Tensor weights_out;    // f32 [T, H]; written
  // Launch with programmatic dependent launch (PDL): the kernel may start while the kernel
  // before it in the stream still runs, and waits for it before reading what it writes. A launch
  // option, not a key field (docs/DESIGN.md, "Programmatic dependent launch").
  bool pdl = false;

  static constexpr auto fields() {
    using A = IndexerQFp8Arguments;
    return std::tuple{input("positions", &A::positions),
                      input("q", &A::q),
                      input("cos_sin_cache", &A::cos_sin_cache),
                      input("weights", &A::weights),
                      scalar("scale", &A::scale),
                      output("q_fp8", &A::q_fp8, allocated_like(DType::e4m3, "q", 3)),
                      output("weights_out", &A::weights_out, weights_out_like_q()),
                      launch_option("pdl", &A::pdl)};
  }
};
using IndexerQFp8Args = IndexerQFp8Arguments<TensorRef>;
using IndexerQFp8Descriptors = IndexerQFp8Arguments<TensorDesc>;

// The MXFP4 call's arguments, in the order of vLLM's fused_indexer_q_rope_quant_mxfp4: the FP8
// call's inputs, then its outputs, sized by the query as vLLM sizes them: two E2M1 codes a byte
// (D / 2) and one UE8M0 exponent a block of 32 (D / 32).
template <class Tensor>
struct IndexerQMxFp4Arguments {
  Tensor positions;      // i64 [T]
  Tensor q;              // bf16 [T, H, D]
  Tensor cos_sin_cache;  // f32 | bf16 [max_pos, R]
  Tensor weights;        // bf16 [T, H]
  float scale = 0.0f;    // softmax_scale * head_scale
  Tensor q_packed;       // u8 | e2m1x2 [T, H, D/2]; written
  Tensor q_scale;        // u8 | ue8m0 [T, H, D/32]; written
  Tensor weights_out;    // f32 [T, H]; written
  bool pdl = false;      // as the FP8 call's

  static constexpr auto fields() {
    using A = IndexerQMxFp4Arguments;
    return std::tuple{input("positions", &A::positions),
                      input("q", &A::q),
                      input("cos_sin_cache", &A::cos_sin_cache),
                      input("weights", &A::weights),
                      scalar("scale", &A::scale),
                      output("q_packed", &A::q_packed,
                             allocated_like(DType::u8, "q", 3).with_extent_divided(2, 2)),
                      output("q_scale", &A::q_scale,
                             allocated_like(DType::u8, "q", 3)
                                 .with_extent_divided(2, zj::dsv4::kIndexerQMxFp4BlockSize)),
                      output("weights_out", &A::weights_out, weights_out_like_q()),
                      launch_option("pdl", &A::pdl)};
  }
};
using IndexerQMxFp4Args = IndexerQMxFp4Arguments<TensorRef>;
using IndexerQMxFp4Descriptors = IndexerQMxFp4Arguments<TensorDesc>;

// Dispatch for both variants, from the four inputs alone: (T, H, D) = q.shape, R =
// cos_sin_cache.shape[-1], cos/sin dtype as given, coarsen 1 for T < 512 tokens else 4 (1 when 4
// does not divide H); the descriptors' type selects the variant's key constraints.
IndexerQKey indexer_q_dispatch(const ArgumentChecks& checks, const IndexerQFp8Descriptors& d);
IndexerQKey indexer_q_dispatch(const ArgumentChecks& checks, const IndexerQMxFp4Descriptors& d);
// T in {1, 2, 4, ..., max_tokens} (and max_tokens itself) with the model's indexer shape and
// the one cos/sin dtype the model's RoPE cache has. Dispatch reads no output, but each point
// carries the outputs a call of its shape passes, so that it describes, and plans, as that call
// does. Defined for IndexerQFp8Descriptors and IndexerQMxFp4Descriptors.
template <class Descriptors>
WarmupSpace<Descriptors> indexer_q_warmup_space(const IndexerQGate& gate);
// Serving through a miss (fallback.hpp): a coarsened key's calls are served by coarsen 1, which
// takes any head count and gives the same bytes (coarsening only regroups heads per subwarp).
inline std::optional<IndexerQKey> indexer_q_fallback(const IndexerQKey& key) {
  if (key.coarsen == 1) return std::nullopt;
  IndexerQKey fallback = key;
  fallback.coarsen = 1;
  return fallback;
}

class IndexerQFp8Kernel final
    : public JitKernel<IndexerQFp8Kernel, IndexerQKey, IndexerQFp8Descriptors> {
 public:
  IndexerQKey dispatch(const IndexerQFp8Descriptors& d) const override {
    return indexer_q_dispatch(checks(), d);
  }
  std::optional<IndexerQKey> fallback(const IndexerQKey& key) const {
    return indexer_q_fallback(key);
  }
  Program program(const IndexerQKey& key) const override;
  // Returns the outputs, (q_fp8, weights_out).
  LaunchSpecWithOutputs<IndexerQKey, std::tuple<TensorRef, TensorRef>> plan(
      const IndexerQKey& key, const IndexerQFp8Args& args) const;
  WarmupSpace<IndexerQFp8Descriptors> warmup_space(const IndexerQGate& gate) const {
    return indexer_q_warmup_space<IndexerQFp8Descriptors>(gate);
  }

  // The CPU reference of the kernel compiled for `key`, on the argument block plan() packs
  // (defined with the references, reference.cpp beside this file).
  static void reference(const IndexerQKey& key, const zj::dsv4::IndexerQParams& params);

 private:
  friend JitKernel;
  IndexerQFp8Kernel() : JitKernel("dsv4.indexer_q_fp8", embedded_files()) {}
};

class IndexerQMxFp4Kernel final
    : public JitKernel<IndexerQMxFp4Kernel, IndexerQKey, IndexerQMxFp4Descriptors> {
 public:
  IndexerQKey dispatch(const IndexerQMxFp4Descriptors& d) const override {
    return indexer_q_dispatch(checks(), d);
  }
  std::optional<IndexerQKey> fallback(const IndexerQKey& key) const {
    return indexer_q_fallback(key);
  }
  Program program(const IndexerQKey& key) const override;
  // Returns the outputs, (q_packed, q_scale, weights_out).
  LaunchSpecWithOutputs<IndexerQKey, std::tuple<TensorRef, TensorRef, TensorRef>> plan(
      const IndexerQKey& key, const IndexerQMxFp4Args& args) const;
  WarmupSpace<IndexerQMxFp4Descriptors> warmup_space(const IndexerQGate& gate) const {
    return indexer_q_warmup_space<IndexerQMxFp4Descriptors>(gate);
  }

  // The CPU reference of the kernel compiled for `key`, on the argument block plan() packs
  // (defined with the references, reference.cpp beside this file).
  static void reference(const IndexerQKey& key, const zj::dsv4::IndexerQParams& params);

 private:
  friend JitKernel;
  IndexerQMxFp4Kernel() : JitKernel("dsv4.indexer_q_mxfp4", embedded_files()) {}
};

}  // namespace zerojit::dsv4
