// Owner of the C128 compress kernel (spec section 5): for every boundary token, softmax-pool
// its 128 state rows into one FP32 row of compressed_kv [T, 512].
#pragma once

#include <optional>
#include <tuple>
#include <vector>

#include "dsv4/c128_compress/c128_compress_params.h"
#include "dsv4/c128_compress/gate.hpp"
#include "dsv4/owner_common.hpp"

namespace zerojit::dsv4 {

struct C128CompressKey {
  int head_size = 512;  // the kernel's template parameter (built for 512); the state is as wide
  // A prefill call (more than 1024 tokens): chunks are scanned by the whole CTA and each CTA
  // prefetches its next active token's rows; a decode call keeps the lean warp-scan kernel.
  bool cta_scan = false;

  static constexpr auto fields() {
    return std::tuple{field("head_size", &C128CompressKey::head_size),
                      field("cta_scan", &C128CompressKey::cta_scan)};
  }
  auto operator<=>(const C128CompressKey&) const = default;
};

// The call's arguments, in the order of vLLM's sparse_attn_compress_c128 and with its names
// (zerojit/arguments.hpp): with TensorRef what a caller passes, with TensorDesc what dispatch
// sees. vLLM's block_size restates state_cache.shape[1]: a binding checks it and drops it.
template <class Tensor>
struct C128CompressArguments {
  Tensor state_cache;    // f32 [n_blocks, 8, 2 * state_width]
  Tensor token_to_req;   // token_to_req_indices: i32
  Tensor positions;      // i64
  Tensor slot_mapping;   // i64 [T]
  Tensor block_table;    // i32 [reqs, blocks]
  Tensor compressed_kv;  // f32 [T, head_size]; written
  // Launch with programmatic dependent launch (PDL): the kernel may start while the kernel
  // before it in the stream still runs, and waits for it before reading what it writes. A launch
  // option, not a key field (docs/DESIGN.md, "Programmatic dependent launch").
  bool pdl = false;

  static constexpr auto fields() {
    using A = C128CompressArguments;
    return std::tuple{
        input("state_cache", &A::state_cache),
        input("token_to_req_indices", &A::token_to_req),
        input("positions", &A::positions),
        input("slot_mapping", &A::slot_mapping),
        input("block_table", &A::block_table, indexes("state_cache", 1, "blocks")),
        repeated_size("block_size", "state_cache", 1),
        output("compressed_kv", &A::compressed_kv,
               allocated_like(DType::f32, "slot_mapping", 1, {zj::dsv4::kCompressorHeadSize})),
        launch_option("pdl", &A::pdl)};
  }
};
using C128CompressArgs = C128CompressArguments<TensorRef>;
using C128CompressDescriptors = C128CompressArguments<TensorDesc>;

class C128CompressKernel final
    : public JitKernel<C128CompressKernel, C128CompressKey, C128CompressDescriptors> {
 public:
  // head_size = compressed_kv.shape[1], state_width = state_cache.shape[2] / 2, cta_scan =
  // slot_mapping.shape[0] > 1024 (kC128CompressDecodeTokens).
  C128CompressKey dispatch(const C128CompressDescriptors& descriptors) const override;
  // Serving through a miss (fallback.hpp): a prefill call whose CTA-scan key was not warmed is
  // served by the warp-scan (decode) kernel, which takes any token count.
  std::optional<C128CompressKey> fallback(const C128CompressKey& key) const {
    if (!key.cta_scan) return std::nullopt;
    return C128CompressKey{key.head_size, false};
  }
  // Builds head 512 with state width 512, either scan.
  Program program(const C128CompressKey& key) const override;
  // Returns compressed_kv, the plan's declared output.
  LaunchSpecWithOutputs<C128CompressKey, TensorRef> plan(const C128CompressKey& key,
                                                         const C128CompressArgs& args) const;
  WarmupSpace<C128CompressDescriptors> warmup_space(const C128CompressGate& gate) const;

  // The CPU reference of the kernel compiled for `key`, on the argument block plan() packs
  // (defined with the references, reference.cpp beside this file). Returns the rows written.
  static std::vector<long long> reference(const C128CompressKey& key,
                                          const zj::dsv4::C128CompressParams& params);

 private:
  friend JitKernel;
  C128CompressKernel() : JitKernel("dsv4.c128_compress", embedded_files()) {}
};

}  // namespace zerojit::dsv4
