// Owner of the dequantize-and-gather kernel (spec section 2): fp8_ds_mla paged K cache rows ->
// a BF16 workspace [num_reqs, M, 512] for sparse/SWA prefill.
#pragma once

#include <optional>
#include <tuple>

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

struct DequantGatherDescriptors {
  TensorDesc out;                         // bf16 [num_reqs, M, 512]
  TensorDesc k_cache;                     // u8 [num_blocks, B, 584]
  TensorDesc seq_lens;                    // i32 [num_reqs]
  std::optional<TensorDesc> gather_lens;  // i32 [num_reqs] or none
  TensorDesc block_table;                 // i32 [num_reqs, max_blocks]

  static constexpr auto fields() {
    return std::tuple{field("out", &DequantGatherDescriptors::out),
                      field("k_cache", &DequantGatherDescriptors::k_cache),
                      field("seq_lens", &DequantGatherDescriptors::seq_lens),
                      field("gather_lens", &DequantGatherDescriptors::gather_lens),
                      field("block_table", &DequantGatherDescriptors::block_table)};
  }
};

struct DequantGatherArgs {
  TensorRef out;
  TensorRef k_cache;
  TensorRef seq_lens;
  std::optional<TensorRef> gather_lens;
  TensorRef block_table;
  std::int64_t offset = 0;  // first destination row
  // Launch with programmatic dependent launch (PDL): the kernel may start while the kernel
  // before it in the stream still runs, and waits for it before reading what it writes. A launch
  // option, not a key field (docs/DESIGN.md, "Programmatic dependent launch").
  bool pdl = false;

  DequantGatherDescriptors descriptors() const {
    return {out.desc, k_cache.desc, seq_lens.desc,
            gather_lens ? std::optional<TensorDesc>(gather_lens->desc) : std::nullopt,
            block_table.desc};
  }
};

class DequantGatherKernel final
    : public JitKernel<DequantGatherKernel, DequantGatherKey, DequantGatherDescriptors> {
 public:
  // block_size = k_cache.shape[1]; has_gather_lens = gather_lens is given.
  DequantGatherKey dispatch(const DequantGatherDescriptors& descriptors) const override;
  Program program(const DequantGatherKey& key) const override;
  // Validates everything (dtypes, shapes, strides, alignment, device, offset) and returns the
  // launch; rows of `out` outside [offset, offset + G) are never written.
  LaunchSpec<DequantGatherKey> plan(const DequantGatherArgs& args) const;

  // One point per (block_size, has_gather_lens) call the runtime makes (zipped).
  WarmupSpace<DequantGatherDescriptors> warmup_space(const DequantGatherGate& gate) const;

 private:
  friend JitKernel;
  DequantGatherKernel() : JitKernel("dsv4.dequant_gather", embedded_files()) {}
};

}  // namespace zerojit::dsv4
