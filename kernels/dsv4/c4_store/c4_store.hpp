// Owners of the C4 compressor kernels (spec sections 3 and 4): for every boundary token,
// softmax-pool the 8 overlapping state rows, RMSNorm, RoPE the last 64 dims, and store one row
// into the compressed K cache: fp8_ds_mla pages (C4StoreKernel) or plain BF16 / per-tensor
// E4M3 rows (C4StoreFullKernel).
#pragma once

#include <optional>
#include <tuple>
#include <vector>

#include "dsv4/c4_store/c4_store_params.h"
#include "dsv4/c4_store/gate.hpp"
#include "dsv4/owner_common.hpp"

namespace zerojit::dsv4 {

// What the kernels specialize on, and only that: the head (512), RoPE tail (64), quantization
// (blocks of 64, e4m3 max 448), ratio (4, overlapping windows) and page layout are constants of
// the kernels (compressor_params.h), refused otherwise by dispatch.
struct C4StoreKey {
  DType norm_weight_dtype = DType::bf16;

  static constexpr auto fields() {
    return std::tuple{field("norm_weight_dtype", &C4StoreKey::norm_weight_dtype)};
  }
  auto operator<=>(const C4StoreKey&) const = default;
};

struct C4StoreFullKey {
  bool store_full_fp8 = false;
  DType norm_weight_dtype = DType::bf16;

  static constexpr auto fields() {
    return std::tuple{field("store_full_fp8", &C4StoreFullKey::store_full_fp8),
                      field("norm_weight_dtype", &C4StoreFullKey::norm_weight_dtype)};
  }
  auto operator<=>(const C4StoreFullKey&) const = default;
};

// The call's arguments, for both C4 kernels, in the order of vLLM's
// fused_kv_compress_norm_rope_insert_sparse_attn and with its names (zerojit/arguments.hpp):
// with TensorRef what a caller passes, with TensorDesc what dispatch sees. vLLM's signature
// restates the tensors (block sizes, the page stride, the layout flags, which the cache's dtype
// decides): a binding checks those against the tensors and drops them.
template <class Tensor>
struct C4StoreArguments {
  int compress_ratio = 4;  // the layer's ratio: its route's (4 for a Python call)
  Tensor state_cache;      // f32 [n_blocks, Bs, 2 * state_width]
  Tensor token_to_req;     // token_to_req_indices: i32 [>= T]
  Tensor positions;        // i64 [>= T]
  Tensor slot_mapping;     // i64 [T]
  Tensor block_table;      // i32 [reqs, blocks]
  Tensor rms_norm_weight;  // f32 | bf16 [512]
  float eps = 1e-6f;       // rms_norm_eps
  Tensor cos_sin_cache;    // f32 [max_pos, 64]
  Tensor k_cache;          // u8 [N, B, 584] (ds_mla) | bf16 or e4m3 [N, B, 512] (full); written
  Tensor kv_slot_mapping;  // i64 [>= T]
  std::optional<Tensor> fp8_scale;  // f32 [1], e4m3 full cache only
  // Launch with programmatic dependent launch (PDL): the kernel may start while the kernel
  // before it in the stream still runs, and waits for it before reading what it writes. A launch
  // option, not a key field (docs/DESIGN.md, "Programmatic dependent launch").
  bool pdl = false;

  static constexpr auto fields() {
    using A = C4StoreArguments;
    return std::tuple{implied("compress_ratio", &A::compress_ratio),
                      input("state_cache", &A::state_cache),
                      input("token_to_req_indices", &A::token_to_req),
                      input("positions", &A::positions,
                            indexes("cos_sin_cache", 1, "rows").read_where("slot_mapping")),
                      input("slot_mapping", &A::slot_mapping),
                      input("block_table", &A::block_table, indexes("state_cache", 1, "blocks")),
                      repeated_size("block_size", "state_cache", 1),
                      input("rms_norm_weight", &A::rms_norm_weight),
                      scalar("rms_norm_eps", &A::eps),
                      input("cos_sin_cache", &A::cos_sin_cache),
                      output("k_cache", &A::k_cache),
                      input("kv_slot_mapping", &A::kv_slot_mapping, indexes("k_cache", 2, "slots")),
                      repeated_size("kv_cache_block_size", "k_cache", 1),
                      repeated_stride("kv_block_stride", "k_cache"),
                      input("fp8_scale", &A::fp8_scale, unit_scale_when("k_cache", DType::e4m3)),
                      dtype_flag("store_full_kv", "k_cache", {DType::bf16, DType::e4m3}),
                      dtype_flag("store_full_fp8", "k_cache", {DType::e4m3}),
                      launch_option("pdl", &A::pdl)};
  }
};
using C4StoreArgs = C4StoreArguments<TensorRef>;
using C4StoreDescriptors = C4StoreArguments<TensorDesc>;

class C4StoreKernel final : public JitKernel<C4StoreKernel, C4StoreKey, C4StoreDescriptors> {
 public:
  // norm_weight_dtype = the weight's dtype. Refuses a ratio other than 4, a weight of another
  // length than 512 and a cos/sin cache of another width than 64.
  C4StoreKey dispatch(const C4StoreDescriptors& descriptors) const override;
  // Builds a bf16 or f32 norm weight.
  Program program(const C4StoreKey& key) const override;
  LaunchSpec<C4StoreKey> plan(const C4StoreKey& key, const C4StoreArgs& args) const;
  WarmupSpace<C4StoreDescriptors> warmup_space(const C4DsMlaStoreGate& gate) const;

  // The CPU reference of the kernel compiled for `key`, on the argument block plan() packs
  // (defined with the references, reference.cpp beside this file). Returns the rows written.
  static std::vector<long long> reference(const C4StoreKey& key,
                                          const zj::dsv4::C4StoreParams& params);

 private:
  friend JitKernel;
  C4StoreKernel() : JitKernel("dsv4.c4_store", embedded_files()) {}
};

class C4StoreFullKernel final
    : public JitKernel<C4StoreFullKernel, C4StoreFullKey, C4StoreDescriptors> {
 public:
  // As C4StoreKernel, plus store_full_fp8 = (k_cache dtype is e4m3).
  C4StoreFullKey dispatch(const C4StoreDescriptors& descriptors) const override;
  Program program(const C4StoreFullKey& key) const override;
  LaunchSpec<C4StoreFullKey> plan(const C4StoreFullKey& key, const C4StoreArgs& args) const;
  WarmupSpace<C4StoreDescriptors> warmup_space(const C4FullStoreGate& gate) const;

  // The CPU reference of the kernel compiled for `key`, on the argument block plan() packs
  // (defined with the references, reference.cpp beside this file). Returns the rows written.
  static std::vector<long long> reference(const C4StoreFullKey& key,
                                          const zj::dsv4::C4StoreFullParams& params);

 private:
  friend JitKernel;
  C4StoreFullKernel() : JitKernel("dsv4.c4_store_full", embedded_files()) {}
};

}  // namespace zerojit::dsv4
