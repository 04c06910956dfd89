// The DSv4 kernels' CPU references, callable from Python with host DLPack tensors
// (zerojit._core.reference, behind zerojit.reference): one per Python op of the family table,
// derived from its kernels' declared arguments (declared_call.hpp), as the launch path is
// (fast_ops.cpp), with the same positional signature less the launch options and the stream.
//
// The kernel owner validates and plans the call exactly as for a launch (the host tensors are
// relabelled cuda:0 for validation), and the CPU reference runs on the very argument block the
// kernel would have received. Validation, dispatch and parameter packing are therefore shared
// with the launch path, and a GPU test can compare the two bit for bit.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "bindings.hpp"
#include "declared_call.hpp"
#include "dlpack.hpp"
#include "dsv4/compressor/reference.hpp"
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

// The index tensors of a call (declared with indexes(...)) against what they index: each value
// below the product of the indexed tensor's leading extents.
template <class Args>
void check_index_bounds(const CallArguments& call, const Args& args) {
  for_each_argument_index<Args>([&](auto index) {
    constexpr auto entry = std::get<index.value>(Args::fields());
    if constexpr (is_argument_field<decltype(entry)>) {
      if constexpr (!entry.bound.tensor.empty()) {
        const TensorDesc& indexed =
            field_value<argument_index<Args>(entry.bound.tensor)>(args).desc;
        std::int64_t bound = indexed.ndim >= entry.bound.dims ? 1 : 0;
        for (int dim = 0; dim < entry.bound.dims && bound > 0; ++dim) bound *= indexed.size(dim);
        const TensorRef* read_where = nullptr;
        if constexpr (!entry.bound.read_where_tensor.empty()) {
          read_where = &field_value<argument_index<Args>(entry.bound.read_where_tensor)>(args);
        }
        check_indices_below(
            call, args.*(entry.member), entry.name, bound,
            "the " + std::string(entry.bound.what) + " of " + std::string(entry.bound.tensor),
            read_where);
      }
    }
  });
}

// How a reference takes tensors (DeclaredReader's Source): host tensors, every output passed.
class ReferenceSource {
 public:
  static constexpr bool allocates = false;

  explicit ReferenceSource(CallArguments& call) : call_(call) {}

  std::string_view kernel() const { return call_.kernel(); }
  void set_kernel(std::string_view kernel) { call_.set_kernel(kernel); }
  ArgumentChecks checks() const { return call_.checks(); }
  TensorRef input(PyObject* object, std::string_view argument) {
    return call_.input(py::handle(object), argument);
  }
  TensorRef output(PyObject* object, std::string_view argument) {
    return call_.output(py::handle(object), argument);
  }
  std::optional<TensorRef> optional_input(PyObject* object, std::string_view argument) {
    return call_.optional_input(py::handle(object), argument);
  }
  // A float32 1.0 in host memory, labelled as the tensors the reference validates are.
  TensorRef unit_scale(PyObject*, std::string_view) {
    static const float one = 1.0f;
    return make_tensor_ref(const_cast<float*>(&one),
                           TensorDesc::contiguous(DType::f32, {1}, Device::cuda(0)));
  }

 private:
  CallArguments& call_;
};

// The argument block type of an owner's reference(key, params) and what it returns.
template <class Function>
struct ReferenceSignature;
template <class Result, class Key, class Params>
struct ReferenceSignature<Result (*)(const Key&, const Params&)> {
  using ParamsType = Params;
};

// The reference of the op of family row `Row` (its first row): the call planned as for a
// launch, its index tensors checked, then the kernel's typed reference on the block the plan
// packed. Returns what that returns (the rows a compressor wrote), or None.
template <std::size_t Row>
py::object declared_reference(const py::args& values) {
  using Op = FamilyOp<Row>;
  using Args = typename Op::Args;
  constexpr std::size_t count = signature_size<Args, Binding::reference>();
  if (values.size() != count) {
    throw py::type_error("zerojit._core.reference." + std::string(Op::name) + " takes " +
                         std::to_string(count) + " positional arguments (" +
                         std::to_string(values.size()) + " given)");
  }
  CallArguments call(Op::kernel_name(0));
  ReferenceSource source(call);
  std::array<PyObject*, count> objects{};
  for (std::size_t i = 0; i < count; ++i) objects[i] = values[i].ptr();
  Args args;
  DeclaredReader<Args, Binding::reference, ReferenceSource> reader(source, args, objects.data());
  const std::size_t variant = pick_kernel<Op>(reader, source);
  reader.read_all();
  return Op::with_kernel(variant, [&](auto& kernel) -> py::object {
    using Kernel = std::remove_cvref_t<decltype(kernel)>;
    using Params = typename ReferenceSignature<decltype(&Kernel::reference)>::ParamsType;
    const auto run = [&] {
      const auto spec = kernel.launch_spec(args);
      check_index_bounds(call, args);
      return Kernel::reference(spec.key, unpack_params<Params>(spec.args, call.kernel()));
    };
    if constexpr (std::is_void_v<decltype(run())>) {
      run_reference(run);
      return py::none();
    } else {
      return py::cast(run_reference(run));
    }
  });
}

// Adds the reference of family row `Row` to `reference` when the row is its op's first.
template <std::size_t Row>
void bind_declared_reference(py::module_& reference) {
  if constexpr (!dsv4::kFamily.row<Row>().python_op.empty()) {
    using Op = FamilyOp<Row>;
    if constexpr (Op::first) {
      std::string kernels;
      for (std::size_t v = 0; v < Op::row_count; ++v) {
        kernels += (v == 0 ? "" : " or ") + std::string(Op::kernel_name(v));
      }
      const auto signature = signature_text<typename Op::Args, Binding::reference>();
      reference.def(
          std::string(Op::name).c_str(), &declared_reference<Row>,
          (kernels + ": the CPU reference on host tensors: (" + signature.first + ")").c_str());
    }
  }
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
  using Table = std::remove_cvref_t<decltype(dsv4::kFamily)>;
  [&]<std::size_t... Row>(std::index_sequence<Row...>) {
    (bind_declared_reference<Row>(reference), ...);
  }
  (std::make_index_sequence<Table::row_count>{});

  reference.def("compare_ds_mla_rows", &compare_ds_mla_rows, py::arg("expected"), py::arg("actual"),
                py::arg("page_stride_bytes"), py::arg("kv_cache_block_size"), py::arg("kv_slots"));
  reference.def("compare_full_rows", &compare_full_rows, py::arg("expected"), py::arg("actual"),
                py::arg("page_stride_bytes"), py::arg("row_stride_bytes"),
                py::arg("kv_cache_block_size"), py::arg("kv_slots"), py::arg("store_full_fp8"));
  reference.def("compare_compressed_kv", &compare_compressed_kv, py::arg("expected"),
                py::arg("actual"), py::arg("row_length"), py::arg("rows"));
}

}  // namespace zerojit::python
