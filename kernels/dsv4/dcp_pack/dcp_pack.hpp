// Owner of the DCP top-k candidate packing kernel (spec section 12): under decode context
// parallelism, turns each rank's local top-k indices into (score, global id) pairs that the
// group all-gathers before the exact global top-k selection. The rank is a runtime argument,
// so every rank of a group runs the same binary (spec 12.9).
#pragma once

#include <optional>
#include <tuple>

#include "dsv4/dcp_pack/dcp_pack_params.h"
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

// The call's arguments, in the order of vLLM's Python function (which zerojit's Python
// binding takes positionally). With TensorRef: what a caller passes; with TensorDesc: what
// dispatch sees (zerojit/arguments.hpp).
template <class Tensor>
struct DcpPackArguments {
  Tensor logits;        // f32 [R, N]
  Tensor topk_indices;  // i32 [R, K]
  Tensor packed;        // f32 [R, K, 2], any strides; written
  int dcp_rank = 0;
  int dcp_world_size = 2;
  int cp_interleave = 1;
  std::optional<Tensor> row_starts;  // i32 [R] (prefill) or none (decode)
  // Launch with programmatic dependent launch (PDL): the kernel may start while the kernel
  // before it in the stream still runs, and waits for it before reading what it writes. A launch
  // option, not a key field (docs/DESIGN.md, "Programmatic dependent launch").
  bool pdl = false;

  static constexpr auto fields() {
    using A = DcpPackArguments;
    return std::tuple{
        input("logits", &A::logits),
        input("topk_indices", &A::topk_indices),
        output("packed", &A::packed, allocated_like(DType::f32, "topk_indices", 2, {2})),
        scalar("dcp_rank", &A::dcp_rank),
        scalar("dcp_world_size", &A::dcp_world_size),
        scalar("cp_interleave", &A::cp_interleave),
        input("row_starts", &A::row_starts),
        launch_option("pdl", &A::pdl)};
  }
};
using DcpPackArgs = DcpPackArguments<TensorRef>;
using DcpPackDescriptors = DcpPackArguments<TensorDesc>;

class DcpPackKernel final : public JitKernel<DcpPackKernel, DcpPackKey, DcpPackDescriptors> {
 public:
  // topk = topk_indices.shape[1]; has_row_starts = row_starts given; world size and interleave
  // as given. Checks topk in {512, 1024, 2048}, world size >= 1, interleave >= 1.
  DcpPackKey dispatch(const DcpPackDescriptors& descriptors) const override;
  Program program(const DcpPackKey& key) const override;
  // Returns `packed`. R = 0 launches nothing.
  LaunchSpecWithOutputs<DcpPackKey, TensorRef> plan(const DcpPackKey& key,
                                                    const DcpPackArgs& args) const;
  // Decode (no row starts) and prefill (row starts) for one group shape.
  WarmupSpace<DcpPackDescriptors> warmup_space(const DcpPackGate& gate) const;
  // The CPU reference of the kernel compiled for `key`, on the argument block plan() packs
  // (defined with the references, reference.cpp; the tests and the Python module link it).
  static void reference(const DcpPackKey& key, const zj::dsv4::DcpPackParams& params);

 private:
  friend JitKernel;
  DcpPackKernel() : JitKernel("dsv4.dcp_pack", embedded_files()) {}
};

}  // namespace zerojit::dsv4
