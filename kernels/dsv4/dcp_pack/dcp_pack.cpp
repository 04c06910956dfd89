#include "dsv4/dcp_pack/dcp_pack.hpp"

#include "dsv4/dcp_pack/dcp_pack_params.h"

namespace zerojit::dsv4 {

namespace params = zj::dsv4;

DcpPackKey DcpPackKernel::dispatch(const DcpPackDescriptors& d) const {
  const ArgumentChecks checks = this->checks();
  checks.tensor(d.topk_indices, "topk_indices", {DType::i32}, 2);
  checks.fits_int32(d.topk_indices.size(1), "topk_indices", "top-k (shape[1])");
  DcpPackKey key{static_cast<int>(d.topk_indices.size(1)), d.row_starts.has_value(),
                 d.dcp_world_size, d.cp_interleave};
  if (key.topk != 512 && key.topk != 1024 && key.topk != 2048) {
    checks.fail("topk_indices",
                "top-k (shape[1]) must be 512, 1024 or 2048, got " + to_string(d.topk_indices));
  }
  checks.positive(key.dcp_world_size, "dcp_world_size");
  checks.positive(key.cp_interleave, "cp_interleave");
  return key;
}

Program DcpPackKernel::program(const DcpPackKey& key) const {
  if ((key.topk != 512 && key.topk != 1024 && key.topk != 2048) || key.dcp_world_size < 1 ||
      key.cp_interleave < 1) {
    throw InvalidArgument(name(), "key", "no kernel for " + describe(key));
  }
  return make_program(key, "dsv4/dcp_pack/dcp_pack.cu",
                      instantiate("zj::dsv4::dcp_pack_kernel", key));
}

LaunchSpecWithOutputs<DcpPackKey, TensorRef> DcpPackKernel::plan(const DcpPackKey& key,
                                                                 const DcpPackArgs& a) const {
  const ArgumentChecks checks = this->checks();
  if (a.dcp_rank < 0 || a.dcp_rank >= a.dcp_world_size) {
    checks.fail("dcp_rank", "must be in [0, " + std::to_string(a.dcp_world_size) + "), got " +
                                std::to_string(a.dcp_rank));
  }
  const TensorDesc& logits = a.logits.desc;
  checks.tensor(logits, "logits", {DType::f32}, 2);
  const std::int64_t rows = logits.size(0);
  if (rows > params::kDcpPackMaxRows) checks.fail("logits", "has more rows than a grid can hold");
  checks.size(a.topk_indices.desc, "topk_indices", 0, rows);
  checks.same_device(a.topk_indices.desc, "topk_indices", logits);
  if (a.row_starts) {
    checks.tensor(a.row_starts->desc, "row_starts", {DType::i32}, 1);
    checks.size(a.row_starts->desc, "row_starts", 0, rows);
    checks.contiguous(a.row_starts->desc, "row_starts");
    checks.same_device(a.row_starts->desc, "row_starts", logits);
  }
  checks.tensor(a.packed.desc, "packed", {DType::f32}, 3);
  checks.size(a.packed.desc, "packed", 0, rows);
  checks.size(a.packed.desc, "packed", 1, key.topk);
  checks.size(a.packed.desc, "packed", 2, 2);
  checks.distinct_elements(a.packed.desc, "packed");
  checks.same_device(a.packed.desc, "packed", logits);

  params::DcpPackParams p{};
  p.logits = a.logits.as<const float>();
  p.logits_stride_row = logits.stride(0);
  p.logits_stride_col = logits.stride(1);
  p.num_cols = logits.size(1);
  p.topk_indices = a.topk_indices.as<const int>();
  p.topk_indices_stride_row = a.topk_indices.desc.stride(0);
  p.topk_indices_stride_col = a.topk_indices.desc.stride(1);
  p.row_starts = a.row_starts ? a.row_starts->as<const int>() : nullptr;
  p.packed = a.packed.as<float>();
  p.packed_stride_row = a.packed.desc.stride(0);
  p.packed_stride_col = a.packed.desc.stride(1);
  p.packed_stride_pair = a.packed.desc.stride(2);
  p.num_rows = rows;
  p.rank = a.dcp_rank;
  const params::DcpPackGrid grid = params::dcp_pack_grid(rows, key.topk);
  LaunchSpecWithOutputs<DcpPackKey, TensorRef> spec{key, {}, {}, a.packed};
  spec.device = logits.device.ordinal;
  spec.geometry.grid = {static_cast<std::uint32_t>(grid.rows),
                        static_cast<std::uint32_t>(grid.tiles), 1};
  spec.geometry.block.x = params::kDcpPackThreadsPerBlock;
  spec.geometry.attributes.programmatic_serialization = a.pdl;
  spec.args.push(p);
  return spec;
}

WarmupSpace<DcpPackDescriptors> DcpPackKernel::warmup_space(const DcpPackGate& gate) const {
  DcpPackDescriptors base;
  base.logits = TensorDesc::contiguous(DType::f32, {1, 4096});
  base.topk_indices = TensorDesc::contiguous(DType::i32, {1, gate.topk});
  base.packed = TensorDesc::contiguous(DType::f32, {1, gate.topk, 2});
  base.dcp_world_size = gate.dcp_world_size;
  base.cp_interleave = gate.cp_interleave;
  WarmupSpace<DcpPackDescriptors> space(base);
  space.choices(
      "has_row_starts", std::vector<bool>{false, true}, [](DcpPackDescriptors& d, bool has) {
        d.row_starts =
            has ? std::optional<TensorDesc>(TensorDesc::contiguous(DType::i32, {1})) : std::nullopt;
      });
  return space;
}

}  // namespace zerojit::dsv4
