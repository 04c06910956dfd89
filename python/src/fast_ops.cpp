// The DSv4 kernels' launch path from Python: one METH_FASTCALL function per op, positional
// arguments in the order of the Python wrappers (python/zerojit/dsv4/__init__.py), the last one the
// stream (None: the tensors' framework's current stream). Outputs passed as None are
// allocated like the inputs. Each returns its outputs, or None for ops that only write in place.
//
// The CPU-reference mode of the same ops stays in kernels.cpp (host tensors, not a hot path).
#include <Python.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <deque>
#include <initializer_list>
#include <string>
#include <type_traits>
#include <vector>

#include "arguments.hpp"
#include "bindings.hpp"
#include "dsv4/compressor/gate_common.hpp"
#include "dsv4/family.hpp"
#include "fast_call.hpp"

namespace zerojit::python {
namespace {

// The outputs of a call, as new references: a given output is taken (INCREF) here, before
// anything can fail, and FastCall::output puts a new reference in a slot it allocates for. All
// are released (DECREF) unless handed to Python, so a call that fails anywhere leaves the
// caller's tensors with the references they had.
class OwnedObjects {
 public:
  OwnedObjects(std::initializer_list<PyObject**> slots) {
    for (PyObject** slot : slots) add(slot);
  }
  void add(PyObject** slot) {
    slots_.at(count_++) = slot;
    if (*slot != nullptr && *slot != Py_None) Py_INCREF(*slot);
  }
  ~OwnedObjects() {
    if (released_) return;
    for (std::size_t i = 0; i < count_; ++i) {
      if (*slots_[i] != nullptr && *slots_[i] != Py_None) Py_DECREF(*slots_[i]);
    }
  }
  OwnedObjects(const OwnedObjects&) = delete;
  OwnedObjects& operator=(const OwnedObjects&) = delete;
  // The references become the caller's.
  void release() { released_ = true; }

 private:
  std::array<PyObject**, 4> slots_{};
  std::size_t count_ = 0;
  bool released_ = false;
};

bool has_arguments(const char* op, Py_ssize_t given, Py_ssize_t expected) {
  if (given == expected) return true;
  PyErr_Format(PyExc_TypeError, "zerojit._core.fast.%s takes %zd positional arguments (%zd given)",
               op, expected, given);
  return false;
}

// The hand-written entry points take a trailing `pdl` flag (vLLM's pdl_kwargs, honoured): the
// expected count, or one more.
bool has_arguments_and_pdl(const char* op, Py_ssize_t given, Py_ssize_t expected) {
  if (given == expected || given == expected + 1) return true;
  PyErr_Format(PyExc_TypeError, "zerojit._core.fast.%s takes %zd positional arguments (%zd given)",
               op, expected, given);
  return false;
}

// The size of dim `dim` of an input that sizes an output, checked before the kernel's own
// validation so that the allocation never sees a nonsensical shape.
std::int64_t extent(const FastCall& call, const TensorRef& tensor, std::string_view argument,
                    int ndim, int dim) {
  if (tensor.desc.ndim != ndim) {
    call.fail(argument,
              "must have " + std::to_string(ndim) + " dimensions, got " + to_string(tensor.desc));
  }
  return tensor.desc.size(dim);
}

// Which compressor store a cache takes, decided by its dtype as vLLM's compressor does:
// uint8 = fp8_ds_mla pages, bf16 or float8_e4m3fn = full rows. The optional flags of vLLM's
// signature must agree with it.
bool stores_full_rows(const FastCall& call, const TensorDesc& cache,
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

// vLLM's compressor passes ones(1) when a float8 cache has no per-tensor scale: one such
// tensor per device, made once by the Python side (zerojit.dsv4.launch.unit_scale) and kept.
std::optional<TensorRef> fp8_scale_or_unit(FastCall& call, PyObject* fp8_scale, PyObject* k_cache,
                                           const TensorDesc& cache) {
  if (fp8_scale != Py_None || cache.dtype != DType::e4m3) {
    return call.optional_tensor(fp8_scale, "fp8_scale");
  }
  PyObject* module = PyImport_ImportModule("zerojit.dsv4.launch");
  if (module == nullptr) throw pybind11::error_already_set();
  PyObject* unit = PyObject_CallMethod(module, "unit_scale", "O", k_cache);
  Py_DECREF(module);
  if (unit == nullptr) throw pybind11::error_already_set();
  // Kept alive by zerojit.dsv4.launch's per-device cache.
  Py_DECREF(unit);
  return call.tensor(unit, "fp8_scale");
}

template <class Body>
PyObject* guarded(Body&& body) {
  try {
    return body();
  } catch (...) {
    set_python_error_from_current_exception();
    return nullptr;
  }
}

// A tuple holding the objects' references (stolen, not added).
PyObject* tuple_of(std::initializer_list<PyObject*> items) {
  PyObject* tuple = PyTuple_New(static_cast<Py_ssize_t>(items.size()));
  if (tuple == nullptr) throw pybind11::error_already_set();
  Py_ssize_t index = 0;
  for (PyObject* item : items) PyTuple_SET_ITEM(tuple, index++, item);
  return tuple;
}

// --- Indexer-Q ---------------------------------------------------------------------------------

// The query first: its shape sizes the outputs, so a query of the wrong rank is named before
// anything else. The inputs both variants share (IndexerQFp8Args or IndexerQMxFp4Args).
template <class Args>
void read_indexer_inputs(FastCall& call, PyObject* const* args, Args& in) {
  in.q = call.tensor(args[1], "q");
  extent(call, in.q, "q", 3, 0);
  in.positions = call.tensor(args[0], "positions");
  in.cos_sin_cache = call.tensor(args[2], "cos_sin_cache");
  in.weights = call.tensor(args[3], "weights");
  in.scale = static_cast<float>(call.number(args[4], "scale"));
}

// (positions, q, cos_sin_cache, weights, scale, q_fp8|None, weights_out|None, stream[, pdl])
//   -> (q_fp8, weights_out)
PyObject* indexer_q_fp8(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (!has_arguments_and_pdl("indexer_q_fp8", nargs, 8)) return nullptr;
  return guarded([&]() -> PyObject* {
    auto& kernel = dsv4::IndexerQFp8Kernel::instance();
    FastCall call(kernel.name(), args[7]);
    dsv4::IndexerQFp8Args a;
    read_indexer_inputs(call, args, a);
    a.pdl = nargs > 8 && PyObject_IsTrue(args[8]) == 1;
    const std::int64_t tokens = extent(call, a.q, "q", 3, 0);
    const std::int64_t heads = a.q.desc.size(1), dim = a.q.desc.size(2);
    PyObject* q_fp8 = args[5];
    PyObject* weights_out = args[6];
    OwnedObjects owned{&q_fp8, &weights_out};
    a.q_fp8 = call.output(q_fp8, "q_fp8", DType::e4m3, {tokens, heads, dim});
    a.weights_out = call.output(weights_out, "weights_out", DType::f32, {tokens, heads});
    launch_from_python(kernel, a, call);
    owned.release();
    return tuple_of({q_fp8, weights_out});
  });
}

// (positions, q, cos_sin_cache, weights, scale, q_packed|None, q_scale|None, weights_out|None,
//  stream[, pdl]) -> (q_packed, q_scale, weights_out)
PyObject* indexer_q_mxfp4(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (!has_arguments_and_pdl("indexer_q_mxfp4", nargs, 9)) return nullptr;
  return guarded([&]() -> PyObject* {
    auto& kernel = dsv4::IndexerQMxFp4Kernel::instance();
    FastCall call(kernel.name(), args[8]);
    dsv4::IndexerQMxFp4Args a;
    read_indexer_inputs(call, args, a);
    a.pdl = nargs > 9 && PyObject_IsTrue(args[9]) == 1;
    const std::int64_t tokens = extent(call, a.q, "q", 3, 0);
    const std::int64_t heads = a.q.desc.size(1), dim = a.q.desc.size(2);
    if (dim % 32 != 0) call.fail("q", "head_dim must be a multiple of the MXFP4 block (32)");
    PyObject* q_packed = args[5];
    PyObject* q_scale = args[6];
    PyObject* weights_out = args[7];
    OwnedObjects owned{&q_packed, &q_scale, &weights_out};
    a.q_packed = call.output(q_packed, "q_packed", DType::u8, {tokens, heads, dim / 2});
    a.q_scale = call.output(q_scale, "q_scale", DType::u8, {tokens, heads, dim / 32});
    a.weights_out = call.output(weights_out, "weights_out", DType::f32, {tokens, heads});
    launch_from_python(kernel, a, call);
    owned.release();
    return tuple_of({q_packed, q_scale, weights_out});
  });
}

// --- Dequantize + gather -----------------------------------------------------------------------

// (out, k_cache, seq_lens, gather_lens|None, block_table, block_size|None, offset, stream[, pdl])
PyObject* dequant_gather(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (!has_arguments_and_pdl("dequant_gather", nargs, 8)) return nullptr;
  return guarded([&]() -> PyObject* {
    auto& kernel = dsv4::DequantGatherKernel::instance();
    FastCall call(kernel.name(), args[7]);
    dsv4::DequantGatherArgs a;
    PyObject* out = args[0];
    a.out = call.tensor(out, "out");
    a.k_cache = call.tensor(args[1], "k_cache");
    a.seq_lens = call.tensor(args[2], "seq_lens");
    a.gather_lens = call.optional_tensor(args[3], "gather_lens");
    a.block_table = call.tensor(args[4], "block_table");
    ArgumentChecks(call.kernel())
        .matches_size(call.optional_integer(args[5], "block_size"), "block_size", a.k_cache.desc,
                      "k_cache", 1);
    a.offset = call.integer(args[6], "offset");
    a.pdl = nargs > 8 && PyObject_IsTrue(args[8]) == 1;
    launch_from_python(kernel, a, call);
    Py_RETURN_NONE;
  });
}

// --- Compressors -------------------------------------------------------------------------------

// Launches the C4 store of the cache's layout (ds_mla or full rows).
template <class Args>
void launch_store(FastCall& call, bool full_rows, const Args& args, auto& ds_mla, auto& full) {
  if (full_rows) {
    call.set_kernel(full.name());
    launch_from_python(full, args, call);
  } else {
    launch_from_python(ds_mla, args, call);
  }
}

// (state_cache, token_to_req, positions, slot_mapping, block_table, block_size|None,
//  rms_norm_weight, eps, cos_sin_cache, k_cache, kv_slot_mapping, kv_cache_block_size|None,
//  kv_block_stride|None, fp8_scale|None, store_full_kv|None, store_full_fp8|None, stream[, pdl])
PyObject* c4_store(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (!has_arguments_and_pdl("c4_store", nargs, 17)) return nullptr;
  return guarded([&]() -> PyObject* {
    auto& ds_mla = dsv4::C4StoreKernel::instance();
    auto& full = dsv4::C4StoreFullKernel::instance();
    FastCall call(ds_mla.name(), args[16]);
    dsv4::C4StoreArgs a;
    a.k_cache = call.tensor(args[9], "k_cache");
    const bool full_rows =
        stores_full_rows(call, a.k_cache.desc, call.optional_flag(args[14], "store_full_kv"),
                         call.optional_flag(args[15], "store_full_fp8"));
    if (full_rows) call.set_kernel(full.name());
    a.compress_ratio = dsv4::kCsaCompressRatio;
    a.state_cache = call.tensor(args[0], "state_cache");
    a.token_to_req = call.tensor(args[1], "token_to_req_indices");
    a.positions = call.tensor(args[2], "positions");
    a.slot_mapping = call.tensor(args[3], "slot_mapping");
    a.block_table = call.tensor(args[4], "block_table");
    a.rms_norm_weight = call.tensor(args[6], "rms_norm_weight");
    a.eps = static_cast<float>(call.number(args[7], "rms_norm_eps"));
    a.cos_sin_cache = call.tensor(args[8], "cos_sin_cache");
    a.kv_slot_mapping = call.tensor(args[10], "kv_slot_mapping");
    a.fp8_scale = fp8_scale_or_unit(call, args[13], args[9], a.k_cache.desc);
    a.pdl = nargs > 17 && PyObject_IsTrue(args[17]) == 1;
    const ArgumentChecks checks(call.kernel());
    checks.matches_size(call.optional_integer(args[5], "block_size"), "block_size",
                        a.state_cache.desc, "state_cache", 1);
    checks.matches_size(call.optional_integer(args[11], "kv_cache_block_size"),
                        "kv_cache_block_size", a.k_cache.desc, "k_cache", 1);
    checks.matches_stride(call.optional_integer(args[12], "kv_block_stride"), "kv_block_stride",
                          a.k_cache.desc, "k_cache");
    launch_store(call, full_rows, a, ds_mla, full);
    Py_RETURN_NONE;
  });
}

void read_c128_compress(FastCall& call, PyObject* const* args, dsv4::C128CompressArgs& a) {
  a.state_cache = call.tensor(args[0], "state_cache");
  a.token_to_req = call.tensor(args[1], "token_to_req_indices");
  a.positions = call.tensor(args[2], "positions");
  a.slot_mapping = call.tensor(args[3], "slot_mapping");
  a.block_table = call.tensor(args[4], "block_table");
  ArgumentChecks(call.kernel())
      .matches_size(call.optional_integer(args[5], "block_size"), "block_size", a.state_cache.desc,
                    "state_cache", 1);
}

// The C128 store's arguments from args[first...]: (rms_norm_weight, eps, cos_sin_cache,
// k_cache, kv_slot_mapping, kv_cache_block_size|None, kv_block_stride|None, fp8_scale|None,
// store_full_kv|None, store_full_fp8|None). Returns whether the cache takes full rows.
bool read_c128_store(FastCall& call, PyObject* const* args, dsv4::C128StoreArgs& a) {
  a.k_cache = call.tensor(args[3], "k_cache");
  const bool full_rows =
      stores_full_rows(call, a.k_cache.desc, call.optional_flag(args[8], "store_full_kv"),
                       call.optional_flag(args[9], "store_full_fp8"));
  if (full_rows) call.set_kernel(dsv4::C128StoreFullKernel::instance().name());
  a.rms_norm_weight = call.tensor(args[0], "rms_norm_weight");
  a.eps = static_cast<float>(call.number(args[1], "rms_norm_eps"));
  a.cos_sin_cache = call.tensor(args[2], "cos_sin_cache");
  a.kv_slot_mapping = call.tensor(args[4], "kv_slot_mapping");
  a.fp8_scale = fp8_scale_or_unit(call, args[7], args[3], a.k_cache.desc);
  const ArgumentChecks checks(call.kernel());
  checks.matches_size(call.optional_integer(args[5], "kv_cache_block_size"), "kv_cache_block_size",
                      a.k_cache.desc, "k_cache", 1);
  checks.matches_stride(call.optional_integer(args[6], "kv_block_stride"), "kv_block_stride",
                        a.k_cache.desc, "k_cache");
  return full_rows;
}

// (state_cache, token_to_req, positions, slot_mapping, block_table, block_size|None,
//  compressed_kv|None, stream) -> compressed_kv
PyObject* c128_compress(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (!has_arguments("c128_compress", nargs, 8)) return nullptr;
  return guarded([&]() -> PyObject* {
    auto& kernel = dsv4::C128CompressKernel::instance();
    FastCall call(kernel.name(), args[7]);
    dsv4::C128CompressArgs a;
    read_c128_compress(call, args, a);
    PyObject* compressed_kv = args[6];
    OwnedObjects owned{&compressed_kv};
    a.compressed_kv =
        call.output(compressed_kv, "compressed_kv", DType::f32,
                    {extent(call, a.slot_mapping, "slot_mapping", 1, 0), dsv4::kCompressorHeadDim});
    launch_from_python(kernel, a, call);
    owned.release();
    return compressed_kv;
  });
}

// (compressed_kv, positions, slot_mapping, rms_norm_weight, eps, cos_sin_cache, k_cache,
//  kv_slot_mapping, kv_cache_block_size|None, kv_block_stride|None, fp8_scale|None,
//  store_full_kv|None, store_full_fp8|None, stream)
PyObject* c128_store(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (!has_arguments("c128_store", nargs, 14)) return nullptr;
  return guarded([&]() -> PyObject* {
    FastCall call(dsv4::C128StoreKernel::instance().name(), args[13]);
    dsv4::C128StoreArgs a;
    const bool full_rows = read_c128_store(call, args + 3, a);
    a.compressed_kv = call.tensor(args[0], "compressed_kv");
    a.positions = call.tensor(args[1], "positions");
    a.slot_mapping = call.tensor(args[2], "slot_mapping");
    launch_store(call, full_rows, a, dsv4::C128StoreKernel::instance(),
                 dsv4::C128StoreFullKernel::instance());
    Py_RETURN_NONE;
  });
}

// C128 compress then store in one call (two launches):
// (state_cache, token_to_req, positions, slot_mapping, block_table, block_size|None,
//  compressed_kv|None, rms_norm_weight, eps, cos_sin_cache, k_cache, kv_slot_mapping,
//  kv_cache_block_size|None, kv_block_stride|None, fp8_scale|None, store_full_kv|None,
//  store_full_fp8|None, stream[, pdl])
PyObject* c128_split(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (!has_arguments_and_pdl("c128_split", nargs, 18)) return nullptr;
  return guarded([&]() -> PyObject* {
    auto& compress = dsv4::C128CompressKernel::instance();
    FastCall call(compress.name(), args[17]);
    dsv4::C128CompressArgs stage1;
    read_c128_compress(call, args, stage1);
    PyObject* compressed_kv = args[6];
    OwnedObjects owned{&compressed_kv};
    stage1.compressed_kv = call.output(
        compressed_kv, "compressed_kv", DType::f32,
        {extent(call, stage1.slot_mapping, "slot_mapping", 1, 0), dsv4::kCompressorHeadDim});
    call.set_kernel(dsv4::C128StoreKernel::instance().name());
    dsv4::C128StoreArgs stage2;
    const bool full_rows = read_c128_store(call, args + 7, stage2);
    stage2.compressed_kv = stage1.compressed_kv;
    stage2.positions = stage1.positions;
    stage2.slot_mapping = stage1.slot_mapping;
    stage1.pdl = stage2.pdl = nargs > 18 && PyObject_IsTrue(args[18]) == 1;
    // The store's arguments are checked (planned) before the compress launches: a call that
    // fails launches nothing, and leaves a given compressed_kv as it was.
    call.set_kernel(full_rows ? dsv4::C128StoreFullKernel::instance().name()
                              : dsv4::C128StoreKernel::instance().name());
    if (full_rows) {
      (void)dsv4::C128StoreFullKernel::instance().launch_spec(stage2);
    } else {
      (void)dsv4::C128StoreKernel::instance().launch_spec(stage2);
    }
    call.set_kernel(compress.name());
    launch_from_python(compress, stage1, call);
    call.set_kernel(dsv4::C128StoreKernel::instance().name());
    launch_store(call, full_rows, stage2, dsv4::C128StoreKernel::instance(),
                 dsv4::C128StoreFullKernel::instance());
    Py_RETURN_NONE;
  });
}

// --- Ops derived from a kernel's declared arguments --------------------------------------------
//
// A family row with a Python op name gets its fast path from the kernel's argument declaration
// (zerojit/arguments.hpp): the declared fields positionally, in declaration order, then the
// stream. Outputs with an allocation rule may be None (allocated like the input the rule names)
// and are returned; the op returns None when it has none.

// An input, a scalar or a launch option from its positional argument (outputs come after).
template <class Field, class Args>
void read_declared(FastCall& call, PyObject* object, const Field& field, Args& args) {
  auto& value = args.*(field.member);
  using V = std::remove_cvref_t<decltype(value)>;
  if constexpr (std::is_same_v<V, TensorRef>) {
    if (field.role == ArgumentRole::input) value = call.tensor(object, field.name);
  } else if constexpr (std::is_same_v<V, std::optional<TensorRef>>) {
    if (field.role == ArgumentRole::input) value = call.optional_tensor(object, field.name);
  } else if constexpr (std::is_same_v<V, bool>) {
    value = call.optional_flag(object, field.name).value_or(value);
  } else if constexpr (std::is_same_v<V, int>) {
    value = int32_argument(call.kernel(), object, field.name);
  } else if constexpr (std::is_integral_v<V>) {
    value = call.integer(object, field.name);
  } else {
    value = static_cast<V>(call.number(object, field.name));
  }
}

// Field I of the call when it is an output: the tensor given, or (with an allocation rule, and
// None given) a new one shaped like the input the rule names, whose rank is checked first.
// Returns whether the op returns it: the outputs a caller may leave to zerojit, which become new
// references held by `owned` from here on, given or allocated.
template <class Args, std::size_t I>
bool read_output(FastCall& call, PyObject*& slot, Args& args, OwnedObjects& owned) {
  constexpr auto field = std::get<I>(Args::fields());
  auto& value = args.*(field.member);
  if constexpr (field.role != ArgumentRole::output ||
                !std::is_same_v<std::remove_cvref_t<decltype(value)>, TensorRef>) {
    return false;
  } else if constexpr (field.allocation.like.empty()) {
    value = call.written(slot, field.name);
    return false;
  } else {
    constexpr std::size_t like = argument_index<Args>(field.allocation.like);
    static_assert(like < argument_count<Args>, "an allocation rule names no argument");
    constexpr auto like_field = std::get<like>(Args::fields());
    const TensorRef& input = args.*(like_field.member);
    std::array<std::int64_t, kMaxTensorDims> shape{};
    std::size_t rank = 0;
    for (int dim = 0; dim < field.allocation.leading_dims; ++dim) {
      shape.at(rank++) = extent(call, input, like_field.name, field.allocation.leading_dims, dim);
    }
    for (int i = 0; i < field.allocation.trailing_count; ++i) {
      shape.at(rank++) = field.allocation.trailing.at(static_cast<std::size_t>(i));
    }
    owned.add(&slot);
    value = call.output(slot, field.name, field.allocation.dtype,
                        std::span<const std::int64_t>(shape.data(), rank));
    return true;
  }
}

template <class Kernel>
PyObject* declared_op(PyObject*, PyObject* const* objects, Py_ssize_t nargs) {
  using Args = CallArgs<typename Kernel::Descriptors>;
  constexpr std::size_t count = argument_count<Args>;
  auto& kernel = Kernel::instance();
  if (nargs != static_cast<Py_ssize_t>(count) + 1) {
    PyErr_Format(PyExc_TypeError, "%s takes %zd positional arguments (%zd given)",
                 kernel.name().c_str(), static_cast<Py_ssize_t>(count) + 1, nargs);
    return nullptr;
  }
  return guarded([&]() -> PyObject* {
    FastCall call(kernel.name(), objects[count]);
    Args args;
    // The slots an allocated output replaces; held (OwnedObjects) until handed back.
    std::array<PyObject*, count> slots{};
    std::copy(objects, objects + count, slots.begin());
    std::size_t position = 0;
    for_each_argument<Args>(
        [&](const auto& field) { read_declared(call, slots[position++], field, args); });
    OwnedObjects owned{};
    std::array<PyObject*, count> returned{};
    std::size_t returns = 0;
    for_each_argument_index<Args>([&](auto index) {
      constexpr std::size_t I = decltype(index)::value;
      if (read_output<Args, I>(call, slots[I], args, owned)) returned.at(returns++) = slots[I];
    });
    launch_from_python(kernel, args, call);
    owned.release();
    if (returns == 0) Py_RETURN_NONE;
    if (returns == 1) return returned[0];
    PyObject* tuple = PyTuple_New(static_cast<Py_ssize_t>(returns));
    if (tuple == nullptr) throw pybind11::error_already_set();
    for (std::size_t i = 0; i < returns; ++i) {
      PyTuple_SET_ITEM(tuple, static_cast<Py_ssize_t>(i), returned[i]);
    }
    return tuple;
  });
}

// "(logits, topk_indices, packed|None, ..., pdl, stream) -> packed": the op's docstring.
template <class Args>
std::string declared_signature(std::string_view kernel) {
  std::string text = std::string(kernel) + " (fast path): (";
  std::string returns;
  for_each_argument<Args>([&](const auto& field) {
    text += std::string(field.name);
    const bool allocated = field.role == ArgumentRole::output && !field.allocation.like.empty();
    if (allocated) returns += (returns.empty() ? "" : ", ") + std::string(field.name);
    if (allocated || field.role == ArgumentRole::launch_option) text += "|None";
    text += ", ";
  });
  return text + "stream) -> " + (returns.empty() ? "None" : returns);
}

// Adds the derived op of every family row with a Python op name to `fast`, and their operator
// schemas (zerojit/arguments.hpp) as fast.SCHEMAS, {op: schema}, for zerojit.torch_ops.
void bind_declared_ops(pybind11::module_& fast) {
  // PyMethodDef and its strings must outlive the module.
  static std::deque<PyMethodDef> definitions;
  static std::deque<std::string> texts;
  pybind11::dict schemas;
  dsv4::kFamily.for_each_row([&](const auto& row) {
    using Kernel = typename std::remove_cvref_t<decltype(row)>::KernelType;
    if constexpr (DeclaredArguments<typename Kernel::Descriptors>) {
      if (row.python_op.empty()) return;
      using Args = CallArgs<typename Kernel::Descriptors>;
      const std::string& name = texts.emplace_back(row.python_op);
      const std::string& doc =
          texts.emplace_back(declared_signature<Args>(Kernel::instance().name()));
      PyMethodDef& definition = definitions.emplace_back(PyMethodDef{
          name.c_str(),
          reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&declared_op<Kernel>)),
          METH_FASTCALL, doc.c_str()});
      PyObject* function =
          PyCMethod_New(&definition, nullptr, fast.attr("__name__").ptr(), nullptr);
      if (function == nullptr) throw pybind11::error_already_set();
      fast.add_object(name.c_str(), pybind11::reinterpret_steal<pybind11::object>(function));
      schemas[name.c_str()] = operator_schema<Args>();
    }
  });
  fast.attr("SCHEMAS") = schemas;
}

PyMethodDef kFastOps[] = {
    {"indexer_q_fp8", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(indexer_q_fp8)),
     METH_FASTCALL, "FP8 indexer-Q RoPE + quant (fast path)"},
    {"indexer_q_mxfp4",
     reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(indexer_q_mxfp4)), METH_FASTCALL,
     "MXFP4 indexer-Q RoPE + quant (fast path)"},
    {"dequant_gather", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(dequant_gather)),
     METH_FASTCALL, "dequantize + gather of the paged K cache (fast path)"},
    {"c4_store", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(c4_store)),
     METH_FASTCALL, "C4 compress + norm + RoPE + store (fast path)"},
    {"c128_compress", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(c128_compress)),
     METH_FASTCALL, "C128 compress (fast path)"},
    {"c128_store", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(c128_store)),
     METH_FASTCALL, "C128 norm + RoPE + store (fast path)"},
    {"c128_split", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(c128_split)),
     METH_FASTCALL, "C128 compress then store, one call (fast path)"},
    {nullptr, nullptr, 0, nullptr},
};

}  // namespace

void bind_fast_ops(pybind11::module_& module) {
  pybind11::module_ fast = module.def_submodule(
      "fast", "the DSv4 ops' launch path: positional arguments, the stream last");
  if (PyModule_AddFunctions(fast.ptr(), kFastOps) != 0) throw pybind11::error_already_set();
  bind_declared_ops(fast);
}

}  // namespace zerojit::python
