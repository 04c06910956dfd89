// The DSv4 kernels' CPU references, callable from Python with host DLPack tensors
// (zerojit._core.reference, behind zerojit.reference).
//
// The kernel owner validates and plans the call exactly as for a launch (the host tensors are
// relabelled cuda:0 for validation), and the CPU reference runs on the very argument block the
// kernel would have received. Validation, dispatch and parameter packing are therefore shared
// with the launch path (fast_ops.cpp), and a GPU test can compare the two bit for bit.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <vector>

#include "arguments.hpp"
#include "bindings.hpp"
#include "dlpack.hpp"
#include "dsv4/c128_compress/reference.hpp"
#include "dsv4/c128_store/reference.hpp"
#include "dsv4/c4_store/reference.hpp"
#include "dsv4/compressor/reference.hpp"
#include "dsv4/dequant_gather/reference.hpp"
#include "dsv4/family.hpp"
#include "dsv4/indexer_q/reference.hpp"
#include "zerojit/zerojit.hpp"

namespace py = pybind11;

namespace zerojit::python {
namespace {

namespace reference = dsv4::reference;

// Imports the host tensors of one reference call and keeps them alive until it returns.
class CallArguments {
 public:
  explicit CallArguments(std::string_view kernel) : kernel_(kernel) { imported_.reserve(16); }

  std::string_view kernel() const { return kernel_; }
  // Names another kernel in later errors (the compressor stores pick theirs from k_cache).
  void set_kernel(std::string_view kernel) { kernel_ = kernel; }

  [[noreturn]] void fail(std::string_view argument, const std::string& problem) const {
    throw InvalidArgument(std::string(kernel_), std::string(argument), problem);
  }

  TensorRef input(py::handle object, std::string_view argument) {
    if (object.is_none()) fail(argument, "is required, got None");
    ImportedTensor imported = import_tensor(object, kernel_, argument, ProducerStream{py::none()});
    if (imported.ref().desc.device.kind != DeviceKind::cpu) {
      fail(argument,
           "the CPU reference reads host memory: pass CPU tensors (e.g. tensor.cpu()), got " +
               to_string(imported.ref().desc.device));
    }
    // The owners' validation expects a CUDA tensor; the reference reads the same layout from
    // host memory.
    imported.set_device(Device::cuda(0));
    const TensorRef ref = imported.ref();
    imported_.push_back(std::move(imported));
    return ref;
  }

  TensorRef output(py::handle object, std::string_view argument) {
    const TensorRef ref = input(object, argument);
    if (imported_.back().read_only()) fail(argument, "is read-only, but the kernel writes it");
    return ref;
  }

  std::optional<TensorRef> optional_input(py::handle object, std::string_view argument) {
    if (object.is_none()) return std::nullopt;
    return input(object, argument);
  }

  ArgumentChecks checks() const { return ArgumentChecks(kernel_); }

  // Integers as the launch path takes them (arguments.hpp): no float, string or None.
  std::int64_t integer(py::handle object, std::string_view argument) const {
    return integer_argument(kernel_, object.ptr(), argument);
  }
  std::optional<std::int64_t> optional_integer(py::handle object, std::string_view argument) const {
    return optional_integer_argument(kernel_, object.ptr(), argument);
  }
  int int32(py::handle object, std::string_view argument) const {
    return int32_argument(kernel_, object.ptr(), argument);
  }

 private:
  std::string_view kernel_;
  std::vector<ImportedTensor> imported_;
};

template <class Function>
auto run_reference(Function&& function) {
  py::gil_scoped_release release;
  return function();
}

// The argument block a plan packed: every DSv4 kernel takes exactly one.
template <class Params>
Params unpack_params(const KernelArgs& args, std::string_view kernel) {
  if (args.count() != 1 || args.size(0) != sizeof(Params)) {
    throw Error(std::string(kernel) +
                ": the plan packed an argument list the CPU reference cannot read");
  }
  Params params{};
  std::memcpy(&params, args.data(0), sizeof(Params));
  return params;
}

// Which compressor store a cache takes, decided by its dtype as vLLM's compressor does:
// uint8 = fp8_ds_mla pages, bf16 or float8_e4m3fn = full rows. The optional flags of vLLM's
// signature must agree with it.
bool stores_full_rows(const CallArguments& call, const TensorDesc& cache,
                      std::optional<bool> store_full_kv, std::optional<bool> store_full_fp8) {
  const bool full = cache.dtype != DType::u8;
  const bool full_fp8 = cache.dtype == DType::e4m3;
  const std::string layout = " (uint8 holds fp8_ds_mla pages; bf16 or float8_e4m3fn full rows)";
  if (store_full_kv && *store_full_kv != full) {
    call.fail("store_full_kv", std::string(*store_full_kv ? "is True" : "is False") +
                                   " but k_cache has dtype " +
                                   std::string(dtype_name(cache.dtype)) + layout);
  }
  if (store_full_fp8 && *store_full_fp8 != full_fp8) {
    call.fail("store_full_fp8", std::string(*store_full_fp8 ? "is True" : "is False") +
                                    " but k_cache has dtype " +
                                    std::string(dtype_name(cache.dtype)) + layout);
  }
  return full;
}

py::object rows_to_list(const std::vector<long long>& rows) { return py::cast(rows); }

// Refuses an index tensor (int32 or int64, validated by the plan) holding a value at or past
// `bound`, the extent of what it indexes: the CUDA kernels trust these (as vLLM's do: reading
// them would cost a launch), but the reference runs on the host, where such an index would read
// or write outside an allocation. Negative values are the kernels' "skip" and pass. With
// `only_where`, element i is checked only where only_where[i] >= 0 (a token's slot: the
// positions of tokens that write nothing are never read).
std::int64_t index_value(const TensorRef& tensor, std::int64_t i) {
  const TensorDesc& desc = tensor.desc;
  std::int64_t offset = 0;
  std::int64_t rest = i;
  for (int dim = desc.ndim - 1; dim >= 0; --dim) {
    offset += (rest % desc.size(dim)) * desc.stride(dim);
    rest /= desc.size(dim);
  }
  return desc.dtype == DType::i32 ? tensor.as<const std::int32_t>()[offset]
                                  : tensor.as<const std::int64_t>()[offset];
}

void check_indices_below(const CallArguments& call, const TensorRef& tensor,
                         std::string_view argument, std::int64_t bound, std::string_view what,
                         const TensorRef* only_where = nullptr) {
  const auto is_index = [](const TensorDesc& d) {
    return d.dtype == DType::i32 || d.dtype == DType::i64;
  };
  if (!is_index(tensor.desc)) return;
  const std::int64_t count = tensor.desc.numel();
  const bool masked = only_where != nullptr && is_index(only_where->desc);
  for (std::int64_t i = 0; i < count; ++i) {
    if (masked && (i >= only_where->desc.numel() || index_value(*only_where, i) < 0)) continue;
    const std::int64_t value = index_value(tensor, i);
    if (value >= bound) {
      call.fail(argument, "holds " + std::to_string(value) + " (element " + std::to_string(i) +
                              "), past " + std::string(what) + " (" + std::to_string(bound) + ")");
    }
  }
}

// The slots of a K cache [num_blocks, B, ...]: what kv_slot_mapping indexes.
std::int64_t cache_slots(const TensorRef& k_cache) {
  return k_cache.desc.ndim >= 2 ? k_cache.desc.size(0) * k_cache.desc.size(1) : 0;
}

// --- Indexer-Q (spec section 1) ------------------------------------------------------------

py::object indexer_q(bool mxfp4, py::handle positions, py::handle q, py::handle cos_sin_cache,
                     py::handle weights, double scale, py::handle q_values, py::handle q_scale,
                     py::handle weights_out) {
  dsv4::IndexerQFp8Kernel& fp8 = dsv4::IndexerQFp8Kernel::instance();
  dsv4::IndexerQMxFp4Kernel& fp4 = dsv4::IndexerQMxFp4Kernel::instance();
  CallArguments call(mxfp4 ? fp4.name() : fp8.name());
  // The inputs both variants share, imported before the outputs in the Python order, so that
  // the first bad argument is the one named.
  const auto read_inputs = [&](auto& args) {
    args.positions = call.input(positions, "positions");
    args.q = call.input(q, "q");
    args.cos_sin_cache = call.input(cos_sin_cache, "cos_sin_cache");
    args.weights = call.input(weights, "weights");
    // softmax_scale * head_scale was formed in double by the caller; one rounding to f32 here.
    args.scale = static_cast<float>(scale);
  };
  if (!mxfp4) {
    dsv4::IndexerQFp8Args args;
    read_inputs(args);
    args.q_fp8 = call.output(q_values, "q_fp8");
    args.weights_out = call.output(weights_out, "weights_out");
    run_reference([&] {
      const auto spec = fp8.launch_spec(args);
      const auto params = unpack_params<zj::dsv4::IndexerQParams>(spec.args, call.kernel());
      reference::indexer_q_fp8(spec.key, params);
    });
    return py::none();
  }
  dsv4::IndexerQMxFp4Args args;
  read_inputs(args);
  args.q_packed = call.output(q_values, "q_packed");
  args.q_scale = call.output(q_scale, "q_scale");
  args.weights_out = call.output(weights_out, "weights_out");
  run_reference([&] {
    const auto spec = fp4.launch_spec(args);
    const auto params = unpack_params<zj::dsv4::IndexerQParams>(spec.args, call.kernel());
    reference::indexer_q_mxfp4(spec.key, params);
  });
  return py::none();
}

// --- Dequantize + gather (spec section 2) --------------------------------------------------

py::object dequant_gather(py::handle out, py::handle k_cache, py::handle seq_lens,
                          py::handle gather_lens, py::handle block_table, py::handle block_size,
                          py::handle offset) {
  dsv4::DequantGatherKernel& kernel = dsv4::DequantGatherKernel::instance();
  CallArguments call(kernel.name());
  dsv4::DequantGatherArgs args;
  args.out = call.output(out, "out");
  args.k_cache = call.input(k_cache, "k_cache");
  args.seq_lens = call.input(seq_lens, "seq_lens");
  args.gather_lens = call.optional_input(gather_lens, "gather_lens");
  args.block_table = call.input(block_table, "block_table");
  args.offset = call.integer(offset, "offset");
  call.checks().matches_size(call.optional_integer(block_size, "block_size"), "block_size",
                             args.k_cache.desc, "k_cache", 1);
  run_reference([&] {
    const auto spec = kernel.launch_spec(args);
    check_indices_below(call, args.block_table, "block_table", args.k_cache.desc.size(0),
                        "the pages of k_cache");
    const auto params = unpack_params<zj::dsv4::DequantGatherParams>(spec.args, call.kernel());
    reference::dequant_gather(spec.key, params);
  });
  return py::none();
}

// The arguments the C4 and C128 stores share after their own inputs: the norm, the RoPE table,
// the K cache's slot map and scale, and the K cache geometry the caller may state.
template <class StoreArgs>
void read_store_arguments(CallArguments& call, StoreArgs& args, py::handle rms_norm_weight,
                          double rms_norm_eps, py::handle cos_sin_cache, py::handle kv_slot_mapping,
                          py::handle fp8_scale, py::handle kv_cache_block_size,
                          py::handle kv_block_stride) {
  args.rms_norm_weight = call.input(rms_norm_weight, "rms_norm_weight");
  args.eps = static_cast<float>(rms_norm_eps);
  args.cos_sin_cache = call.input(cos_sin_cache, "cos_sin_cache");
  args.kv_slot_mapping = call.input(kv_slot_mapping, "kv_slot_mapping");
  args.fp8_scale = call.optional_input(fp8_scale, "fp8_scale");
  call.checks().matches_size(call.optional_integer(kv_cache_block_size, "kv_cache_block_size"),
                             "kv_cache_block_size", args.k_cache.desc, "k_cache", 1);
  call.checks().matches_stride(call.optional_integer(kv_block_stride, "kv_block_stride"),
                               "kv_block_stride", args.k_cache.desc, "k_cache");
}

// --- C4 compress + norm + RoPE + store (spec sections 3, 4) --------------------------------

py::object c4_store(py::handle state_cache, py::handle token_to_req_indices, py::handle positions,
                    py::handle slot_mapping, py::handle block_table, py::handle block_size,
                    py::handle rms_norm_weight, double rms_norm_eps, py::handle cos_sin_cache,
                    py::handle k_cache, py::handle kv_slot_mapping, py::handle kv_cache_block_size,
                    py::handle kv_block_stride, py::handle fp8_scale,
                    std::optional<bool> store_full_kv, std::optional<bool> store_full_fp8) {
  dsv4::C4StoreKernel& ds_mla = dsv4::C4StoreKernel::instance();
  dsv4::C4StoreFullKernel& full = dsv4::C4StoreFullKernel::instance();
  // The cache decides the kernel, so it is imported first.
  CallArguments call(ds_mla.name());
  dsv4::C4StoreArgs args;
  args.k_cache = call.output(k_cache, "k_cache");
  const bool full_rows = stores_full_rows(call, args.k_cache.desc, store_full_kv, store_full_fp8);
  if (full_rows) call.set_kernel(full.name());
  args.compress_ratio = dsv4::kCsaCompressRatio;
  args.state_cache = call.input(state_cache, "state_cache");
  args.token_to_req = call.input(token_to_req_indices, "token_to_req_indices");
  args.positions = call.input(positions, "positions");
  args.slot_mapping = call.input(slot_mapping, "slot_mapping");
  args.block_table = call.input(block_table, "block_table");
  read_store_arguments(call, args, rms_norm_weight, rms_norm_eps, cos_sin_cache, kv_slot_mapping,
                       fp8_scale, kv_cache_block_size, kv_block_stride);
  call.checks().matches_size(call.optional_integer(block_size, "block_size"), "block_size",
                             args.state_cache.desc, "state_cache", 1);
  return rows_to_list(run_reference([&] {
    const auto check_indices = [&] {
      check_indices_below(call, args.block_table, "block_table", args.state_cache.desc.size(0),
                          "the blocks of state_cache");
      check_indices_below(call, args.kv_slot_mapping, "kv_slot_mapping", cache_slots(args.k_cache),
                          "the slots of k_cache");
      check_indices_below(call, args.positions, "positions", args.cos_sin_cache.desc.size(0),
                          "the rows of cos_sin_cache", &args.slot_mapping);
    };
    if (full_rows) {
      const auto spec = full.launch_spec(args);
      check_indices();
      const auto params = unpack_params<zj::dsv4::C4StoreFullParams>(spec.args, call.kernel());
      return reference::c4_store_full(spec.key, params);
    }
    const auto spec = ds_mla.launch_spec(args);
    check_indices();
    const auto params = unpack_params<zj::dsv4::C4StoreParams>(spec.args, call.kernel());
    return reference::c4_store(spec.key, params);
  }));
}

// --- C128 compress (spec section 5) ----------------------------------------------------------

py::object c128_compress(py::handle state_cache, py::handle token_to_req_indices,
                         py::handle positions, py::handle slot_mapping, py::handle block_table,
                         py::handle block_size, py::handle compressed_kv) {
  dsv4::C128CompressKernel& kernel = dsv4::C128CompressKernel::instance();
  CallArguments call(kernel.name());
  dsv4::C128CompressArgs args;
  args.state_cache = call.input(state_cache, "state_cache");
  args.token_to_req = call.input(token_to_req_indices, "token_to_req_indices");
  args.positions = call.input(positions, "positions");
  args.slot_mapping = call.input(slot_mapping, "slot_mapping");
  args.block_table = call.input(block_table, "block_table");
  args.compressed_kv = call.output(compressed_kv, "compressed_kv");
  call.checks().matches_size(call.optional_integer(block_size, "block_size"), "block_size",
                             args.state_cache.desc, "state_cache", 1);
  return rows_to_list(run_reference([&] {
    const auto spec = kernel.launch_spec(args);
    check_indices_below(call, args.block_table, "block_table", args.state_cache.desc.size(0),
                        "the blocks of state_cache");
    const auto params = unpack_params<zj::dsv4::C128CompressParams>(spec.args, call.kernel());
    return reference::c128_compress(spec.key, params);
  }));
}

// --- C128 norm + RoPE + store (spec sections 6, 7) -----------------------------------------

py::object c128_store(py::handle compressed_kv, py::handle positions, py::handle slot_mapping,
                      py::handle rms_norm_weight, double rms_norm_eps, py::handle cos_sin_cache,
                      py::handle k_cache, py::handle kv_slot_mapping,
                      py::handle kv_cache_block_size, py::handle kv_block_stride,
                      py::handle fp8_scale, std::optional<bool> store_full_kv,
                      std::optional<bool> store_full_fp8) {
  dsv4::C128StoreKernel& ds_mla = dsv4::C128StoreKernel::instance();
  dsv4::C128StoreFullKernel& full = dsv4::C128StoreFullKernel::instance();
  CallArguments call(ds_mla.name());
  dsv4::C128StoreArgs args;
  args.k_cache = call.output(k_cache, "k_cache");
  const bool full_rows = stores_full_rows(call, args.k_cache.desc, store_full_kv, store_full_fp8);
  if (full_rows) call.set_kernel(full.name());
  args.compressed_kv = call.input(compressed_kv, "compressed_kv");
  args.positions = call.input(positions, "positions");
  args.slot_mapping = call.input(slot_mapping, "slot_mapping");
  read_store_arguments(call, args, rms_norm_weight, rms_norm_eps, cos_sin_cache, kv_slot_mapping,
                       fp8_scale, kv_cache_block_size, kv_block_stride);
  return rows_to_list(run_reference([&] {
    const auto check_indices = [&] {
      check_indices_below(call, args.kv_slot_mapping, "kv_slot_mapping", cache_slots(args.k_cache),
                          "the slots of k_cache");
      check_indices_below(call, args.positions, "positions", args.cos_sin_cache.desc.size(0),
                          "the rows of cos_sin_cache", &args.kv_slot_mapping);
    };
    if (full_rows) {
      const auto spec = full.launch_spec(args);
      check_indices();
      const auto params = unpack_params<zj::dsv4::C128StoreFullParams>(spec.args, call.kernel());
      return reference::c128_store_full(spec.key, params);
    }
    const auto spec = ds_mla.launch_spec(args);
    check_indices();
    const auto params = unpack_params<zj::dsv4::C128StoreParams>(spec.args, call.kernel());
    return reference::c128_store(spec.key, params);
  }));
}

// --- References derived from a kernel's declared arguments ------------------------------------
//
// A family row with a Python op name gets its reference from the kernel's declaration: the
// declared fields positionally (launch options left out), planned as for a launch, then the
// kernel's typed reference (Kernel::reference(key, params)) on the block the plan packed.

template <class Function>
struct ReferenceSignature;
template <class Key, class Params>
struct ReferenceSignature<void (*)(const Key&, const Params&)> {
  using ParamsType = Params;
};

template <class Field, class Args>
void read_declared(CallArguments& call, py::handle object, const Field& field, Args& args) {
  auto& value = args.*(field.member);
  using V = std::remove_cvref_t<decltype(value)>;
  if constexpr (std::is_same_v<V, TensorRef>) {
    value = field.role == ArgumentRole::output ? call.output(object, field.name)
                                               : call.input(object, field.name);
  } else if constexpr (std::is_same_v<V, std::optional<TensorRef>>) {
    value = call.optional_input(object, field.name);
  } else if constexpr (std::is_same_v<V, bool>) {
    value = py::cast<bool>(object);
  } else if constexpr (std::is_same_v<V, int>) {
    value = call.int32(object, field.name);
  } else if constexpr (std::is_integral_v<V>) {
    value = call.integer(object, field.name);
  } else {
    value = static_cast<V>(py::cast<double>(object));
  }
}

template <class Kernel>
py::object declared_reference(const py::args& values) {
  using Args = CallArgs<typename Kernel::Descriptors>;
  using Params = typename ReferenceSignature<decltype(&Kernel::reference)>::ParamsType;
  auto& kernel = Kernel::instance();
  std::size_t count = 0;
  for_each_argument<Args>([&](const auto& field) {
    if (field.role != ArgumentRole::launch_option) ++count;
  });
  if (values.size() != count) {
    throw py::type_error(kernel.name() + " (reference) takes " + std::to_string(count) +
                         " positional arguments (" + std::to_string(values.size()) + " given)");
  }
  CallArguments call(kernel.name());
  Args args;
  std::size_t position = 0;
  for_each_argument<Args>([&](const auto& field) {
    if (field.role != ArgumentRole::launch_option) {
      read_declared(call, values[position++], field, args);
    }
  });
  run_reference([&] {
    const auto spec = kernel.launch_spec(args);
    Kernel::reference(spec.key, unpack_params<Params>(spec.args, call.kernel()));
  });
  return py::none();
}

// Adds the derived reference of every family row with a Python op name to `reference`.
void bind_declared_references(py::module_& reference) {
  dsv4::kFamily.for_each_row([&](const auto& row) {
    using Kernel = typename std::remove_cvref_t<decltype(row)>::KernelType;
    if constexpr (DeclaredArguments<typename Kernel::Descriptors> &&
                  requires { &Kernel::reference; }) {
      if (row.python_op.empty()) return;
      reference.def(std::string(row.python_op).c_str(), &declared_reference<Kernel>,
                    (Kernel::instance().name() + ": the CPU reference on host tensors").c_str());
    }
  });
}

// --- Tolerance-aware comparisons of the compressor outputs (compressor/reference.hpp) --------

// The bytes of a contiguous host tensor.
std::span<const std::uint8_t> host_bytes(const TensorRef& tensor, std::string_view kernel,
                                         std::string_view argument) {
  if (tensor.desc.device.kind != DeviceKind::cpu || !tensor.desc.is_contiguous()) {
    throw InvalidArgument(std::string(kernel), std::string(argument),
                          "must be a contiguous CPU tensor, got " + to_string(tensor.desc));
  }
  const auto bytes = static_cast<std::size_t>(tensor.desc.numel()) *
                     static_cast<std::size_t>(dtype_size_bytes(tensor.desc.dtype));
  return {static_cast<const std::uint8_t*>(tensor.data), bytes};
}

struct HostPair {
  ImportedTensor expected;
  ImportedTensor actual;
};

HostPair import_pair(py::handle expected, py::handle actual, std::string_view name) {
  const ProducerStream none{py::none()};
  return {import_tensor(expected, name, "expected", none),
          import_tensor(actual, name, "actual", none)};
}

std::string compare_ds_mla_rows(py::handle expected, py::handle actual, long long page_stride_bytes,
                                long long kv_cache_block_size,
                                const std::vector<long long>& kv_slots) {
  constexpr std::string_view name = "reference.compare_ds_mla_rows";
  const HostPair pair = import_pair(expected, actual, name);
  return reference::compare_ds_mla_rows(host_bytes(pair.expected.ref(), name, "expected"),
                                        host_bytes(pair.actual.ref(), name, "actual"),
                                        page_stride_bytes, kv_cache_block_size, kv_slots);
}

std::string compare_full_rows(py::handle expected, py::handle actual, long long page_stride_bytes,
                              long long row_stride_bytes, long long kv_cache_block_size,
                              const std::vector<long long>& kv_slots, bool store_full_fp8) {
  constexpr std::string_view name = "reference.compare_full_rows";
  const HostPair pair = import_pair(expected, actual, name);
  return reference::compare_full_rows(host_bytes(pair.expected.ref(), name, "expected"),
                                      host_bytes(pair.actual.ref(), name, "actual"),
                                      page_stride_bytes, row_stride_bytes, kv_cache_block_size,
                                      kv_slots, store_full_fp8);
}

std::string compare_compressed_kv(py::handle expected, py::handle actual, long long row_length,
                                  const std::vector<long long>& rows) {
  constexpr std::string_view name = "reference.compare_compressed_kv";
  const HostPair pair = import_pair(expected, actual, name);
  for (const auto* tensor : {&pair.expected, &pair.actual}) {
    if (tensor->ref().desc.dtype != DType::f32) {
      throw InvalidArgument(std::string(name), tensor == &pair.expected ? "expected" : "actual",
                            "must be f32, got " + to_string(tensor->ref().desc));
    }
  }
  const auto floats = [&](const ImportedTensor& tensor, std::string_view argument) {
    const auto bytes = host_bytes(tensor.ref(), name, argument);
    return std::span<const float>(reinterpret_cast<const float*>(bytes.data()),
                                  bytes.size() / sizeof(float));
  };
  return reference::compare_compressed_kv(floats(pair.expected, "expected"),
                                          floats(pair.actual, "actual"), row_length, rows);
}

}  // namespace

void bind_kernels(py::module_& module) {
  py::module_ reference = module.def_submodule(
      "reference", "the DSv4 kernels' CPU references on host tensors (zerojit.reference)");
  reference.def(
      "indexer_q_fp8",
      [](py::handle positions, py::handle q, py::handle cos_sin_cache, py::handle weights,
         double scale, py::handle q_fp8, py::handle weights_out) {
        return indexer_q(false, positions, q, cos_sin_cache, weights, scale, q_fp8, py::none(),
                         weights_out);
      },
      py::arg("positions"), py::arg("q"), py::arg("cos_sin_cache"), py::arg("weights"),
      py::arg("scale"), py::arg("q_fp8"), py::arg("weights_out"));
  reference.def(
      "indexer_q_mxfp4",
      [](py::handle positions, py::handle q, py::handle cos_sin_cache, py::handle weights,
         double scale, py::handle q_packed, py::handle q_scale, py::handle weights_out) {
        return indexer_q(true, positions, q, cos_sin_cache, weights, scale, q_packed, q_scale,
                         weights_out);
      },
      py::arg("positions"), py::arg("q"), py::arg("cos_sin_cache"), py::arg("weights"),
      py::arg("scale"), py::arg("q_packed"), py::arg("q_scale"), py::arg("weights_out"));
  reference.def("dequant_gather", &dequant_gather, py::arg("out"), py::arg("k_cache"),
                py::arg("seq_lens"), py::arg("gather_lens"), py::arg("block_table"),
                py::arg("block_size"), py::arg("offset"));
  reference.def("c4_store", &c4_store, py::arg("state_cache"), py::arg("token_to_req_indices"),
                py::arg("positions"), py::arg("slot_mapping"), py::arg("block_table"),
                py::arg("block_size"), py::arg("rms_norm_weight"), py::arg("rms_norm_eps"),
                py::arg("cos_sin_cache"), py::arg("k_cache"), py::arg("kv_slot_mapping"),
                py::arg("kv_cache_block_size"), py::arg("kv_block_stride"), py::arg("fp8_scale"),
                py::arg("store_full_kv"), py::arg("store_full_fp8"));
  reference.def("c128_compress", &c128_compress, py::arg("state_cache"),
                py::arg("token_to_req_indices"), py::arg("positions"), py::arg("slot_mapping"),
                py::arg("block_table"), py::arg("block_size"), py::arg("compressed_kv"));
  reference.def("c128_store", &c128_store, py::arg("compressed_kv"), py::arg("positions"),
                py::arg("slot_mapping"), py::arg("rms_norm_weight"), py::arg("rms_norm_eps"),
                py::arg("cos_sin_cache"), py::arg("k_cache"), py::arg("kv_slot_mapping"),
                py::arg("kv_cache_block_size"), py::arg("kv_block_stride"), py::arg("fp8_scale"),
                py::arg("store_full_kv"), py::arg("store_full_fp8"));
  bind_declared_references(reference);

  reference.def("compare_ds_mla_rows", &compare_ds_mla_rows, py::arg("expected"), py::arg("actual"),
                py::arg("page_stride_bytes"), py::arg("kv_cache_block_size"), py::arg("kv_slots"));
  reference.def("compare_full_rows", &compare_full_rows, py::arg("expected"), py::arg("actual"),
                py::arg("page_stride_bytes"), py::arg("row_stride_bytes"),
                py::arg("kv_cache_block_size"), py::arg("kv_slots"), py::arg("store_full_fp8"));
  reference.def("compare_compressed_kv", &compare_compressed_kv, py::arg("expected"),
                py::arg("actual"), py::arg("row_length"), py::arg("rows"));
}

}  // namespace zerojit::python
