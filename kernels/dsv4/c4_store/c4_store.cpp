#include "dsv4/c4_store/c4_store.hpp"

#include "dsv4/c4_store/c4_store_params.h"
#include "dsv4/compressor/checks.hpp"

namespace zerojit::dsv4 {

namespace params = zj::dsv4;

namespace {

// The state cache and the per-token vectors of both C4 kernels.
void check_c4_inputs(std::string_view kernel, const C4StoreArgs& a) {
  const ArgumentChecks checks(kernel);
  const TensorDesc& state = a.state_cache.desc;
  checks.tensor(state, "state_cache", {DType::f32}, 3);
  checks.size(state, "state_cache", 2, 2 * params::kC4StateWidth);
  checks.innermost_contiguous(state, "state_cache");
  checks.aligned(state, "state_cache", 16);
  checks.stride_bytes_multiple(state, "state_cache", 0, 64);
  checks.stride_bytes_multiple(state, "state_cache", 1, 64);
  checks.positive(state.size(1), "state_cache.shape[1] (state block size)");
  check_index_vector(kernel, a.slot_mapping.desc, "slot_mapping", DType::i64, state);
  check_index_vector(kernel, a.token_to_req.desc, "token_to_req_indices", DType::i32, state);
  check_index_vector(kernel, a.positions.desc, "positions", DType::i64, state);
  check_index_vector(kernel, a.kv_slot_mapping.desc, "kv_slot_mapping", DType::i64, state);
  checks.tensor(a.block_table.desc, "block_table", {DType::i32}, 2);
  checks.innermost_contiguous(a.block_table.desc, "block_table");
  checks.same_device(a.block_table.desc, "block_table", state);
  check_norm_weight(kernel, a.rms_norm_weight.desc, state);
  check_cos_sin_f32(kernel, a.cos_sin_cache.desc, state);
  if (!(a.eps > 0.0f)) {
    checks.fail("rms_norm_eps", "must be positive, got " + std::to_string(a.eps));
  }
}

template <class Params>
void fill_c4_common(Params& p, const C4StoreArgs& a) {
  p.state_cache = a.state_cache.as<const float>();
  p.state_block_stride = a.state_cache.desc.stride(0);
  p.state_row_stride = a.state_cache.desc.stride(1);
  p.state_block_size = a.state_cache.desc.size(1);
  p.token_to_req = a.token_to_req.as<const int>();
  p.num_token_to_req = a.token_to_req.desc.size(0);
  p.positions = a.positions.as<const long long>();
  p.num_positions = a.positions.desc.size(0);
  p.slot_mapping = a.slot_mapping.as<const long long>();
  p.num_tokens = a.slot_mapping.desc.size(0);
  p.block_table = a.block_table.as<const int>();
  p.block_table_stride = a.block_table.desc.stride(0);
  p.block_table_rows = a.block_table.desc.size(0);
  p.block_table_width = a.block_table.desc.size(1);
  p.rms_norm_weight = a.rms_norm_weight.data;
  p.eps = a.eps;
  p.cos_sin_cache = a.cos_sin_cache.as<const float>();
  p.cos_sin_stride = a.cos_sin_cache.desc.stride(0);
  p.k_cache = a.k_cache.as<unsigned char>();
  p.kv_slot_mapping = a.kv_slot_mapping.as<const long long>();
  p.num_kv_slots = a.kv_slot_mapping.desc.size(0);
  p.kv_cache_block_size = a.k_cache.desc.size(1);
}

LaunchGeometry c4_geometry(std::int64_t num_tokens, bool pdl) {
  LaunchGeometry geometry;
  geometry.grid.x = static_cast<std::uint32_t>(params::c4_store_grid(num_tokens));
  geometry.block.x = params::kC4StoreThreads;
  geometry.attributes.programmatic_serialization = pdl;
  return geometry;
}

// The descriptors of a C4 call with one token, a 4-row state block and the given cache.
C4StoreDescriptors c4_base(DType norm_weight_dtype, TensorDesc k_cache) {
  C4StoreDescriptors d;
  d.state_cache = TensorDesc::contiguous(DType::f32, {64, 4, 2 * params::kC4StateWidth});
  d.token_to_req = TensorDesc::contiguous(DType::i32, {1});
  d.positions = TensorDesc::contiguous(DType::i64, {1});
  d.slot_mapping = TensorDesc::contiguous(DType::i64, {1});
  d.block_table = TensorDesc::contiguous(DType::i32, {1, 64});
  d.rms_norm_weight = TensorDesc::contiguous(norm_weight_dtype, {params::kCompressorHeadSize});
  d.cos_sin_cache = TensorDesc::contiguous(DType::f32, {65536, params::kCompressorRopeDim});
  d.k_cache = k_cache;
  d.kv_slot_mapping = TensorDesc::contiguous(DType::i64, {1});
  return d;
}

void reject_unless(bool ok, const std::string& kernel, const std::string& key_text,
                   const char* what) {
  if (!ok) {
    throw InvalidArgument(kernel, "key",
                          "no kernel for " + key_text + ": this family is built for " + what);
  }
}

}  // namespace

// --- fp8_ds_mla -------------------------------------------------------------------------------

namespace {

// What both C4 kernels' keys take from the descriptors; `checks` names the dispatching kernel.
C4StoreKey c4_key(const ArgumentChecks& checks, const C4StoreDescriptors& d) {
  if (d.compress_ratio != params::kC4Ratio) {
    checks.fail("compress_ratio", "must be 4 (the C4 kernels pool overlapping windows of 4), got " +
                                      std::to_string(d.compress_ratio));
  }
  check_head_and_rope(checks, d.rms_norm_weight, d.cos_sin_cache);
  return C4StoreKey{.norm_weight_dtype = d.rms_norm_weight.dtype};
}

}  // namespace

C4StoreKey C4StoreKernel::dispatch(const C4StoreDescriptors& d) const {
  return c4_key(checks(), d);
}

Program C4StoreKernel::program(const C4StoreKey& key) const {
  reject_unless(key.norm_weight_dtype == DType::bf16 || key.norm_weight_dtype == DType::f32, name(),
                describe(key), "a bf16 or f32 norm weight");
  return make_program(
      key, "dsv4/c4_store/c4_store.cu",
      "zj::dsv4::c4_store_kernel<" + std::string(device_type_name(key.norm_weight_dtype)) + ">");
}

LaunchSpec<C4StoreKey> C4StoreKernel::plan(const C4StoreKey& key, const C4StoreArgs& a) const {
  check_c4_inputs(name(), a);
  const ArgumentChecks checks = this->checks();
  const TensorDesc& cache = a.k_cache.desc;
  checks.tensor(cache, "k_cache", {DType::u8}, 3);
  checks.size(cache, "k_cache", 2, params::kDsMlaRowBytes);
  checks.innermost_contiguous(cache, "k_cache");
  checks.aligned(cache, "k_cache", 16);
  checks.positive(cache.size(1), "k_cache.shape[1] (block size)");
  check_ds_mla_pages(checks, cache, 16);
  checks.same_device(cache, "k_cache", a.state_cache.desc);
  LaunchSpec<C4StoreKey> spec;
  spec.key = key;
  spec.device = a.state_cache.desc.device.ordinal;
  params::C4StoreParams p{};
  fill_c4_common(p, a);
  p.kv_block_stride_bytes = cache.stride(0);
  spec.geometry = c4_geometry(p.num_tokens, a.pdl);
  spec.args.push(p);
  return spec;
}

WarmupSpace<C4StoreDescriptors> C4StoreKernel::warmup_space(const C4DsMlaStoreGate& gate) const {
  const DType norm_weight_dtype = to_dtype(gate.norm_weight_dtype);
  const int block_size = gate.kv_cache_block_size;
  const std::int64_t page = (block_size * 584 + 575) / 576 * 576;
  const std::int64_t shape[] = {64, block_size, params::kDsMlaRowBytes};
  const std::int64_t strides[] = {page, params::kDsMlaRowBytes, 1};
  return WarmupSpace<C4StoreDescriptors>(
      c4_base(norm_weight_dtype, TensorDesc::strided(DType::u8, shape, strides)));
}

// --- full rows ----------------------------------------------------------------------------------

C4StoreFullKey C4StoreFullKernel::dispatch(const C4StoreDescriptors& d) const {
  const C4StoreKey base = c4_key(checks(), d);
  return C4StoreFullKey{.store_full_fp8 = d.k_cache.dtype == DType::e4m3,
                        .norm_weight_dtype = base.norm_weight_dtype};
}

Program C4StoreFullKernel::program(const C4StoreFullKey& key) const {
  reject_unless(key.norm_weight_dtype == DType::bf16 || key.norm_weight_dtype == DType::f32, name(),
                describe(key), "a bf16 or f32 norm weight");
  return make_program(key, "dsv4/c4_store/c4_store_full.cu",
                      "zj::dsv4::c4_store_full_kernel<" +
                          render_template_value(key.store_full_fp8) + ", " +
                          std::string(device_type_name(key.norm_weight_dtype)) + ">");
}

LaunchSpec<C4StoreFullKey> C4StoreFullKernel::plan(const C4StoreFullKey& key,
                                                   const C4StoreArgs& a) const {
  check_c4_inputs(name(), a);
  const TensorDesc& cache = a.k_cache.desc;
  const bool fp8 = check_full_cache(name(), cache, a.fp8_scale, a.state_cache.desc);
  LaunchSpec<C4StoreFullKey> spec;
  spec.key = key;
  spec.device = a.state_cache.desc.device.ordinal;
  params::C4StoreFullParams p{};
  fill_c4_common(p, a);
  p.kv_block_stride_bytes = stride_bytes(cache, 0);
  p.kv_row_stride_bytes = stride_bytes(cache, 1);
  p.fp8_scale = fp8 ? a.fp8_scale->as<const float>() : nullptr;
  spec.geometry = c4_geometry(p.num_tokens, a.pdl);
  spec.args.push(p);
  return spec;
}

WarmupSpace<C4StoreDescriptors> C4StoreFullKernel::warmup_space(const C4FullStoreGate& gate) const {
  const DType norm_weight_dtype = to_dtype(gate.norm_weight_dtype);
  const bool store_full_fp8 = gate.store_full_fp8;
  const int block_size = gate.kv_cache_block_size;
  C4StoreDescriptors base = c4_base(
      norm_weight_dtype, TensorDesc::contiguous(store_full_fp8 ? DType::e4m3 : DType::bf16,
                                                {64, block_size, params::kCompressorHeadSize}));
  if (store_full_fp8) base.fp8_scale = TensorDesc::contiguous(DType::f32, {1});
  return WarmupSpace<C4StoreDescriptors>(base);
}

}  // namespace zerojit::dsv4
