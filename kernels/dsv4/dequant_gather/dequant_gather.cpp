#include "dsv4/dequant_gather/dequant_gather.hpp"

#include "dsv4/dequant_gather/dequant_gather_params.h"

namespace zerojit::dsv4 {

namespace params = zj::dsv4;

DequantGatherKey DequantGatherKernel::dispatch(const DequantGatherDescriptors& d) const {
  const ArgumentChecks checks = this->checks();
  checks.tensor(d.k_cache, "k_cache", {DType::u8}, 3);
  checks.positive(d.k_cache.size(1), "k_cache.shape[1] (block size)");
  checks.fits_int32(d.k_cache.size(1), "k_cache", "the block size (shape[1])");
  return DequantGatherKey{static_cast<int>(d.k_cache.size(1)), d.gather_lens.has_value()};
}

Program DequantGatherKernel::program(const DequantGatherKey& key) const {
  if (key.block_size < 1) {
    throw InvalidArgument(name(), "key",
                          "block_size must be positive, got " + std::to_string(key.block_size));
  }
  return make_program(key, "dsv4/dequant_gather/dequant_gather.cu",
                      instantiate("zj::dsv4::dequant_gather_kernel", key));
}

LaunchSpec<DequantGatherKey> DequantGatherKernel::plan(const DequantGatherKey& key,
                                                       const DequantGatherArgs& a) const {
  const ArgumentChecks checks = this->checks();
  const TensorDesc& out = a.out.desc;
  checks.tensor(out, "out", {DType::bf16}, 3);
  checks.size(out, "out", 2, params::kDequantGatherHeadDim);
  checks.innermost_contiguous(out, "out");
  checks.aligned(out, "out", 16);
  checks.stride_bytes_multiple(out, "out", 0, 16);
  checks.stride_bytes_multiple(out, "out", 1, 16);
  checks.distinct_elements(out, "out");
  const std::int64_t num_reqs = out.size(0);
  // grid.x is the request count.
  if (num_reqs > INT32_MAX)
    checks.fail("out", "holds more than 2^31 - 1 requests: " + to_string(out));
  const std::int64_t rows = out.size(1);

  const TensorDesc& cache = a.k_cache.desc;
  checks.size(cache, "k_cache", 2,
              params::kDequantGatherTokenBytes + params::kDequantGatherScaleBytes);
  checks.innermost_contiguous(cache, "k_cache");
  checks.aligned(cache, "k_cache", 32);
  check_ds_mla_pages(checks, cache, 32);
  checks.same_device(cache, "k_cache", out);

  checks.tensor(a.seq_lens.desc, "seq_lens", {DType::i32}, 1);
  checks.size(a.seq_lens.desc, "seq_lens", 0, num_reqs);
  checks.contiguous(a.seq_lens.desc, "seq_lens");
  checks.same_device(a.seq_lens.desc, "seq_lens", out);
  if (a.gather_lens) {
    checks.tensor(a.gather_lens->desc, "gather_lens", {DType::i32}, 1);
    checks.size(a.gather_lens->desc, "gather_lens", 0, num_reqs);
    checks.contiguous(a.gather_lens->desc, "gather_lens");
    checks.same_device(a.gather_lens->desc, "gather_lens", out);
  }
  checks.tensor(a.block_table.desc, "block_table", {DType::i32}, 2);
  checks.size(a.block_table.desc, "block_table", 0, num_reqs);
  checks.innermost_contiguous(a.block_table.desc, "block_table");
  checks.same_device(a.block_table.desc, "block_table", out);
  if (a.offset < 0 || a.offset > rows) {
    checks.fail("offset",
                "must be in [0, " + std::to_string(rows) + "], got " + std::to_string(a.offset));
  }

  params::DequantGatherParams p{};
  p.out = a.out.as<unsigned short>();
  p.out_req_stride = out.stride(0);
  p.out_row_stride = out.stride(1);
  p.num_rows_out = rows;
  p.k_cache = a.k_cache.as<const unsigned char>();
  p.page_stride_bytes = cache.stride(0);
  p.seq_lens = a.seq_lens.as<const int>();
  p.gather_lens = a.gather_lens ? a.gather_lens->as<const int>() : nullptr;
  p.block_table = a.block_table.as<const int>();
  p.block_table_row_stride = a.block_table.desc.stride(0);
  p.max_blocks = a.block_table.desc.size(1);
  p.offset = a.offset;
  p.num_reqs = num_reqs;
  p.num_workers = params::dequant_gather_num_workers(rows, a.offset, num_reqs);

  LaunchSpec<DequantGatherKey> spec;
  spec.key = key;
  spec.device = out.device.ordinal;
  spec.geometry.grid = {static_cast<std::uint32_t>(num_reqs),
                        static_cast<std::uint32_t>(p.num_workers), 1};
  spec.geometry.block.x = params::kDequantGatherThreadsPerBlock;
  spec.geometry.attributes.programmatic_serialization = a.pdl;
  spec.args.push(p);
  return spec;
}

WarmupSpace<DequantGatherDescriptors> DequantGatherKernel::warmup_space(
    const DequantGatherGate& gate) const {
  DequantGatherDescriptors base;
  base.out = TensorDesc::contiguous(DType::bf16, {1, 1024, params::kDequantGatherHeadDim});
  base.seq_lens = TensorDesc::contiguous(DType::i32, {1});
  base.block_table = TensorDesc::contiguous(DType::i32, {1, 64});
  WarmupSpace<DequantGatherDescriptors> space(base);
  space.zip(
      {"block_size", "has_gather_lens"}, gate.calls,
      [](DequantGatherDescriptors& d, const DequantGatherCall& call) {
        const std::int64_t page = (call.block_size * 584 + 575) / 576 * 576;
        const std::int64_t shape[] = {64, call.block_size, 584};
        const std::int64_t strides[] = {page, 584, 1};
        d.k_cache = TensorDesc::strided(DType::u8, shape, strides);
        d.gather_lens = call.has_gather_lens
                            ? std::optional<TensorDesc>(TensorDesc::contiguous(DType::i32, {1}))
                            : std::nullopt;
      },
      std::function<std::string(const DequantGatherCall&)>([](const DequantGatherCall& call) {
        return std::to_string(call.block_size) + (call.has_gather_lens ? "+gather" : "");
      }));
  return space;
}

}  // namespace zerojit::dsv4
