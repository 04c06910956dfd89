// Owner of the dequantize-and-gather kernel (spec section 2): fp8_ds_mla paged K cache rows ->
// a BF16 workspace [num_reqs, M, 512] for sparse/SWA prefill.
#pragma once

#include <optional>
#include <tuple>

#include "dsv4/dequant_gather/dequant_gather_params.h"
#include "dsv4/dequant_gather/gate.hpp"
#include "dsv4/owner_common.hpp"

namespace zerojit::dsv4 {

struct DequantGatherKey {
  int block_size = 256;  // B: rows per page of the cache read
  bool has_gather_lens = true;

  static constexpr auto fields() {
    return std::tuple{field("block_size", &DequantGatherKey::block_size),
                      field("has_gather_lens", &DequantGatherKey::has_gather_lens)};
  }
  auto operator<=>(const DequantGatherKey&) const = default;
};

// The call's arguments, in the order of vLLM's dequantize_and_gather_k_cache
// (zerojit/arguments.hpp): with TensorRef what a caller passes, with TensorDesc what dispatch
// sees. vLLM's block_size restates k_cache.shape[1]: a binding checks it and drops it.
template <class Tensor>
struct DequantGatherArguments {
  Tensor out;                         // bf16 [num_reqs, M, 512]; written
  Tensor k_cache;                     // u8 [num_blocks, B, 584]
  Tensor seq_lens;                    // i32 [num_reqs]
  std::optional<Tensor> gather_lens;  // i32 [num_reqs] or none
  Tensor block_table;                 // i32 [num_reqs, max_blocks]
  std::int64_t offset = 0;            // first destination row
  // Launch with programmatic dependent launch (PDL): the kernel may start while the kernel
  // before it in the stream still runs, and waits for it before reading what it writes. A launch
  // option, not a key field (docs/DESIGN.md, "Programmatic dependent launch").
  bool pdl = false;

  static constexpr auto fields() {
    using A = DequantGatherArguments;
    return std::tuple{output("out", &A::out),
                      input("k_cache", &A::k_cache),
                      input("seq_lens", &A::seq_lens),
                      input("gather_lens", &A::gather_lens),
                      input("block_table", &A::block_table, indexes("k_cache", 1, "pages")),
                      repeated_size("block_size", "k_cache", 1),
                      scalar("offset", &A::offset),
                      launch_option("pdl", &A::pdl)};
  }
};
using DequantGatherArgs = DequantGatherArguments<TensorRef>;
using DequantGatherDescriptors = DequantGatherArguments<TensorDesc>;

class DequantGatherKernel final
    : public JitKernel<DequantGatherKernel, DequantGatherKey, DequantGatherDescriptors> {
 public:
  // block_size = k_cache.shape[1]; has_gather_lens = gather_lens is given.
  DequantGatherKey dispatch(const DequantGatherDescriptors& descriptors) const override;
  Program program(const DequantGatherKey& key) const override;
  // Validates everything (dtypes, shapes, strides, alignment, device, offset) and returns the
  // launch; rows of `out` outside [offset, offset + G) are never written.
  LaunchSpec<DequantGatherKey> plan(const DequantGatherKey& key,
                                    const DequantGatherArgs& args) const;

  // One point per (block_size, has_gather_lens) call the runtime makes (zipped).
  WarmupSpace<DequantGatherDescriptors> warmup_space(const DequantGatherGate& gate) const;

  // The CPU reference of the kernel compiled for `key`, on the argument block plan() packs
  // (defined with the references, reference.cpp beside this file).
  static void reference(const DequantGatherKey& key, const zj::dsv4::DequantGatherParams& params);

 private:
  friend JitKernel;
  DequantGatherKernel() : JitKernel("dsv4.dequant_gather", embedded_files()) {}
};

}  // namespace zerojit::dsv4
