// The DSv4 ops' launch path from Python: one METH_FASTCALL function per Python op of the family
// table (kernels/dsv4/family.hpp), derived from its kernels' declared arguments
// (declared_call.hpp): the declared entries positionally, in declaration order (implied fields
// left out, launch options in), then the stream (None: the tensors' framework's current
// stream). Outputs with an allocation rule may be None (allocated like the tensor the rule
// names) and are returned; an op without one returns None. Their operator schemas are
// fast.SCHEMAS, for zerojit.pytorch.ops. Plus c128_split, two ops in one call.
//
// The CPU-reference mode of the same ops is reference_ops.cpp (host tensors, not a hot path).
#include <Python.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <deque>
#include <initializer_list>
#include <span>
#include <string>
#include <type_traits>

#include "bindings.hpp"
#include "declared_call.hpp"
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

template <class Body>
PyObject* guarded(Body&& body) {
  try {
    return body();
  } catch (...) {
    set_python_error_from_current_exception();
    return nullptr;
  }
}

// How the launch path takes tensors (DeclaredReader's Source): through the fast call, outputs
// with an allocation rule left to take_allocatable_outputs.
class LaunchSource {
 public:
  static constexpr bool allocates = true;

  explicit LaunchSource(FastCall& call) : call_(call) {}

  std::string_view kernel() const { return call_.kernel(); }
  void set_kernel(std::string_view kernel) { call_.set_kernel(kernel); }
  ArgumentChecks checks() const { return ArgumentChecks(call_.kernel()); }
  TensorRef input(PyObject* object, std::string_view argument) {
    return call_.tensor(object, argument);
  }
  TensorRef output(PyObject* object, std::string_view argument) {
    return call_.written(object, argument);
  }
  std::optional<TensorRef> optional_input(PyObject* object, std::string_view argument) {
    return call_.optional_tensor(object, argument);
  }
  // vLLM's ones(1): one tensor per device, made once by the Python side
  // (zerojit.dsv4.launch.unit_scale) and kept there.
  TensorRef unit_scale(PyObject* like, std::string_view argument) {
    PyObject* module = PyImport_ImportModule("zerojit.dsv4.launch");
    if (module == nullptr) throw pybind11::error_already_set();
    const std::string kernel(call_.kernel());
    const std::string name(argument);
    PyObject* unit =
        PyObject_CallMethod(module, "unit_scale", "Oss", like, kernel.c_str(), name.c_str());
    Py_DECREF(module);
    if (unit == nullptr) throw pybind11::error_already_set();
    Py_DECREF(unit);  // kept alive by zerojit.dsv4.launch's per-device cache
    return call_.tensor(unit, argument);
  }

 private:
  FastCall& call_;
};

// The outputs of a call its caller may leave to zerojit (those with an allocation rule), in
// declaration order.
struct ReturnedOutputs {
  std::array<PyObject*, 4> objects{};
  std::size_t count = 0;

  // None, the one output, or a tuple of them; the references are handed over.
  PyObject* to_python() const {
    if (count == 0) Py_RETURN_NONE;
    if (count == 1) return objects[0];
    PyObject* tuple = PyTuple_New(static_cast<Py_ssize_t>(count));
    if (tuple == nullptr) throw pybind11::error_already_set();
    for (std::size_t i = 0; i < count; ++i) {
      PyTuple_SET_ITEM(tuple, static_cast<Py_ssize_t>(i), objects[i]);
    }
    return tuple;
  }
};

// Each output with an allocation rule: the tensor given, or (None given) a new one shaped like
// the tensor the rule names (whose rank the reader checked). Each becomes a new reference held
// by `owned`, given or allocated; `slots` are the call's objects by signature position.
template <class Args>
ReturnedOutputs take_allocatable_outputs(FastCall& call, PyObject** slots, Args& args,
                                         OwnedObjects& owned) {
  ReturnedOutputs returned;
  for_each_argument_index<Args>([&](auto index) {
    constexpr auto entry = std::get<index.value>(Args::fields());
    if constexpr (is_argument_field<decltype(entry)>) {
      if constexpr (entry.role == ArgumentRole::output && !entry.allocation.like.empty()) {
        PyObject*& slot = slots[signature_position<Args, Binding::launch, index.value>()];
        const TensorDesc& like =
            field_value<argument_index<Args>(entry.allocation.like)>(args).desc;
        std::array<std::int64_t, kMaxTensorDims> shape{};
        const std::size_t rank = slot == Py_None
                                     ? allocated_shape(entry.allocation, like, entry.name,
                                                       ArgumentChecks(call.kernel()), shape)
                                     : 0;
        owned.add(&slot);
        args.*(entry.member) = call.output(slot, entry.name, entry.allocation.dtype,
                                           std::span<const std::int64_t>(shape.data(), rank));
        returned.objects.at(returned.count++) = slot;
      }
    }
  });
  return returned;
}

// The launch path of the op of family row `Row` (its first row).
template <std::size_t Row>
PyObject* declared_op(PyObject*, PyObject* const* objects, Py_ssize_t nargs) {
  using Op = FamilyOp<Row>;
  using Args = typename Op::Args;
  constexpr std::size_t count = signature_size<Args, Binding::launch>();
  if (nargs != static_cast<Py_ssize_t>(count) + 1) {
    PyErr_Format(PyExc_TypeError,
                 "zerojit._core.fast.%s takes %zd positional arguments (%zd given)",
                 std::string(Op::name).c_str(), static_cast<Py_ssize_t>(count) + 1, nargs);
    return nullptr;
  }
  return guarded([&]() -> PyObject* {
    FastCall call(Op::kernel_name(0), objects[count]);
    LaunchSource source(call);
    Args args;
    // The objects an allocated output replaces; held (OwnedObjects) until handed back.
    std::array<PyObject*, count> slots{};
    std::copy(objects, objects + count, slots.begin());
    DeclaredReader<Args, Binding::launch, LaunchSource> reader(source, args, slots.data());
    const std::size_t variant = pick_kernel<Op>(reader, source);
    reader.read_all();
    OwnedObjects owned{};
    const ReturnedOutputs returned = take_allocatable_outputs(call, slots.data(), args, owned);
    Op::with_kernel(variant, [&](auto& kernel) { launch_from_python(kernel, args, call); });
    owned.release();
    return returned.to_python();
  });
}

// --- C128 compress then store, one call --------------------------------------------------------

// (the c128_compress op's arguments but pdl; the c128_store op's but compressed_kv, positions,
//  slot_mapping and pdl; pdl; stream) -> None: both launches of a C128 layer in one call.
// Written by hand, on the declared readers: it composes two ops, the store taking three tensors
// from the compress, and plans the store before the compress launches, so that a call that
// fails launches nothing and leaves a given compressed_kv as it was.
PyObject* c128_split(PyObject*, PyObject* const* objects, Py_ssize_t nargs) {
  using Compress = FamilyOp<family_op_row("c128_compress")>;
  using Store = FamilyOp<family_op_row("c128_store")>;
  using CompressArgs = Compress::Args;
  using StoreArgs = Store::Args;
  constexpr std::size_t compress_count = signature_size<CompressArgs, Binding::launch>();
  constexpr std::size_t store_count = signature_size<StoreArgs, Binding::launch>();
  // The store's compressed_kv, positions and slot_mapping (its first entries) are the compress's.
  constexpr std::size_t handed = 3;
  constexpr std::size_t count = (compress_count - 1) + (store_count - handed - 1) + 2;
  constexpr std::size_t store_kv = argument_index<StoreArgs>("compressed_kv");
  constexpr std::size_t store_positions = argument_index<StoreArgs>("positions");
  constexpr std::size_t store_slots = argument_index<StoreArgs>("slot_mapping");
  static_assert(store_kv == 0 && store_positions == 1 && store_slots == 2);
  static_assert(std::get<argument_count<CompressArgs> - 1>(CompressArgs::fields()).role ==
                        ArgumentRole::launch_option &&
                    std::get<argument_count<StoreArgs> - 1>(StoreArgs::fields()).role ==
                        ArgumentRole::launch_option,
                "pdl, both ops' last argument, is passed once");
  if (nargs != static_cast<Py_ssize_t>(count)) {
    PyErr_Format(PyExc_TypeError,
                 "zerojit._core.fast.c128_split takes %zd positional arguments "
                 "(%zd given)",
                 static_cast<Py_ssize_t>(count), nargs);
    return nullptr;
  }
  return guarded([&]() -> PyObject* {
    PyObject* const pdl = objects[count - 2];
    FastCall call(Compress::kernel_name(0), objects[count - 1]);
    LaunchSource source(call);

    CompressArgs stage1;
    std::array<PyObject*, compress_count> compress_objects{};
    std::copy(objects, objects + compress_count - 1, compress_objects.begin());
    compress_objects.back() = pdl;
    DeclaredReader<CompressArgs, Binding::launch, LaunchSource> compress(source, stage1,
                                                                         compress_objects.data());
    compress.read_all();
    OwnedObjects owned{};
    (void)take_allocatable_outputs(call, compress_objects.data(), stage1, owned);

    call.set_kernel(Store::kernel_name(0));
    StoreArgs stage2;
    stage2.compressed_kv = stage1.compressed_kv;
    stage2.positions = stage1.positions;
    stage2.slot_mapping = stage1.slot_mapping;
    std::array<PyObject*, store_count> store_objects{};  // the handed ones are never read
    std::copy(objects + compress_count - 1, objects + count - 2, store_objects.begin() + handed);
    store_objects.back() = pdl;
    DeclaredReader<StoreArgs, Binding::launch, LaunchSource> store(source, stage2,
                                                                   store_objects.data());
    store.preset<store_kv>();
    store.preset<store_positions>();
    store.preset<store_slots>();
    const std::size_t variant = pick_kernel<Store>(store, source);
    store.read_all();
    Store::with_kernel(variant, [&](auto& kernel) { (void)kernel.launch_spec(stage2); });

    call.set_kernel(Compress::kernel_name(0));
    launch_from_python(Compress::KernelOf<Compress::rows[0]>::instance(), stage1, call);
    call.set_kernel(Store::kernel_name(variant));
    Store::with_kernel(variant, [&](auto& kernel) { launch_from_python(kernel, stage2, call); });
    // Nothing is returned, so `owned` drops the references it took: a given compressed_kv stays
    // the caller's, one allocated here goes as any PyTorch op's temporary does (its memory
    // reused only behind the launches on its stream).
    Py_RETURN_NONE;
  });
}

// --- Binding -----------------------------------------------------------------------------------

// Adds the op of family row `Row` to `fast` when the row is its op's first, and its operator
// schema to `schemas`.
template <std::size_t Row>
void bind_declared_op(pybind11::module_& fast, pybind11::dict& schemas) {
  if constexpr (!dsv4::kFamily.row<Row>().python_op.empty()) {
    using Op = FamilyOp<Row>;
    if constexpr (Op::first) {
      // PyMethodDef and its strings must outlive the module.
      static const std::string name(Op::name);
      static const std::string doc = [] {
        std::string kernels;
        for (std::size_t v = 0; v < Op::row_count; ++v) {
          kernels += (v == 0 ? "" : " or ") + std::string(Op::kernel_name(v));
        }
        const auto [arguments, returns] = signature_text<typename Op::Args, Binding::launch>();
        return kernels + " (fast path): (" + arguments + ", stream) -> " +
               (returns.empty() ? "None" : returns);
      }();
      static PyMethodDef definition{
          name.c_str(),
          reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&declared_op<Row>)),
          METH_FASTCALL, doc.c_str()};
      PyObject* function =
          PyCMethod_New(&definition, nullptr, fast.attr("__name__").ptr(), nullptr);
      if (function == nullptr) throw pybind11::error_already_set();
      fast.add_object(name.c_str(), pybind11::reinterpret_steal<pybind11::object>(function));
      schemas[name.c_str()] = operator_schema<typename Op::Args>();
    }
  }
}

// Adds c128_split, documented with its signature: the two ops' arguments it takes.
void bind_c128_split(pybind11::module_& fast) {
  using Compress = FamilyOp<family_op_row("c128_compress")>;
  using Store = FamilyOp<family_op_row("c128_store")>;
  static const std::string doc = [] {
    const std::string compress = signature_text<Compress::Args, Binding::launch>().first;
    const std::string store = signature_text<Store::Args, Binding::launch>().first;
    const std::string pdl = ", pdl|None";
    // The compress's arguments but pdl, then the store's but the three it is handed, and pdl.
    const std::string handed = "compressed_kv, positions, slot_mapping, ";
    return "dsv4.c128_compress then dsv4.c128_store or dsv4.c128_store_full, one call (fast "
           "path): (" +
           compress.substr(0, compress.size() - pdl.size()) + ", " + store.substr(handed.size()) +
           ", stream) -> None";
  }();
  static PyMethodDef definition{
      "c128_split", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(c128_split)),
      METH_FASTCALL, doc.c_str()};
  PyObject* function = PyCMethod_New(&definition, nullptr, fast.attr("__name__").ptr(), nullptr);
  if (function == nullptr) throw pybind11::error_already_set();
  fast.add_object("c128_split", pybind11::reinterpret_steal<pybind11::object>(function));
}

}  // namespace

void bind_fast_ops(pybind11::module_& module) {
  pybind11::module_ fast = module.def_submodule(
      "fast", "the DSv4 ops' launch path: positional arguments, the stream last");
  pybind11::dict schemas;
  using Table = std::remove_cvref_t<decltype(dsv4::kFamily)>;
  [&]<std::size_t... Row>(std::index_sequence<Row...>) {
    (bind_declared_op<Row>(fast, schemas), ...);
  }
  (std::make_index_sequence<Table::row_count>{});
  fast.attr("SCHEMAS") = schemas;
  bind_c128_split(fast);
}

}  // namespace zerojit::python
