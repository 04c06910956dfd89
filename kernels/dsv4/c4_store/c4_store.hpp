// Owners of the C4 compressor kernels (spec sections 3 and 4): for every boundary token,
// softmax-pool the 8 overlapping state rows, RMSNorm, RoPE the last 64 dims, and store one row
// into the compressed K cache: fp8_ds_mla pages (C4StoreKernel) or plain BF16 / per-tensor
// E4M3 rows (C4StoreFullKernel).
#pragma once

#include <optional>
#include <tuple>

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

// The call's arguments, for both C4 kernels (zerojit/arguments.hpp): with TensorRef what a
// caller passes, with TensorDesc what dispatch sees.
template <class Tensor>
struct C4StoreArguments {
  int compress_ratio = 4;  // the layer's ratio
  Tensor state_cache;      // f32 [n_blocks, Bs, 2 * state_width]
  Tensor token_to_req;     // i32 [>= T]
  Tensor positions;        // i64 [>= T]
  Tensor slot_mapping;     // i64 [T]
  Tensor block_table;      // i32 [reqs, blocks]
  Tensor rms_norm_weight;  // f32 | bf16 [512]
  float eps = 1e-6f;
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
    return std::tuple{scalar("compress_ratio", &A::compress_ratio),
                      input("state_cache", &A::state_cache),
                      input("token_to_req", &A::token_to_req),
                      input("positions", &A::positions),
                      input("slot_mapping", &A::slot_mapping),
                      input("block_table", &A::block_table),
                      input("rms_norm_weight", &A::rms_norm_weight),
                      scalar("eps", &A::eps),
                      input("cos_sin_cache", &A::cos_sin_cache),
                      output("k_cache", &A::k_cache),
                      input("kv_slot_mapping", &A::kv_slot_mapping),
                      input("fp8_scale", &A::fp8_scale),
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
  // (defined with the references, reference.cpp beside this file).
  static void reference(const C4StoreKey& key, const zj::dsv4::C4StoreParams& params);

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
  // (defined with the references, reference.cpp beside this file).
  static void reference(const C4StoreFullKey& key, const zj::dsv4::C4StoreFullParams& params);

 private:
  friend JitKernel;
  C4StoreFullKernel() : JitKernel("dsv4.c4_store_full", embedded_files()) {}
};

}  // namespace zerojit::dsv4
