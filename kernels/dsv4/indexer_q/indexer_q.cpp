#include "dsv4/indexer_q/indexer_q.hpp"

#include <algorithm>
#include <tuple>

#include "dsv4/indexer_q/indexer_q_params.h"

namespace zerojit::dsv4 {
namespace {

// Below this many tokens one head per subwarp keeps enough CTAs in flight; above it, four
// heads share each cos/sin load (spec section 1).
constexpr std::int64_t kCoarsenTokenThreshold = 512;

bool is_power_of_two(int value) { return value > 0 && (value & (value - 1)) == 0; }

// Throws InvalidArgument (argument "key") unless the variant can be built for the key.
void check_key(const ArgumentChecks& checks, const IndexerQKey& key, bool mxfp4) {
  const int lanes = key.head_dim / zj::dsv4::kIndexerQElementsPerThread;
  const int granule = mxfp4 ? 32 : 16;
  const int nope = key.head_dim - key.rope_dim;
  if (key.head_dim % 16 != 0 || !is_power_of_two(lanes) || lanes > 32) {
    checks.fail("key", "head_dim " + std::to_string(key.head_dim) +
                           " must be a multiple of 16 with head_dim/16 a power of two <= 32");
  }
  if (key.rope_dim <= 0 || key.rope_dim % granule != 0 || nope < 0 || nope % granule != 0) {
    checks.fail("key", "rope_dim " + std::to_string(key.rope_dim) + " and head_dim - rope_dim " +
                           std::to_string(nope) + " must be multiples of " +
                           std::to_string(granule));
  }
  if (key.coarsen < 1 || key.num_heads <= 0 || key.num_heads % key.coarsen != 0) {
    checks.fail("key", "num_heads " + std::to_string(key.num_heads) +
                           " must be a positive multiple of coarsen " +
                           std::to_string(key.coarsen));
  }
  // The FP8 kernel's lane i writes head i's weight: a tile holds at most a row's lanes.
  if (!mxfp4 && (key.coarsen > 8 || key.coarsen > lanes)) {
    checks.fail("key", "the FP8 kernel needs coarsen " + std::to_string(key.coarsen) +
                           " <= 8 and <= head_dim / 16 (" + std::to_string(lanes) + ")");
  }
  if (key.cos_sin_dtype != DType::f32 && key.cos_sin_dtype != DType::bf16) {
    checks.fail("key", "cos_sin_dtype must be f32 or bf16");
  }
}

// The inputs both variants share, checked in one place.
template <class Args>
void check_inputs(const ArgumentChecks& checks, const Args& in) {
  checks.tensor(in.q.desc, "q", {DType::bf16}, 3);
  checks.contiguous(in.q.desc, "q");
  checks.aligned(in.q.desc, "q", 16);
  const std::int64_t tokens = in.q.desc.size(0);
  const std::int64_t heads = in.q.desc.size(1);
  checks.tensor(in.positions.desc, "positions", {DType::i64}, 1);
  checks.size(in.positions.desc, "positions", 0, tokens);
  checks.contiguous(in.positions.desc, "positions");
  checks.same_device(in.positions.desc, "positions", in.q.desc);
  checks.tensor(in.cos_sin_cache.desc, "cos_sin_cache", {DType::f32, DType::bf16}, 2);
  checks.innermost_contiguous(in.cos_sin_cache.desc, "cos_sin_cache");
  checks.aligned(in.cos_sin_cache.desc, "cos_sin_cache", 16);
  checks.stride_bytes_multiple(in.cos_sin_cache.desc, "cos_sin_cache", 0, 16);
  checks.same_device(in.cos_sin_cache.desc, "cos_sin_cache", in.q.desc);
  checks.tensor(in.weights.desc, "weights", {DType::bf16}, 2);
  checks.size(in.weights.desc, "weights", 0, tokens);
  checks.size(in.weights.desc, "weights", 1, heads);
  checks.contiguous(in.weights.desc, "weights");
  checks.same_device(in.weights.desc, "weights", in.q.desc);
}

void check_weights_out(const ArgumentChecks& checks, const TensorRef& weights_out,
                       const IndexerQKey& key, const TensorDesc& q) {
  checks.tensor(weights_out.desc, "weights_out", {DType::f32}, 2);
  checks.size(weights_out.desc, "weights_out", 0, q.size(0));
  checks.size(weights_out.desc, "weights_out", 1, key.num_heads);
  checks.contiguous(weights_out.desc, "weights_out");
  checks.same_device(weights_out.desc, "weights_out", q);
}

LaunchGeometry geometry(const IndexerQKey& key, std::int64_t num_tokens, bool pdl) {
  LaunchGeometry geometry;
  geometry.attributes.programmatic_serialization = pdl;
  geometry.grid.x = static_cast<std::uint32_t>(
      zj::dsv4::indexer_q_grid_size(num_tokens, key.head_dim, key.num_heads, key.coarsen));
  geometry.block.x = zj::dsv4::kIndexerQThreadsPerBlock;
  return geometry;
}

// The argument block both variants share; each sets its own outputs.
template <class Args>
zj::dsv4::IndexerQParams input_params(const Args& in) {
  zj::dsv4::IndexerQParams params{};
  params.positions = in.positions.template as<const long long>();
  params.q = in.q.template as<const unsigned short>();
  params.cos_sin_cache = in.cos_sin_cache.data;
  params.cos_sin_row_stride = in.cos_sin_cache.desc.stride(0);
  params.weights = in.weights.template as<const unsigned short>();
  params.weights_out = in.weights_out.template as<float>();
  params.num_tokens = in.q.desc.size(0);
  params.scale = in.scale;
  return params;
}

// Dispatch reads q and the cos/sin cache only, so both variants share it.
IndexerQKey dispatch_key(const ArgumentChecks& checks, const TensorDesc& q,
                         const TensorDesc& cos_sin_cache, bool mxfp4) {
  checks.tensor(q, "q", {DType::bf16}, 3);
  checks.tensor(cos_sin_cache, "cos_sin_cache", {DType::f32, DType::bf16}, 2);
  checks.fits_int32(q.size(1), "q", "the head count (shape[1])");
  checks.fits_int32(q.size(2), "q", "the head dim (shape[2])");
  checks.fits_int32(cos_sin_cache.size(1), "cos_sin_cache", "the rope dim (shape[1])");
  IndexerQKey key;
  key.num_heads = static_cast<int>(q.size(1));
  key.head_dim = static_cast<int>(q.size(2));
  key.rope_dim = static_cast<int>(cos_sin_cache.size(1));
  key.cos_sin_dtype = cos_sin_cache.dtype;
  // Four heads share a subwarp's cos/sin loads only when they divide the head count (always
  // for DSv4's 64); otherwise one head per subwarp. The FP8 kernel takes at most a row's lanes
  // (head_dim / 16) heads a subwarp.
  const int lanes = key.head_dim / zj::dsv4::kIndexerQElementsPerThread;
  const int coarsen = mxfp4 ? 4 : std::clamp(lanes, 1, 4);
  key.coarsen = q.size(0) < kCoarsenTokenThreshold || key.num_heads % coarsen != 0 ? 1 : coarsen;
  check_key(checks, key, mxfp4);
  return key;
}

// The outputs a call of the gate's shape passes (the dtypes the Python bindings allocate), for
// one token: dispatch never reads them, but a point is described, and planned, as that call is.
void set_outputs(IndexerQFp8Descriptors& d, const IndexerQGate& gate) {
  d.q_fp8 = TensorDesc::contiguous(DType::e4m3, {1, gate.num_heads, gate.head_dim});
  d.weights_out = TensorDesc::contiguous(DType::f32, {1, gate.num_heads});
}
void set_outputs(IndexerQMxFp4Descriptors& d, const IndexerQGate& gate) {
  d.q_packed = TensorDesc::contiguous(DType::u8, {1, gate.num_heads, gate.head_dim / 2});
  d.q_scale = TensorDesc::contiguous(DType::u8, {1, gate.num_heads, gate.head_dim / 32});
  d.weights_out = TensorDesc::contiguous(DType::f32, {1, gate.num_heads});
}
void set_output_tokens(IndexerQFp8Descriptors& d, std::int64_t tokens) {
  d.q_fp8.shape[0] = tokens;
  d.weights_out.shape[0] = tokens;
}
void set_output_tokens(IndexerQMxFp4Descriptors& d, std::int64_t tokens) {
  d.q_packed.shape[0] = tokens;
  d.q_scale.shape[0] = tokens;
  d.weights_out.shape[0] = tokens;
}

}  // namespace

IndexerQKey indexer_q_dispatch(const ArgumentChecks& checks, const IndexerQFp8Descriptors& d) {
  return dispatch_key(checks, d.q, d.cos_sin_cache, false);
}

IndexerQKey indexer_q_dispatch(const ArgumentChecks& checks, const IndexerQMxFp4Descriptors& d) {
  return dispatch_key(checks, d.q, d.cos_sin_cache, true);
}

template <class Descriptors>
WarmupSpace<Descriptors> indexer_q_warmup_space(const IndexerQGate& gate) {
  Descriptors base;
  base.positions = TensorDesc::contiguous(DType::i64, {1});
  base.q = TensorDesc::contiguous(DType::bf16, {1, gate.num_heads, gate.head_dim});
  base.cos_sin_cache = TensorDesc::contiguous(to_dtype(gate.cos_sin_dtype), {65536, gate.rope_dim});
  base.weights = TensorDesc::contiguous(DType::bf16, {1, gate.num_heads});
  set_outputs(base, gate);
  WarmupSpace<Descriptors> space(base);
  space.advance("num_tokens", 1, gate.max_num_tokens, next_power_of_two,
                [](Descriptors& d, std::int64_t tokens) {
                  d.positions.shape[0] = tokens;
                  d.q.shape[0] = tokens;
                  d.weights.shape[0] = tokens;
                  set_output_tokens(d, tokens);
                });
  return space;
}

template WarmupSpace<IndexerQFp8Descriptors> indexer_q_warmup_space(const IndexerQGate& gate);
template WarmupSpace<IndexerQMxFp4Descriptors> indexer_q_warmup_space(const IndexerQGate& gate);

// --- FP8 ---------------------------------------------------------------------------------------

Program IndexerQFp8Kernel::program(const IndexerQKey& key) const {
  check_key(checks(), key, false);
  return make_program(key, "dsv4/indexer_q/indexer_q_fp8.cu",
                      instantiate("zj::dsv4::indexer_q_fp8_kernel", key));
}

LaunchSpecWithOutputs<IndexerQKey, std::tuple<TensorRef, TensorRef>> IndexerQFp8Kernel::plan(
    const IndexerQKey& key, const IndexerQFp8Args& a) const {
  const ArgumentChecks checks = this->checks();
  check_inputs(checks, a);
  const std::int64_t tokens = a.q.desc.size(0);
  checks.tensor(a.q_fp8.desc, "q_fp8", {DType::u8, DType::e4m3}, 3);
  checks.size(a.q_fp8.desc, "q_fp8", 0, tokens);
  checks.size(a.q_fp8.desc, "q_fp8", 1, key.num_heads);
  checks.size(a.q_fp8.desc, "q_fp8", 2, key.head_dim);
  checks.contiguous(a.q_fp8.desc, "q_fp8");
  checks.aligned(a.q_fp8.desc, "q_fp8", 16);
  checks.same_device(a.q_fp8.desc, "q_fp8", a.q.desc);
  check_weights_out(checks, a.weights_out, key, a.q.desc);

  zj::dsv4::IndexerQParams params = input_params(a);
  params.q_fp8 = a.q_fp8.as<unsigned char>();
  LaunchSpecWithOutputs<IndexerQKey, std::tuple<TensorRef, TensorRef>> spec{
      key, geometry(key, tokens, a.pdl), {}, {a.q_fp8, a.weights_out}};
  spec.device = a.q.desc.device.ordinal;
  spec.args.push(params);
  return spec;
}

// --- MXFP4 -------------------------------------------------------------------------------------

Program IndexerQMxFp4Kernel::program(const IndexerQKey& key) const {
  check_key(checks(), key, true);
  return make_program(key, "dsv4/indexer_q/indexer_q_mxfp4.cu",
                      instantiate("zj::dsv4::indexer_q_mxfp4_kernel", key));
}

LaunchSpecWithOutputs<IndexerQKey, std::tuple<TensorRef, TensorRef, TensorRef>>
IndexerQMxFp4Kernel::plan(const IndexerQKey& key, const IndexerQMxFp4Args& a) const {
  const ArgumentChecks checks = this->checks();
  check_inputs(checks, a);
  const std::int64_t tokens = a.q.desc.size(0);
  checks.tensor(a.q_packed.desc, "q_packed", {DType::u8, DType::e2m1x2}, 3);
  checks.size(a.q_packed.desc, "q_packed", 0, tokens);
  checks.size(a.q_packed.desc, "q_packed", 1, key.num_heads);
  checks.size(a.q_packed.desc, "q_packed", 2, key.head_dim / 2);
  checks.contiguous(a.q_packed.desc, "q_packed");
  checks.aligned(a.q_packed.desc, "q_packed", 8);
  checks.same_device(a.q_packed.desc, "q_packed", a.q.desc);
  checks.tensor(a.q_scale.desc, "q_scale", {DType::u8, DType::ue8m0}, 3);
  checks.size(a.q_scale.desc, "q_scale", 0, tokens);
  checks.size(a.q_scale.desc, "q_scale", 1, key.num_heads);
  checks.size(a.q_scale.desc, "q_scale", 2, key.head_dim / 32);
  checks.contiguous(a.q_scale.desc, "q_scale");
  checks.same_device(a.q_scale.desc, "q_scale", a.q.desc);
  check_weights_out(checks, a.weights_out, key, a.q.desc);

  zj::dsv4::IndexerQParams params = input_params(a);
  params.q_packed = a.q_packed.as<unsigned char>();
  params.q_scale = a.q_scale.as<unsigned char>();
  LaunchSpecWithOutputs<IndexerQKey, std::tuple<TensorRef, TensorRef, TensorRef>> spec{
      key, geometry(key, tokens, a.pdl), {}, {a.q_packed, a.q_scale, a.weights_out}};
  spec.device = a.q.desc.device.ordinal;
  spec.args.push(params);
  return spec;
}

}  // namespace zerojit::dsv4
