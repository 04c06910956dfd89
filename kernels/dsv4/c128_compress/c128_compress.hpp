// Owner of the C128 compress kernel (spec section 5): for every boundary token, softmax-pool
// its 128 state rows into one FP32 row of compressed_kv [T, 512].
#pragma once

#include <tuple>

#include "dsv4/c128_compress/gate.hpp"
#include "dsv4/owner_common.hpp"

namespace zerojit::dsv4 {

struct C128CompressKey {
  int head_size = 512;
  int state_width = 512;
  // A prefill call (more than 1024 tokens): chunks are scanned by the whole CTA and each CTA
  // prefetches its next active token's rows; a decode call keeps the lean warp-scan kernel.
  bool cta_scan = false;

  static constexpr auto fields() {
    return std::tuple{field("head_size", &C128CompressKey::head_size),
                      field("state_width", &C128CompressKey::state_width),
                      field("cta_scan", &C128CompressKey::cta_scan)};
  }
  auto operator<=>(const C128CompressKey&) const = default;
};

struct C128CompressDescriptors {
  TensorDesc state_cache;    // f32 [n_blocks, 8, 2 * state_width]
  TensorDesc token_to_req;   // i32
  TensorDesc positions;      // i64
  TensorDesc slot_mapping;   // i64 [T]
  TensorDesc block_table;    // i32 [reqs, blocks]
  TensorDesc compressed_kv;  // f32 [T, head_size]

  static constexpr auto fields() {
    return std::tuple{field("state_cache", &C128CompressDescriptors::state_cache),
                      field("token_to_req", &C128CompressDescriptors::token_to_req),
                      field("positions", &C128CompressDescriptors::positions),
                      field("slot_mapping", &C128CompressDescriptors::slot_mapping),
                      field("block_table", &C128CompressDescriptors::block_table),
                      field("compressed_kv", &C128CompressDescriptors::compressed_kv)};
  }
};

struct C128CompressArgs {
  TensorRef state_cache;
  TensorRef token_to_req;
  TensorRef positions;
  TensorRef slot_mapping;
  TensorRef block_table;
  TensorRef compressed_kv;  // output; rows of inactive tokens stay unwritten
  // Launch with programmatic dependent launch (PDL): the kernel may start while the kernel
  // before it in the stream still runs, and waits for it before reading what it writes. A launch
  // option, not a key field (docs/DESIGN.md, "Programmatic dependent launch").
  bool pdl = false;

  C128CompressDescriptors descriptors() const {
    return {state_cache.desc,  token_to_req.desc, positions.desc,
            slot_mapping.desc, block_table.desc,  compressed_kv.desc};
  }
};

class C128CompressKernel final
    : public JitKernel<C128CompressKernel, C128CompressKey, C128CompressDescriptors> {
 public:
  // head_size = compressed_kv.shape[1], state_width = state_cache.shape[2] / 2, cta_scan =
  // slot_mapping.shape[0] > 1024 (kC128CompressDecodeTokens).
  C128CompressKey dispatch(const C128CompressDescriptors& descriptors) const override;
  // Builds head 512 with state width 512, either scan.
  Program program(const C128CompressKey& key) const override;
  // Returns compressed_kv, the plan's declared output.
  LaunchSpecWithOutputs<C128CompressKey, TensorRef> plan(const C128CompressArgs& args) const;
  WarmupSpace<C128CompressDescriptors> warmup_space(const C128CompressGate& gate) const;

 private:
  friend JitKernel;
  C128CompressKernel() : JitKernel("dsv4.c128_compress", embedded_files()) {}
};

}  // namespace zerojit::dsv4
