#include "dsv4/c128_store/c128_store.hpp"

#include "dsv4/c128_store/c128_store_params.h"
#include "dsv4/compressor/checks.hpp"

namespace zerojit::dsv4 {

namespace params = zj::dsv4;

namespace {

void check_c128_inputs(std::string_view kernel, const C128StoreArgs& a) {
  const ArgumentChecks checks(kernel);
  const TensorDesc& kv = a.compressed_kv.desc;
  checks.tensor(kv, "compressed_kv", {DType::f32}, 2);
  checks.size(kv, "compressed_kv", 1, params::kCompressorHeadSize);
  checks.contiguous(kv, "compressed_kv");
  checks.aligned(kv, "compressed_kv", 16);
  check_index_vector(kernel, a.slot_mapping.desc, "slot_mapping", DType::i64, kv);
  checks.size(kv, "compressed_kv", 0, a.slot_mapping.desc.size(0));
  check_index_vector(kernel, a.positions.desc, "positions", DType::i64, kv);
  check_index_vector(kernel, a.kv_slot_mapping.desc, "kv_slot_mapping", DType::i64, kv);
  check_norm_weight(kernel, a.rms_norm_weight.desc, kv);
  check_cos_sin_f32(kernel, a.cos_sin_cache.desc, kv);
  if (!(a.eps > 0.0f)) {
    checks.fail("rms_norm_eps", "must be positive, got " + std::to_string(a.eps));
  }
}

template <class Params>
void fill_c128_common(Params& p, const C128StoreArgs& a) {
  p.compressed_kv = a.compressed_kv.as<const float>();
  p.positions = a.positions.as<const long long>();
  p.num_positions = a.positions.desc.size(0);
  p.slot_mapping = a.slot_mapping.as<const long long>();
  p.num_tokens = a.slot_mapping.desc.size(0);
  p.rms_norm_weight = a.rms_norm_weight.data;
  p.eps = a.eps;
  p.cos_sin_cache = a.cos_sin_cache.as<const float>();
  p.cos_sin_stride = a.cos_sin_cache.desc.stride(0);
  p.k_cache = a.k_cache.as<unsigned char>();
  p.kv_slot_mapping = a.kv_slot_mapping.as<const long long>();
  p.num_kv_slots = a.kv_slot_mapping.desc.size(0);
}

LaunchGeometry c128_store_geometry(std::int64_t tokens, bool pdl) {
  LaunchGeometry geometry;
  geometry.grid.x = static_cast<std::uint32_t>(params::c128_store_grid(tokens));
  geometry.block.x = params::kC128StoreThreads;
  geometry.attributes.programmatic_serialization = pdl;
  return geometry;
}

C128StoreDescriptors c128_base(DType norm_weight_dtype, TensorDesc k_cache) {
  C128StoreDescriptors d;
  d.compressed_kv = TensorDesc::contiguous(DType::f32, {1, params::kCompressorHeadSize});
  d.positions = TensorDesc::contiguous(DType::i64, {1});
  d.slot_mapping = TensorDesc::contiguous(DType::i64, {1});
  d.rms_norm_weight = TensorDesc::contiguous(norm_weight_dtype, {params::kCompressorHeadSize});
  d.cos_sin_cache = TensorDesc::contiguous(DType::f32, {65536, params::kCompressorRopeDim});
  d.k_cache = k_cache;
  d.kv_slot_mapping = TensorDesc::contiguous(DType::i64, {1});
  return d;
}

bool norm_dtype_ok(DType dtype) { return dtype == DType::bf16 || dtype == DType::f32; }

}  // namespace

// --- fp8_ds_mla --------------------------------------------------------------------------------

C128StoreKey C128StoreKernel::dispatch(const C128StoreDescriptors& d) const {
  const ArgumentChecks checks = this->checks();
  checks.tensor(d.k_cache, "k_cache", {DType::u8}, 3);
  check_head_and_rope(checks, d.rms_norm_weight, d.cos_sin_cache);
  C128StoreKey key;
  checks.fits_int32(d.k_cache.size(1), "k_cache", "the block size (shape[1])");
  key.kv_cache_block_size = static_cast<int>(std::max<std::int64_t>(1, d.k_cache.size(1)));
  key.kv_block_stride = d.k_cache.size(0) > 1
                            ? d.k_cache.stride(0)
                            : (std::int64_t{key.kv_cache_block_size} * 584 + 575) / 576 * 576;
  key.norm_weight_dtype = d.rms_norm_weight.dtype;
  return key;
}

Program C128StoreKernel::program(const C128StoreKey& key) const {
  const bool ok = norm_dtype_ok(key.norm_weight_dtype) && key.kv_cache_block_size >= 1 &&
                  key.kv_block_stride >= std::int64_t{key.kv_cache_block_size} * 584 &&
                  key.kv_block_stride % 16 == 0;
  if (!ok) {
    throw InvalidArgument(name(), "key",
                          "no kernel for " + describe(key) +
                              ": this family is built for a bf16 or f32 norm weight and a page "
                              "stride >= B_k * 584 that is a multiple of 16");
  }
  return make_program(key, "dsv4/c128_store/c128_store.cu",
                      "zj::dsv4::c128_store_kernel<" + std::to_string(key.kv_cache_block_size) +
                          ", " + std::to_string(key.kv_block_stride) + "LL, " +
                          std::string(device_type_name(key.norm_weight_dtype)) + ">");
}

LaunchSpec<C128StoreKey> C128StoreKernel::plan(const C128StoreKey& key,
                                               const C128StoreArgs& a) const {
  check_c128_inputs(name(), a);
  const ArgumentChecks checks = this->checks();
  const TensorDesc& cache = a.k_cache.desc;
  checks.tensor(cache, "k_cache", {DType::u8}, 3);
  checks.size(cache, "k_cache", 2, params::kDsMlaRowBytes);
  checks.innermost_contiguous(cache, "k_cache");
  checks.aligned(cache, "k_cache", 16);
  checks.positive(cache.size(1), "k_cache.shape[1] (block size)");
  check_ds_mla_pages(checks, cache, 16);
  checks.same_device(cache, "k_cache", a.compressed_kv.desc);
  LaunchSpec<C128StoreKey> spec;
  spec.key = key;
  spec.device = a.compressed_kv.desc.device.ordinal;
  // The key's page stride is stride(0) (checked above) or, for one page, made valid by dispatch.
  params::C128StoreParams p{};
  fill_c128_common(p, a);
  spec.geometry = c128_store_geometry(p.num_tokens, a.pdl);
  spec.args.push(p);
  return spec;
}

WarmupSpace<C128StoreDescriptors> C128StoreKernel::warmup_space(
    const C128DsMlaStoreGate& gate) const {
  const std::int64_t shape[] = {64, gate.kv_cache_block_size, params::kDsMlaRowBytes};
  const std::int64_t strides[] = {gate.page_stride_bytes, params::kDsMlaRowBytes, 1};
  return WarmupSpace<C128StoreDescriptors>(
      c128_base(to_dtype(gate.norm_weight_dtype), TensorDesc::strided(DType::u8, shape, strides)));
}

// --- full rows ----------------------------------------------------------------------------------

C128StoreFullKey C128StoreFullKernel::dispatch(const C128StoreDescriptors& d) const {
  const ArgumentChecks checks = this->checks();
  checks.tensor(d.k_cache, "k_cache", {DType::bf16, DType::e4m3}, 3);
  check_head_and_rope(checks, d.rms_norm_weight, d.cos_sin_cache);
  return C128StoreFullKey{.store_full_fp8 = d.k_cache.dtype == DType::e4m3,
                          .norm_weight_dtype = d.rms_norm_weight.dtype};
}

Program C128StoreFullKernel::program(const C128StoreFullKey& key) const {
  if (!norm_dtype_ok(key.norm_weight_dtype)) {
    throw InvalidArgument(
        name(), "key",
        "no kernel for " + describe(key) + ": this family is built for a bf16 or f32 norm weight");
  }
  return make_program(key, "dsv4/c128_store/c128_store_full.cu",
                      "zj::dsv4::c128_store_full_kernel<" +
                          render_template_value(key.store_full_fp8) + ", " +
                          std::string(device_type_name(key.norm_weight_dtype)) + ">");
}

LaunchSpec<C128StoreFullKey> C128StoreFullKernel::plan(const C128StoreFullKey& key,
                                                       const C128StoreArgs& a) const {
  check_c128_inputs(name(), a);
  const TensorDesc& cache = a.k_cache.desc;
  const bool fp8 = check_full_cache(name(), cache, a.fp8_scale, a.compressed_kv.desc);
  LaunchSpec<C128StoreFullKey> spec;
  spec.key = key;
  spec.device = a.compressed_kv.desc.device.ordinal;
  params::C128StoreFullParams p{};
  fill_c128_common(p, a);
  p.kv_block_stride_bytes = stride_bytes(cache, 0);
  p.kv_row_stride_bytes = stride_bytes(cache, 1);
  p.kv_cache_block_size = cache.size(1);
  p.fp8_scale = fp8 ? a.fp8_scale->as<const float>() : nullptr;
  spec.geometry = c128_store_geometry(p.num_tokens, a.pdl);
  spec.args.push(p);
  return spec;
}

WarmupSpace<C128StoreDescriptors> C128StoreFullKernel::warmup_space(
    const C128FullStoreGate& gate) const {
  C128StoreDescriptors base = c128_base(
      to_dtype(gate.norm_weight_dtype),
      TensorDesc::contiguous(gate.store_full_fp8 ? DType::e4m3 : DType::bf16,
                             {64, gate.kv_cache_block_size, params::kCompressorHeadSize}));
  if (gate.store_full_fp8) base.fp8_scale = TensorDesc::contiguous(DType::f32, {1});
  return WarmupSpace<C128StoreDescriptors>(base);
}

}  // namespace zerojit::dsv4
