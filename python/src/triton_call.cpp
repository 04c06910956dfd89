#include "triton_call.hpp"

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <bit>
#include <cstring>
#include <memory>
#include <mutex>

#include "bindings.hpp"
#include "call_values.hpp"
#include "exchange.hpp"
#include "fast_call.hpp"
#include "zerojit/launch_record.hpp"

namespace py = pybind11;

namespace zerojit::python {
namespace {

constexpr const char* kCapsuleName = "zerojit.TritonLauncher";

// Whether an integer fits a Triton integer type.
bool fits(const CallValue& value, std::string_view type) {
  if (value.above_int64) return type == "u64";
  const std::int64_t v = value.integer;
  if (type == "i64") return true;
  if (type == "u64") return v >= 0;
  if (type == "i32") return v >= INT32_MIN && v <= INT32_MAX;
  if (type == "u32") return v >= 0 && v <= UINT32_MAX;
  if (type == "i16") return v >= INT16_MIN && v <= INT16_MAX;
  if (type == "u16") return v >= 0 && v <= UINT16_MAX;
  if (type == "i8") return v >= INT8_MIN && v <= INT8_MAX;
  if (type == "u8") return v >= 0 && v <= UINT8_MAX;
  return false;
}

void push_integer(const CallValue& value, std::string_view type, KernelArgs& args) {
  const auto v =
      value.above_int64 ? static_cast<std::int64_t>(value.unsigned_integer) : value.integer;
  if (type == "i64" || type == "u64") {
    args.push(v);
  } else if (type == "i32" || type == "u32") {
    args.push(static_cast<std::uint32_t>(v));
  } else if (type == "i16" || type == "u16") {
    args.push(static_cast<std::uint16_t>(v));
  } else {
    args.push(static_cast<std::uint8_t>(v));
  }
}

// As Triton's launcher packs a Python number into a floating-point parameter (fp16 rounded to
// nearest, bf16 truncated from fp32), so that both launch bit-identical arguments.
void push_floating(double number, std::string_view type, KernelArgs& args) {
  if (type == "fp64") {
    args.push(number);
  } else if (type == "fp32") {
    args.push(static_cast<float>(number));
  } else if (type == "bf16") {
    args.push(
        static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(static_cast<float>(number)) >> 16));
  } else {
    std::uint16_t half = 0;
    PyFloat_Pack2(number, reinterpret_cast<char*>(&half), 1);
    args.push(half);
  }
}

}  // namespace

TritonArgument parse_triton_argument(const std::string& kernel, const std::string& name,
                                     const std::string& kind, const std::string& type,
                                     const std::string& pointee, bool divisible, bool constant_none,
                                     std::int64_t constant_value) {
  TritonArgument argument;
  argument.name = name;
  argument.type = type;
  argument.divisible_by_16 = divisible;
  argument.constant_none = constant_none;
  argument.constant_value = constant_value;
  if (kind == "pointer") {
    argument.kind = TritonArgument::Kind::pointer;
    if (!pointee.empty()) {
      argument.pointee = parse_dtype(pointee);
      if (!argument.pointee) {
        throw InvalidArgument(kernel, name, "has no zerojit dtype '" + pointee + "'");
      }
    }
  } else if (kind == "integer") {
    argument.kind = TritonArgument::Kind::integer;
  } else if (kind == "floating") {
    argument.kind = TritonArgument::Kind::floating;
  } else if (kind == "boolean") {
    argument.kind = TritonArgument::Kind::boolean;
  } else if (kind == "constant") {
    argument.kind = TritonArgument::Kind::constant;
  } else {
    throw InvalidArgument(kernel, name, "has no argument kind '" + kind + "'");
  }
  if (kind != "constant" && kind != "pointer" && triton_param_bytes(type) == 0) {
    throw InvalidArgument(kernel, name, "has a type zerojit cannot pack: '" + type + "'");
  }
  return argument;
}

TritonLauncher::TritonLauncher(DynamicKernel& kernel, std::vector<std::string> names,
                               std::vector<bool> memoized, PyObject* resolve)
    : kernel_(kernel), names_(std::move(names)), memoized_(std::move(memoized)), resolve_(resolve) {
  Py_INCREF(resolve_);
  if (memoized_.size() != names_.size()) {
    throw Error("kernel " + kernel_.name() + ": the memo flags do not match the arguments");
  }
  if (names_.size() > static_cast<std::size_t>(kMaxKernelParams)) {
    throw InvalidArgument(kernel_.name(), "params",
                          std::to_string(names_.size()) + " arguments; zerojit launches at most " +
                              std::to_string(kMaxKernelParams));
  }
}

TritonLauncher::~TritonLauncher() { Py_DECREF(resolve_); }

void TritonLauncher::set_spec(std::int64_t slot, std::vector<TritonArgument> arguments) {
  if (slot < 0) throw Error("kernel " + kernel_.name() + ": no slot " + std::to_string(slot));
  if (arguments.size() != names_.size()) {
    throw Error("kernel " + kernel_.name() + ": a specialization of " +
                std::to_string(arguments.size()) + " arguments for a function of " +
                std::to_string(names_.size()));
  }
  if (static_cast<std::size_t>(slot) >= specs_.size()) specs_.resize(slot + 1);
  specs_[static_cast<std::size_t>(slot)] = std::move(arguments);
}

const CallMemo::Entry& TritonLauncher::resolve(PyObject* const* args, Py_ssize_t count,
                                               const std::vector<std::uint64_t>& fingerprint,
                                               std::uint64_t hash) {
  py::tuple arguments(count);
  for (Py_ssize_t i = 0; i < count; ++i) arguments[i] = py::reinterpret_borrow<py::object>(args[i]);
  py::object result =
      py::reinterpret_steal<py::object>(PyObject_CallOneArg(resolve_, arguments.ptr()));
  if (!result) throw py::error_already_set();
  CallMemo::Entry resolved;
  resolved.fingerprint = fingerprint;
  const auto pair = result.cast<std::pair<std::int64_t, py::tuple>>();
  resolved.slot = pair.first;
  const py::tuple& grid = pair.second;
  if (grid.empty() || grid.size() > 3) {
    throw InvalidArgument(kernel_.name(), "grid",
                          "must give 1 to 3 extents, got " + std::to_string(grid.size()));
  }
  std::uint32_t* extents[] = {&resolved.grid.x, &resolved.grid.y, &resolved.grid.z};
  for (std::size_t i = 0; i < grid.size(); ++i) {
    const auto extent = grid[i].cast<long long>();
    if (extent < 0 || extent > 0x7fffffffLL) {
      throw InvalidArgument(kernel_.name(), "grid",
                            "extents must lie in [0, 2^31), got " + std::to_string(extent));
    }
    *extents[i] = static_cast<std::uint32_t>(extent);
  }
  if (resolved.slot < 0 || static_cast<std::size_t>(resolved.slot) >= specs_.size() ||
      specs_[static_cast<std::size_t>(resolved.slot)].empty() != names_.empty()) {
    throw Error("kernel " + kernel_.name() + ": resolve gave slot " +
                std::to_string(resolved.slot) + ", which has no specialization");
  }
  return memo_.insert(std::move(resolved), hash);
}

PyObject* TritonLauncher::call(PyObject* const* args, Py_ssize_t count, PyObject* stream) {
  FastCall call(kernel_.name(), stream);
  if (count != static_cast<Py_ssize_t>(names_.size())) {
    std::string names;
    for (const auto& name : names_) names += (names.empty() ? "" : ", ") + name;
    call.fail("args", "takes " + std::to_string(names_.size()) + " arguments (" + names +
                          "), got " + std::to_string(count));
  }
  // Reused from call to call (with the GIL held, one call at a time per thread): no allocation
  // once they have grown.
  thread_local std::vector<CallValue> values;
  thread_local std::vector<std::uint64_t> fingerprint;
  if (values.size() < names_.size()) values.resize(names_.size());
  fingerprint.clear();
  for (std::size_t i = 0; i < names_.size(); ++i) {
    values[i] = read_value(call, args[i], names_[i]);
    if (memoized_[i]) add_fingerprint(values[i], fingerprint);
  }
  const std::uint64_t hash = CallMemo::hash(fingerprint);
  const CallMemo::Entry* resolved = memo_.find(fingerprint, hash);
  if (resolved == nullptr) resolved = &resolve(args, count, fingerprint, hash);
  const std::int64_t slot = resolved->slot;
  const Dim3 grid = resolved->grid;

  const std::vector<TritonArgument>& spec = specs_[static_cast<std::size_t>(slot)];
  KernelArgs packed;
  std::optional<Device> device;
  auto describe = [&] { return describe_values(names_, values); };
  auto refuse = [&](const TritonArgument& argument, const std::string& detail) {
    kernel_.refuse_specialization(kernel_.slot_text(slot), argument.name, detail, describe());
  };
  for (std::size_t i = 0; i < spec.size(); ++i) {
    const TritonArgument& argument = spec[i];
    const CallValue& value = values[i];
    switch (argument.kind) {
      case TritonArgument::Kind::constant:
        if (argument.constant_none ? value.kind != CallValue::Kind::none
                                   : value.kind != CallValue::Kind::integer || value.above_int64 ||
                                         value.integer != argument.constant_value) {
          refuse(argument, "is " +
                               (value.kind == CallValue::Kind::integer ? integer_text(value)
                                                                       : kind_name(value.kind)) +
                               ", and the program compiled it as the constant " +
                               (argument.constant_none ? std::string("None")
                                                       : std::to_string(argument.constant_value)));
        }
        break;  // a constant is no parameter of the compiled kernel
      case TritonArgument::Kind::pointer: {
        if (value.kind != CallValue::Kind::tensor) {
          refuse(argument, "is " + kind_name(value.kind) + ", and the program compiled it as " +
                               argument.type);
        }
        const TensorDesc& desc = value.tensor.desc;
        if (desc.device.kind != DeviceKind::cuda) {
          call.fail(argument.name, "must be a CUDA tensor, got " + to_string(desc));
        }
        if (!device) {
          device = desc.device;
        } else if (desc.device != *device) {
          call.fail(argument.name, "is on " + to_string(desc.device) +
                                       " but the call's first "
                                       "tensor is on " +
                                       to_string(*device) + "; every tensor must be on one device");
        }
        if (argument.pointee && desc.dtype != *argument.pointee) {
          refuse(argument, "is " + std::string(dtype_name(desc.dtype)) +
                               ", and the program compiled it as " + argument.type);
        }
        if (argument.divisible_by_16 &&
            reinterpret_cast<std::uintptr_t>(value.tensor.data) % 16 != 0) {
          refuse(argument,
                 "has a data pointer that is not 16-byte aligned, and the program "
                 "compiled it as aligned (divisibility 16)");
        }
        packed.push(value.tensor.data);
        break;
      }
      case TritonArgument::Kind::integer:
        if (value.kind != CallValue::Kind::integer) {
          refuse(argument, "is " + kind_name(value.kind) + ", and the program compiled it as " +
                               argument.type);
        }
        if (!fits(value, argument.type)) {
          refuse(argument, "= " + integer_text(value) + " does not fit " + argument.type +
                               ", the width the program compiled");
        }
        if (argument.divisible_by_16 &&
            (value.above_int64 ? value.unsigned_integer % 16 != 0 : value.integer % 16 != 0)) {
          refuse(argument, "= " + integer_text(value) +
                               " is not a multiple of 16, and the program compiled it as one "
                               "(divisibility 16)");
        }
        push_integer(value, argument.type, packed);
        break;
      case TritonArgument::Kind::floating:
        if (value.kind == CallValue::Kind::floating) {
          push_floating(value.number, argument.type, packed);
        } else if (value.kind == CallValue::Kind::integer) {  // a whole number for a float
          push_floating(value.above_int64 ? static_cast<double>(value.unsigned_integer)
                                          : static_cast<double>(value.integer),
                        argument.type, packed);
        } else {
          call.fail(argument.name,
                    "must be a number (" + argument.type + "), got " + kind_name(value.kind));
        }
        break;
      case TritonArgument::Kind::boolean:
        if (value.kind != CallValue::Kind::boolean) {
          refuse(argument, "is " + kind_name(value.kind) + ", and the program compiled it as " +
                               argument.type);
        }
        packed.push(static_cast<std::uint8_t>(value.flag ? 1 : 0));
        break;
    }
  }
  const int ordinal = device ? device->ordinal : call.device();
  const LaunchTarget target{ordinal, call.stream()};
  const KeySlot key{slot};
  const cuda::ScopedDevice scoped(ordinal);
  if (const LoadedFunction* function = kernel_.loaded_function(key, ordinal)) {
    kernel_.launch_recorded_on(*function, grid, packed, target);
    Py_RETURN_NONE;
  }
  // A miss (slow anyway) describes its arguments for the monitor's and errors' messages.
  CallDescriptors descriptors;
  descriptors.tensors = describe();
  PyThreadState* saved = PyEval_SaveThread();
  try {
    kernel_.launch_recorded(key, grid, packed, target, DescriptorText::of(descriptors));
  } catch (...) {
    PyEval_RestoreThread(saved);
    throw;
  }
  PyEval_RestoreThread(saved);
  Py_RETURN_NONE;
}

namespace {

TritonLauncher* launcher_of(PyObject* capsule) {
  return static_cast<TritonLauncher*>(PyCapsule_GetPointer(capsule, kCapsuleName));
}

// zerojit.TritonKernel.__call__(self, *args, stream=None), in C: the kernel's launcher is its
// `_launcher` attribute, the arguments are read where they lie (no Python frame of its own).
PyObject* triton_instance_call(PyObject*, PyObject* const* argv, Py_ssize_t nargsf,
                               PyObject* kwnames) {
  static PyObject* const launcher_name = PyUnicode_InternFromString("_launcher");
  static PyObject* const stream_name = PyUnicode_InternFromString("stream");
  const Py_ssize_t positional = PyVectorcall_NARGS(nargsf);
  PyObject* stream = Py_None;
  const Py_ssize_t keywords = kwnames == nullptr ? 0 : PyTuple_GET_SIZE(kwnames);
  for (Py_ssize_t i = 0; i < keywords; ++i) {
    PyObject* name = PyTuple_GET_ITEM(kwnames, i);
    if (PyUnicode_Compare(name, stream_name) != 0) {
      PyErr_Format(PyExc_TypeError, "a Triton kernel's call takes no keyword '%U' (only stream)",
                   name);
      return nullptr;
    }
    stream = argv[positional + i];
  }
  if (positional < 1) {
    PyErr_SetString(PyExc_TypeError, "TritonKernel.__call__ needs the kernel instance");
    return nullptr;
  }
  try {
    py::object capsule =
        py::reinterpret_steal<py::object>(PyObject_GetAttr(argv[0], launcher_name));
    if (!capsule) return nullptr;
    TritonLauncher* launcher = launcher_of(capsule.ptr());
    if (launcher == nullptr) return nullptr;
    return launcher->call(argv + 1, positional - 1, stream);
  } catch (...) {
    set_python_error_from_current_exception();
    return nullptr;
  }
}

PyMethodDef kTritonInstanceCall = {
    "__call__", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(triton_instance_call)),
    METH_FASTCALL | METH_KEYWORDS,
    "Checks the call against its key's specialization, packs and launches it on the tensors' "
    "current stream (or stream=...)."};

using SpecTuple =
    std::tuple<std::string, std::string, std::string, std::string, bool, bool, std::int64_t>;

}  // namespace

void bind_triton(py::module_& module) {
  // An instance method (bound to the kernel when looked up on it), for TritonKernel.__call__.
  py::object function =
      py::reinterpret_steal<py::object>(PyCFunction_New(&kTritonInstanceCall, nullptr));
  if (!function) throw py::error_already_set();
  py::object method = py::reinterpret_steal<py::object>(PyInstanceMethod_New(function.ptr()));
  if (!method) throw py::error_already_set();
  module.attr("triton_call_method") = method;
  // One launcher per kernel name for the life of the process (as the kernel itself): a launch
  // in flight or a warmed executor may refer to it at any time.
  module.def(
      "triton_launcher",
      [](DynamicKernel& kernel, std::vector<std::string> names, std::vector<bool> memoized,
         py::object resolve) {
        // Never destroyed (a thread may be launching through one with the GIL released), so a
        // kernel class defined again gets a new launcher beside the old one.
        static std::mutex mutex;
        static auto* launchers = new std::vector<std::unique_ptr<TritonLauncher>>();
        std::lock_guard lock(mutex);
        launchers->push_back(std::make_unique<TritonLauncher>(kernel, std::move(names),
                                                              std::move(memoized), resolve.ptr()));
        return py::reinterpret_steal<py::object>(
            PyCapsule_New(launchers->back().get(), kCapsuleName, nullptr));
      },
      py::arg("kernel"), py::arg("names"), py::arg("memoized"), py::arg("resolve"));
  module.def("triton_set_spec",
             [](py::object capsule, std::int64_t slot, const std::vector<SpecTuple>& arguments) {
               TritonLauncher* launcher = launcher_of(capsule.ptr());
               if (launcher == nullptr) throw py::error_already_set();
               std::vector<TritonArgument> parsed;
               for (const auto& [name, kind, type, pointee, divisible, none, value] : arguments) {
                 parsed.push_back(parse_triton_argument(launcher->kernel().name(), name, kind, type,
                                                        pointee, divisible, none, value));
               }
               launcher->set_spec(slot, std::move(parsed));
             });
  // (dtype name, shape, strides, alignment) of any DLPack producer, for zerojit.TensorDesc.of.
  module.def("describe_tensor", [](py::object object) {
    FastCall call("TensorDesc.of", Py_None);
    const TensorRef ref = call.tensor(object.ptr(), "tensor");
    py::tuple shape(ref.desc.ndim);
    py::tuple strides(ref.desc.ndim);
    for (int d = 0; d < ref.desc.ndim; ++d) {
      shape[d] = ref.desc.size(d);
      strides[d] = ref.desc.stride(d);
    }
    return py::make_tuple(std::string(dtype_name(ref.desc.dtype)), shape, strides,
                          ref.desc.alignment);
  });
  module.def("triton_forget_memo", [](py::object capsule) {
    TritonLauncher* launcher = launcher_of(capsule.ptr());
    if (launcher == nullptr) throw py::error_already_set();
    launcher->forget_memo();
  });
}

}  // namespace zerojit::python
