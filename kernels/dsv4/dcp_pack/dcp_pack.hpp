// Owner of the DCP top-k candidate packing kernel (spec section 12): under decode context
// parallelism, turns each rank's local top-k indices into (score, global id) pairs that the
// group all-gathers before the exact global top-k selection. The rank is a runtime argument,
// so every rank of a group runs the same binary (spec 12.9).
#pragma once

#include <optional>
#include <tuple>

#include "dsv4/dcp_pack/gate.hpp"
#include "dsv4/owner_common.hpp"

namespace zerojit::dsv4 {

struct DcpPackKey {
  int topk = 512;
  bool has_row_starts = false;
  int dcp_world_size = 2;
  int cp_interleave = 1;

  static constexpr auto fields() {
    return std::tuple{field("topk", &DcpPackKey::topk),
                      field("has_row_starts", &DcpPackKey::has_row_starts),
                      field("dcp_world_size", &DcpPackKey::dcp_world_size),
                      field("cp_interleave", &DcpPackKey::cp_interleave)};
  }
  auto operator<=>(const DcpPackKey&) const = default;
};

struct DcpPackDescriptors {
  TensorDesc logits;                     // f32 [R, N]
  TensorDesc topk_indices;               // i32 [R, K]
  std::optional<TensorDesc> row_starts;  // i32 [R] (prefill) or none (decode)
  TensorDesc packed;                     // f32 [R, K, 2], any strides
  int dcp_rank = 0;
  int dcp_world_size = 2;
  int cp_interleave = 1;

  static constexpr auto fields() {
    return std::tuple{field("logits", &DcpPackDescriptors::logits),
                      field("topk_indices", &DcpPackDescriptors::topk_indices),
                      field("row_starts", &DcpPackDescriptors::row_starts),
                      field("packed", &DcpPackDescriptors::packed),
                      field("dcp_rank", &DcpPackDescriptors::dcp_rank),
                      field("dcp_world_size", &DcpPackDescriptors::dcp_world_size),
                      field("cp_interleave", &DcpPackDescriptors::cp_interleave)};
  }
};

struct DcpPackArgs {
  TensorRef logits;
  TensorRef topk_indices;
  std::optional<TensorRef> row_starts;
  TensorRef packed;  // output
  int dcp_rank = 0;
  int dcp_world_size = 2;
  int cp_interleave = 1;
  // Launch with programmatic dependent launch (PDL): the kernel may start while the kernel
  // before it in the stream still runs, and waits for it before reading what it writes. A launch
  // option, not a key field (docs/DESIGN.md, "Programmatic dependent launch").
  bool pdl = false;

  DcpPackDescriptors descriptors() const {
    return {logits.desc,
            topk_indices.desc,
            row_starts ? std::optional<TensorDesc>(row_starts->desc) : std::nullopt,
            packed.desc,
            dcp_rank,
            dcp_world_size,
            cp_interleave};
  }
};

class DcpPackKernel final : public JitKernel<DcpPackKernel, DcpPackKey, DcpPackDescriptors> {
 public:
  // topk = topk_indices.shape[1]; has_row_starts = row_starts given; world size and interleave
  // as given. Checks topk in {512, 1024, 2048}, world size >= 1, interleave >= 1.
  DcpPackKey dispatch(const DcpPackDescriptors& descriptors) const override;
  Program program(const DcpPackKey& key) const override;
  // Returns `packed`. R = 0 launches nothing.
  LaunchSpecWithOutputs<DcpPackKey, TensorRef> plan(const DcpPackArgs& args) const;
  // Decode (no row starts) and prefill (row starts) for one group shape.
  WarmupSpace<DcpPackDescriptors> warmup_space(const DcpPackGate& gate) const;

 private:
  friend JitKernel;
  DcpPackKernel() : JitKernel("dsv4.dcp_pack", embedded_files()) {}
};

}  // namespace zerojit::dsv4
