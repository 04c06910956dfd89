// Owners of the C128 store kernels (spec sections 6 and 7): RMSNorm + RoPE of each boundary
// token's compressed_kv row, stored into fp8_ds_mla pages whose geometry is compile-time
// (C128StoreKernel) or into plain BF16 / per-tensor E4M3 rows (C128StoreFullKernel).
#pragma once

#include <optional>
#include <tuple>
#include <vector>

#include "dsv4/c128_store/c128_store_params.h"
#include "dsv4/c128_store/gate.hpp"
#include "dsv4/owner_common.hpp"

namespace zerojit::dsv4 {

// What the kernels specialize on, and only that: the head (512), RoPE tail (64), quantization
// (blocks of 64, e4m3 max 448), ratio (128) and row layout are constants of the kernels
// (compressor_params.h), refused otherwise by dispatch.
struct C128StoreKey {
  std::int64_t kv_block_stride = 1728;  // page stride in bytes
  DType norm_weight_dtype = DType::bf16;
  int kv_cache_block_size = 2;  // B_k: rows per page

  static constexpr auto fields() {
    return std::tuple{field("kv_block_stride", &C128StoreKey::kv_block_stride),
                      field("norm_weight_dtype", &C128StoreKey::norm_weight_dtype),
                      field("kv_cache_block_size", &C128StoreKey::kv_cache_block_size)};
  }
  auto operator<=>(const C128StoreKey&) const = default;
};

struct C128StoreFullKey {
  bool store_full_fp8 = false;
  DType norm_weight_dtype = DType::bf16;

  static constexpr auto fields() {
    return std::tuple{field("store_full_fp8", &C128StoreFullKey::store_full_fp8),
                      field("norm_weight_dtype", &C128StoreFullKey::norm_weight_dtype)};
  }
  auto operator<=>(const C128StoreFullKey&) const = default;
};

// The call's arguments, for both C128 stores, in the order of vLLM's
// sparse_attn_norm_rope_store and with its names (zerojit/arguments.hpp): with TensorRef what a
// caller passes, with TensorDesc what dispatch sees. As for the C4 stores, the K cache's geometry
// and layout flags vLLM restates are checked by a binding against the cache, then dropped.
template <class Tensor>
struct C128StoreArguments {
  Tensor compressed_kv;    // f32 [T, 512]
  Tensor positions;        // i64
  Tensor slot_mapping;     // i64 [T]
  Tensor rms_norm_weight;  // f32 | bf16 [512]
  float eps = 1e-6f;       // rms_norm_eps
  Tensor cos_sin_cache;    // f32 [max_pos, 64]
  Tensor k_cache;          // u8 [N, B_k, 584] (ds_mla) | bf16 or e4m3 [N, B, 512] (full); written
  Tensor kv_slot_mapping;  // i64
  std::optional<Tensor> fp8_scale;
  // Launch with programmatic dependent launch (PDL): the kernel may start while the kernel
  // before it in the stream still runs, and waits for it before reading what it writes. A launch
  // option, not a key field (docs/DESIGN.md, "Programmatic dependent launch").
  bool pdl = false;

  static constexpr auto fields() {
    using A = C128StoreArguments;
    return std::tuple{input("compressed_kv", &A::compressed_kv),
                      input("positions", &A::positions,
                            indexes("cos_sin_cache", 1, "rows").read_where("kv_slot_mapping")),
                      input("slot_mapping", &A::slot_mapping),
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
using C128StoreArgs = C128StoreArguments<TensorRef>;
using C128StoreDescriptors = C128StoreArguments<TensorDesc>;

class C128StoreKernel final
    : public JitKernel<C128StoreKernel, C128StoreKey, C128StoreDescriptors> {
 public:
  // kv_cache_block_size = k_cache.shape[1]; kv_block_stride = k_cache's page stride in bytes
  // (the layout the cache was allocated with: round_up(B_k * 584, 576) by default, or a
  // larger shared page such as 39168).
  C128StoreKey dispatch(const C128StoreDescriptors& descriptors) const override;
  Program program(const C128StoreKey& key) const override;
  LaunchSpec<C128StoreKey> plan(const C128StoreKey& key, const C128StoreArgs& args) const;
  WarmupSpace<C128StoreDescriptors> warmup_space(const C128DsMlaStoreGate& gate) const;

  // The CPU reference of the kernel compiled for `key`, on the argument block plan() packs
  // (defined with the references, reference.cpp beside this file). Returns the rows written.
  static std::vector<long long> reference(const C128StoreKey& key,
                                          const zj::dsv4::C128StoreParams& params);

 private:
  friend JitKernel;
  C128StoreKernel() : JitKernel("dsv4.c128_store", embedded_files()) {}
};

class C128StoreFullKernel final
    : public JitKernel<C128StoreFullKernel, C128StoreFullKey, C128StoreDescriptors> {
 public:
  // store_full_fp8 = (k_cache dtype is e4m3).
  C128StoreFullKey dispatch(const C128StoreDescriptors& descriptors) const override;
  Program program(const C128StoreFullKey& key) const override;
  LaunchSpec<C128StoreFullKey> plan(const C128StoreFullKey& key, const C128StoreArgs& args) const;
  WarmupSpace<C128StoreDescriptors> warmup_space(const C128FullStoreGate& gate) const;

  // The CPU reference of the kernel compiled for `key`, on the argument block plan() packs
  // (defined with the references, reference.cpp beside this file). Returns the rows written.
  static std::vector<long long> reference(const C128StoreFullKey& key,
                                          const zj::dsv4::C128StoreFullParams& params);

 private:
  friend JitKernel;
  C128StoreFullKernel() : JitKernel("dsv4.c128_store_full", embedded_files()) {}
};

}  // namespace zerojit::dsv4
