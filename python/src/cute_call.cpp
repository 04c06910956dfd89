#include "cute_call.hpp"

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>

#include "bindings.hpp"
#include "zerojit/cutedsl_runtime.hpp"

namespace py = pybind11;

namespace zerojit::python {
namespace {

constexpr const char* kCapsuleName = "zerojit.CuteLauncher";

std::size_t align_up(std::size_t value, std::size_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

// What the compiled code assumes of a tensor and cannot check itself, checked: "" when the
// tensor is as compiled, else what differs.
std::string tensor_mismatch(const CuteArgument& spec, const TensorDesc& desc, const void* data) {
  const int ndim = static_cast<int>(spec.shape.size());
  if (desc.dtype != spec.dtype) {
    return "is " + std::string(dtype_name(desc.dtype)) + ", and the program compiled it as " +
           std::string(dtype_name(spec.dtype));
  }
  if (desc.ndim != ndim) {
    return "has " + std::to_string(desc.ndim) + " dimensions, and the program compiled " +
           std::to_string(ndim);
  }
  for (int d = 0; d < ndim; ++d) {
    const std::int64_t extent = desc.size(d);
    const std::int64_t wanted = spec.shape[static_cast<std::size_t>(d)];
    if (wanted >= 0 && extent != wanted) {
      return "has extent " + std::to_string(extent) + " in dimension " + std::to_string(d) +
             ", and the program compiled it static at " + std::to_string(wanted);
    }
    if (wanted < 0 && extent % spec.divisibility != 0) {
      return "has extent " + std::to_string(extent) + " in dimension " + std::to_string(d) +
             ", and the program compiled its dynamic extents as multiples of " +
             std::to_string(spec.divisibility);
    }
    if (wanted < 0 && spec.shape_bytes == 4 && extent > INT32_MAX) {
      return "has extent " + std::to_string(extent) + " in dimension " + std::to_string(d) +
             ", past the 32-bit dynamic extents the program compiled";
    }
  }
  // Compact in the stride order: the mode of order 0 has stride 1, each next one the product of
  // the extents before it (an extent of 1 takes any stride).
  std::vector<int> modes(static_cast<std::size_t>(ndim));
  for (int d = 0; d < ndim; ++d) modes[static_cast<std::size_t>(d)] = d;
  std::sort(modes.begin(), modes.end(), [&](int a, int b) {
    return spec.stride_order[static_cast<std::size_t>(a)] <
           spec.stride_order[static_cast<std::size_t>(b)];
  });
  std::int64_t expected = 1;
  for (const int d : modes) {
    if (desc.size(d) != 1 && desc.stride(d) != expected) {
      return "has stride " + std::to_string(desc.stride(d)) + " in dimension " + std::to_string(d) +
             " where the compact layout the program compiled has " + std::to_string(expected);
    }
    expected *= desc.size(d);
  }
  if (reinterpret_cast<std::uintptr_t>(data) % static_cast<std::uintptr_t>(spec.assumed_align) !=
      0) {
    return "has a data pointer that is not " + std::to_string(spec.assumed_align) +
           "-byte aligned, and the program compiled it as aligned";
  }
  return {};
}

// Writes the tensor's struct at `out`: the data pointer, the dynamic extents, the dynamic
// strides, each at the width the export declared.
void fill_struct(const CuteArgument& spec, const TensorRef& tensor, std::byte* out) {
  std::memset(out, 0, spec.struct_bytes());
  std::memcpy(out, &tensor.data, sizeof(void*));
  std::size_t at = sizeof(void*);
  for (std::size_t d = 0; d < spec.shape.size(); ++d) {
    if (spec.shape[d] >= 0) continue;
    const std::int64_t extent = tensor.desc.size(static_cast<int>(d));
    if (spec.shape_bytes == 4) {
      const auto narrow = static_cast<std::int32_t>(extent);
      std::memcpy(out + at, &narrow, 4);
    } else {
      std::memcpy(out + at, &extent, 8);
    }
    at += static_cast<std::size_t>(spec.shape_bytes);
  }
  at = spec.strides_offset();
  for (const int d : spec.dynamic_strides) {
    const std::int64_t stride = tensor.desc.stride(d);
    if (spec.stride_bytes == 4) {
      const auto narrow = static_cast<std::int32_t>(stride);
      std::memcpy(out + at, &narrow, 4);
    } else {
      std::memcpy(out + at, &stride, 8);
    }
    at += static_cast<std::size_t>(spec.stride_bytes);
  }
}

}  // namespace

std::size_t CuteArgument::strides_offset() const {
  std::size_t dynamic = 0;
  for (const std::int64_t extent : shape) dynamic += extent < 0 ? 1 : 0;
  return align_up(sizeof(void*) + dynamic * static_cast<std::size_t>(shape_bytes),
                  static_cast<std::size_t>(stride_bytes));
}

std::size_t CuteArgument::struct_bytes() const {
  return align_up(
      strides_offset() + dynamic_strides.size() * static_cast<std::size_t>(stride_bytes),
      alignof(void*));
}

CuteLauncher::CuteLauncher(DynamicKernel& kernel, std::vector<std::string> names,
                           std::vector<bool> memoized, PyObject* resolve)
    : kernel_(kernel), names_(std::move(names)), memoized_(std::move(memoized)), resolve_(resolve) {
  Py_INCREF(resolve_);
  if (memoized_.size() != names_.size()) {
    throw Error("kernel " + kernel_.name() + ": the memo flags do not match the arguments");
  }
}

CuteLauncher::~CuteLauncher() { Py_DECREF(resolve_); }

void CuteLauncher::set_spec(std::int64_t slot, std::vector<CuteArgument> arguments) {
  std::size_t runtime = 0;
  for (const CuteArgument& argument : arguments) {
    runtime += argument.kind == CuteArgument::Kind::stream ? 0 : 1;
  }
  if (slot < 0 || runtime != names_.size()) {
    throw Error("kernel " + kernel_.name() + ": a specialization of " + std::to_string(runtime) +
                " arguments for a function of " + std::to_string(names_.size()));
  }
  if (static_cast<std::size_t>(slot) >= specs_.size()) specs_.resize(slot + 1);
  specs_[static_cast<std::size_t>(slot)] = std::move(arguments);
}

std::int64_t CuteLauncher::resolve(PyObject* const* args, Py_ssize_t count,
                                   const std::vector<std::uint64_t>& fingerprint,
                                   std::uint64_t hash) {
  py::tuple arguments(count);
  for (Py_ssize_t i = 0; i < count; ++i) arguments[i] = py::reinterpret_borrow<py::object>(args[i]);
  py::object result =
      py::reinterpret_steal<py::object>(PyObject_CallOneArg(resolve_, arguments.ptr()));
  if (!result) throw py::error_already_set();
  const auto slot = result.cast<std::int64_t>();
  if (slot < 0 || static_cast<std::size_t>(slot) >= specs_.size() ||
      specs_[static_cast<std::size_t>(slot)].empty()) {
    throw Error("kernel " + kernel_.name() + ": resolve gave slot " + std::to_string(slot) +
                ", which has no specialization");
  }
  CallMemo::Entry entry;
  entry.fingerprint = fingerprint;
  entry.slot = slot;
  return memo_.insert(std::move(entry), hash).slot;
}

PyObject* CuteLauncher::call(PyObject* const* args, Py_ssize_t count, PyObject* stream_object) {
  FastCall call(kernel_.name(), stream_object);
  if (count != static_cast<Py_ssize_t>(names_.size())) {
    std::string names;
    for (const auto& name : names_) names += (names.empty() ? "" : ", ") + name;
    call.fail("args", "takes " + std::to_string(names_.size()) + " arguments (" + names +
                          "), got " + std::to_string(count));
  }
  thread_local std::vector<CallValue> values;
  thread_local std::vector<std::uint64_t> fingerprint;
  if (values.size() < names_.size()) values.resize(names_.size());
  fingerprint.clear();
  for (std::size_t i = 0; i < names_.size(); ++i) {
    values[i] = read_value(call, args[i], names_[i]);
    if (memoized_[i]) add_fingerprint(values[i], fingerprint);
  }
  const std::uint64_t hash = CallMemo::hash(fingerprint);
  const CallMemo::Entry* found = memo_.find(fingerprint, hash);
  const std::int64_t slot = found ? found->slot : resolve(args, count, fingerprint, hash);
  const std::vector<CuteArgument>& spec = specs_[static_cast<std::size_t>(slot)];

  // The entry's argument pointers: a struct per tensor, a value per scalar, the stream, and the
  // entry's return code last. Reused from call to call.
  thread_local std::vector<std::byte> storage;
  thread_local std::vector<void*> pointers;
  std::size_t bytes = 0;
  for (const CuteArgument& argument : spec) bytes += align_up(argument.struct_bytes(), 8) + 8;
  if (storage.size() < bytes + 8) storage.resize(bytes + 8);
  pointers.clear();
  std::size_t at = 0;
  std::size_t next = 0;  // the call argument the next non-stream entry argument takes
  std::optional<Device> device;
  cuda::Stream* stream_slot = nullptr;
  auto refuse = [&](const CuteArgument& argument, const std::string& detail) {
    kernel_.refuse_specialization(kernel_.slot_text(slot), argument.name, detail,
                                  describe_values(names_, values));
  };
  for (const CuteArgument& argument : spec) {
    std::byte* out = storage.data() + at;
    pointers.push_back(out);
    if (argument.kind == CuteArgument::Kind::stream) {
      stream_slot = reinterpret_cast<cuda::Stream*>(out);
      at += 8;
      continue;
    }
    const CallValue& value = values[next++];
    if (argument.kind == CuteArgument::Kind::tensor) {
      if (value.kind != CallValue::Kind::tensor) {
        refuse(argument, "is " + kind_name(value.kind) + ", and the program compiled a tensor");
      }
      const std::string mismatch = tensor_mismatch(argument, value.tensor.desc, value.tensor.data);
      if (!mismatch.empty()) refuse(argument, mismatch);
      if (value.tensor.desc.device.kind != DeviceKind::cuda) {
        call.fail(argument.name, "must be a CUDA tensor, got " + to_string(value.tensor.desc));
      }
      if (device && value.tensor.desc.device != *device) {
        call.fail(argument.name, "is on " + to_string(value.tensor.desc.device) +
                                     " but the call's first tensor is on " + to_string(*device) +
                                     "; every tensor must be on one device");
      }
      device = value.tensor.desc.device;
      fill_struct(argument, value.tensor, out);
      at += align_up(argument.struct_bytes(), 8);
      continue;
    }
    const std::string& type = argument.type;
    if (type == "bool") {
      if (value.kind != CallValue::Kind::boolean) call.fail(argument.name, "must be True or False");
      const std::uint8_t flag = value.flag ? 1 : 0;
      std::memcpy(out, &flag, 1);
    } else if (type == "f32" || type == "f64") {
      if (value.kind != CallValue::Kind::floating && value.kind != CallValue::Kind::integer) {
        call.fail(argument.name, "must be a number, got " + kind_name(value.kind));
      }
      const double number = value.kind == CallValue::Kind::floating
                                ? value.number
                                : static_cast<double>(value.integer);
      if (type == "f32") {
        const auto narrow = static_cast<float>(number);
        std::memcpy(out, &narrow, 4);
      } else {
        std::memcpy(out, &number, 8);
      }
    } else {
      if (value.kind != CallValue::Kind::integer || value.above_int64 ||
          (type == "i32" && (value.integer < INT32_MIN || value.integer > INT32_MAX))) {
        refuse(argument, "= " +
                             (value.kind == CallValue::Kind::integer ? integer_text(value)
                                                                     : kind_name(value.kind)) +
                             " is no " + type + ", the type the program compiled");
      }
      if (type == "i32") {
        const auto narrow = static_cast<std::int32_t>(value.integer);
        std::memcpy(out, &narrow, 4);
      } else {
        std::memcpy(out, &value.integer, 8);
      }
    }
    at += 8;
  }
  std::int32_t* status = reinterpret_cast<std::int32_t*>(storage.data() + at);
  *status = 0;
  pointers.push_back(status);

  const int ordinal = device ? device->ordinal : call.device();
  const LaunchTarget target{ordinal, call.stream()};
  if (stream_slot != nullptr) *stream_slot = target.stream;
  const KeySlot key{slot};
  const cuda::ScopedDevice scoped(ordinal);
  if (kernel_.has_executor(key, ordinal)) {
    kernel_.call_host(key, pointers.data(), pointers.size(), target);
  } else {
    CallDescriptors descriptors;
    descriptors.tensors = describe_values(names_, values);
    PyThreadState* saved = PyEval_SaveThread();
    try {
      kernel_.call_host(key, pointers.data(), pointers.size(), target,
                        DescriptorText::of(descriptors));
    } catch (...) {
      PyEval_RestoreThread(saved);
      throw;
    }
    PyEval_RestoreThread(saved);
  }
  if (*status != 0) {
    throw Error("kernel " + kernel_.name() + " [" + kernel_.slot_text(slot) +
                "]: the CuTeDSL entry returned CUDA error " + std::to_string(*status));
  }
  Py_RETURN_NONE;
}

namespace {

CuteLauncher* launcher_of(PyObject* capsule) {
  return static_cast<CuteLauncher*>(PyCapsule_GetPointer(capsule, kCapsuleName));
}

// zerojit.CuteKernel.__call__(self, *args, stream=None), in C, as TritonKernel's.
PyObject* cute_instance_call(PyObject*, PyObject* const* argv, Py_ssize_t nargsf,
                             PyObject* kwnames) {
  static PyObject* const launcher_name = PyUnicode_InternFromString("_launcher");
  static PyObject* const stream_name = PyUnicode_InternFromString("stream");
  const Py_ssize_t positional = PyVectorcall_NARGS(nargsf);
  PyObject* stream = Py_None;
  const Py_ssize_t keywords = kwnames == nullptr ? 0 : PyTuple_GET_SIZE(kwnames);
  for (Py_ssize_t i = 0; i < keywords; ++i) {
    PyObject* name = PyTuple_GET_ITEM(kwnames, i);
    if (PyUnicode_Compare(name, stream_name) != 0) {
      PyErr_Format(PyExc_TypeError, "a CuTeDSL kernel's call takes no keyword '%U' (only stream)",
                   name);
      return nullptr;
    }
    stream = argv[positional + i];
  }
  if (positional < 1) {
    PyErr_SetString(PyExc_TypeError, "CuteKernel.__call__ needs the kernel instance");
    return nullptr;
  }
  try {
    py::object capsule =
        py::reinterpret_steal<py::object>(PyObject_GetAttr(argv[0], launcher_name));
    if (!capsule) return nullptr;
    CuteLauncher* launcher = launcher_of(capsule.ptr());
    if (launcher == nullptr) return nullptr;
    return launcher->call(argv + 1, positional - 1, stream);
  } catch (...) {
    set_python_error_from_current_exception();
    return nullptr;
  }
}

PyMethodDef kCuteInstanceCall = {
    "__call__", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(cute_instance_call)),
    METH_FASTCALL | METH_KEYWORDS,
    "Checks the call against its key's specialization, fills the exported entry's arguments and "
    "runs it on the tensors' current stream (or stream=...)."};

// (kind, name, dtype, shape, stride order, divisibility, shape bytes, dynamic strides, stride
// bytes, assumed alignment, scalar type)
using SpecTuple = std::tuple<std::string, std::string, std::string, std::vector<std::int64_t>,
                             std::vector<std::int64_t>, std::int64_t, int, std::vector<int>, int,
                             std::int64_t, std::string>;

CuteArgument parse_argument(const std::string& kernel, const SpecTuple& spec) {
  const auto& [kind, name, dtype, shape, order, divisibility, shape_bytes, strides, stride_bytes,
               align, type] = spec;
  CuteArgument argument;
  argument.name = name;
  if (kind == "stream") {
    argument.kind = CuteArgument::Kind::stream;
    return argument;
  }
  if (kind == "scalar") {
    argument.kind = CuteArgument::Kind::scalar;
    if (type != "i32" && type != "i64" && type != "f32" && type != "f64" && type != "bool") {
      throw InvalidArgument(kernel, name, "has no scalar type '" + type + "'");
    }
    argument.type = type;
    return argument;
  }
  const auto parsed = parse_dtype(dtype);
  if (kind != "tensor" || !parsed || shape.size() != order.size() || shape.empty() ||
      shape.size() > static_cast<std::size_t>(kMaxTensorDims) || divisibility < 1 ||
      (shape_bytes != 4 && shape_bytes != 8) || (stride_bytes != 4 && stride_bytes != 8) ||
      align < 1) {
    throw InvalidArgument(kernel, name, "has a malformed tensor specification");
  }
  argument.dtype = *parsed;
  argument.shape = shape;
  argument.stride_order = order;
  argument.divisibility = divisibility;
  argument.shape_bytes = shape_bytes;
  argument.dynamic_strides = strides;
  argument.stride_bytes = stride_bytes;
  argument.assumed_align = align;
  return argument;
}

}  // namespace

void bind_cute(py::module_& module) {
  py::object function =
      py::reinterpret_steal<py::object>(PyCFunction_New(&kCuteInstanceCall, nullptr));
  if (!function) throw py::error_already_set();
  py::object method = py::reinterpret_steal<py::object>(PyInstanceMethod_New(function.ptr()));
  if (!method) throw py::error_already_set();
  module.attr("cute_call_method") = method;
  // As triton_launcher: one per kernel class for the life of the process, never destroyed.
  module.def(
      "cute_launcher",
      [](DynamicKernel& kernel, std::vector<std::string> names, std::vector<bool> memoized,
         py::object resolve) {
        static std::mutex mutex;
        static auto* launchers = new std::vector<std::unique_ptr<CuteLauncher>>();
        std::lock_guard lock(mutex);
        launchers->push_back(std::make_unique<CuteLauncher>(kernel, std::move(names),
                                                            std::move(memoized), resolve.ptr()));
        return py::reinterpret_steal<py::object>(
            PyCapsule_New(launchers->back().get(), kCapsuleName, nullptr));
      },
      py::arg("kernel"), py::arg("names"), py::arg("memoized"), py::arg("resolve"));
  module.def("cute_set_spec",
             [](py::object capsule, std::int64_t slot, const std::vector<SpecTuple>& arguments) {
               CuteLauncher* launcher = launcher_of(capsule.ptr());
               if (launcher == nullptr) throw py::error_already_set();
               std::vector<CuteArgument> parsed;
               for (const SpecTuple& argument : arguments) {
                 parsed.push_back(parse_argument(launcher->kernel().name(), argument));
               }
               launcher->set_spec(slot, std::move(parsed));
             });
  // Where the CuTeDSL runtime library is (the installed wheel's copy), for CuTeDSL kernels' loads.
  module.def("set_cute_dsl_runtime",
             [](const std::string& path) { cutedsl::set_runtime_library(path); });
}

}  // namespace zerojit::python
