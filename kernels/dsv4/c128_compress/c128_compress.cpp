#include "dsv4/c128_compress/c128_compress.hpp"

#include "dsv4/c128_compress/c128_compress_params.h"
#include "dsv4/compressor/checks.hpp"
#include "zerojit/cuda.hpp"

namespace zerojit::dsv4 {

namespace params = zj::dsv4;

C128CompressKey C128CompressKernel::dispatch(const C128CompressDescriptors& d) const {
  const ArgumentChecks checks = this->checks();
  checks.tensor(d.compressed_kv, "compressed_kv", {DType::f32}, 2);
  checks.tensor(d.state_cache, "state_cache", {DType::f32}, 3);
  checks.tensor(d.slot_mapping, "slot_mapping", {DType::i64}, 1);
  checks.fits_int32(d.compressed_kv.size(1), "compressed_kv", "the head size (shape[1])");
  C128CompressKey key{static_cast<int>(d.compressed_kv.size(1)),
                      d.slot_mapping.size(0) > params::kC128CompressDecodeTokens};
  if (key.head_size % 64 != 0) {
    checks.fail("compressed_kv",
                "head size must be a multiple of 64, got " + to_string(d.compressed_kv));
  }
  // The state rows hold a score and a value per element: twice the head (a state width of its
  // own is not a key field, as the kernel has none).
  checks.size(d.state_cache, "state_cache", 2, 2 * std::int64_t{key.head_size});
  return key;
}

Program C128CompressKernel::program(const C128CompressKey& key) const {
  if (key.head_size != params::kCompressorHeadSize) {
    throw InvalidArgument(name(), "key",
                          "no kernel for " + describe(key) + ": this family is built for head 512");
  }
  return make_program(key, "dsv4/c128_compress/c128_compress.cu",
                      "zj::dsv4::c128_compress_kernel<" + std::to_string(key.head_size) +
                          (key.cta_scan ? ", true>" : ", false>"));
}

LaunchSpecWithOutputs<C128CompressKey, TensorRef> C128CompressKernel::plan(
    const C128CompressKey& key, const C128CompressArgs& a) const {
  const ArgumentChecks checks = this->checks();
  const TensorDesc& state = a.state_cache.desc;
  checks.size(state, "state_cache", 1, params::kC128StateBlockSize);  // dispatch checked dim 2
  checks.innermost_contiguous(state, "state_cache");
  checks.aligned(state, "state_cache", 16);
  checks.stride_bytes_multiple(state, "state_cache", 0, 64);
  checks.stride_bytes_multiple(state, "state_cache", 1, 64);
  check_index_vector(name(), a.slot_mapping.desc, "slot_mapping", DType::i64, state);
  check_index_vector(name(), a.token_to_req.desc, "token_to_req_indices", DType::i32, state);
  check_index_vector(name(), a.positions.desc, "positions", DType::i64, state);
  checks.tensor(a.block_table.desc, "block_table", {DType::i32}, 2);
  checks.innermost_contiguous(a.block_table.desc, "block_table");
  checks.same_device(a.block_table.desc, "block_table", state);
  const std::int64_t tokens = a.slot_mapping.desc.size(0);
  checks.size(a.compressed_kv.desc, "compressed_kv", 0, tokens);
  checks.size(a.compressed_kv.desc, "compressed_kv", 1, params::kCompressorHeadSize);
  checks.contiguous(a.compressed_kv.desc, "compressed_kv");
  checks.aligned(a.compressed_kv.desc, "compressed_kv", 16);
  checks.same_device(a.compressed_kv.desc, "compressed_kv", state);

  params::C128CompressParams p{};
  p.state_cache = a.state_cache.as<const float>();
  p.state_block_stride = state.stride(0);
  p.state_row_stride = state.stride(1);
  p.state_block_size = state.size(1);
  p.token_to_req = a.token_to_req.as<const int>();
  p.num_token_to_req = a.token_to_req.desc.size(0);
  p.positions = a.positions.as<const long long>();
  p.num_positions = a.positions.desc.size(0);
  p.slot_mapping = a.slot_mapping.as<const long long>();
  p.num_tokens = tokens;
  p.block_table = a.block_table.as<const int>();
  p.block_table_stride = a.block_table.desc.stride(0);
  p.block_table_rows = a.block_table.desc.size(0);
  p.block_table_width = a.block_table.desc.size(1);
  p.compressed_kv = a.compressed_kv.as<float>();
  LaunchSpecWithOutputs<C128CompressKey, TensorRef> spec{key, {}, {}, a.compressed_kv};
  spec.device = state.device.ordinal;
  const int multiprocessors = cuda::multiprocessor_count(spec.device);
  spec.geometry.grid.x =
      static_cast<std::uint32_t>(params::c128_compress_grid(tokens, multiprocessors));
  spec.geometry.shared_bytes = key.cta_scan ? params::kC128CompressWideListBytes : 0;
  spec.geometry.block.x = params::kC128CompressThreads;
  spec.geometry.attributes.programmatic_serialization = a.pdl;
  spec.args.push(p);
  return spec;
}

WarmupSpace<C128CompressDescriptors> C128CompressKernel::warmup_space(
    const C128CompressGate& gate) const {
  const int head_size = gate.head_size;
  C128CompressDescriptors d;
  d.state_cache =
      TensorDesc::contiguous(DType::f32, {64, params::kC128StateBlockSize, 2 * head_size});
  d.token_to_req = TensorDesc::contiguous(DType::i32, {1});
  d.positions = TensorDesc::contiguous(DType::i64, {1});
  d.slot_mapping = TensorDesc::contiguous(DType::i64, {1});
  d.block_table = TensorDesc::contiguous(DType::i32, {1, 64});
  d.compressed_kv = TensorDesc::contiguous(DType::f32, {1, head_size});
  // Decode and prefill calls: dispatch picks the scan by the token count.
  WarmupSpace<C128CompressDescriptors> space(d);
  space.advance("num_tokens", 1, gate.max_num_tokens, next_power_of_two,
                [](C128CompressDescriptors& desc, std::int64_t tokens) {
                  desc.token_to_req.shape[0] = tokens;
                  desc.positions.shape[0] = tokens;
                  desc.slot_mapping.shape[0] = tokens;
                  desc.compressed_kv.shape[0] = tokens;
                });
  return space;
}

}  // namespace zerojit::dsv4
