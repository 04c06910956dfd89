#include "kernel_call.hpp"

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <mutex>
#include <optional>

#include "bindings.hpp"
#include "exchange.hpp"
#include "fast_call.hpp"

namespace py = pybind11;

namespace zerojit::python {
namespace {

constexpr const char* kCapsuleName = "zerojit.KernelCall";

// A grid or block extent list: an int, or a tuple of 1 to 3 ints, each in [0, limit].
Dim3 extents(const std::string& kernel, py::handle value, const char* what, long long limit) {
  Dim3 out;
  std::vector<long long> given;
  try {
    if (py::isinstance<py::tuple>(value) || py::isinstance<py::list>(value)) {
      for (py::handle item : value) given.push_back(item.cast<long long>());
    } else {
      given.push_back(value.cast<long long>());
    }
  } catch (const py::cast_error&) {
    throw InvalidArgument(
        kernel, what,
        "must be an int or a tuple of 1 to 3 ints, got " + std::string(py::str(value)));
  }
  if (given.empty() || given.size() > 3) {
    throw InvalidArgument(kernel, what,
                          "must be an int or a tuple of 1 to 3 ints, got " +
                              std::to_string(given.size()) + " values");
  }
  std::uint32_t* fields[] = {&out.x, &out.y, &out.z};
  for (std::size_t i = 0; i < given.size(); ++i) {
    if (given[i] < 0 || given[i] > limit) {
      throw InvalidArgument(kernel, what,
                            "extents must lie in [0, " + std::to_string(limit) + "], got " +
                                std::to_string(given[i]));
    }
    *fields[i] = static_cast<std::uint32_t>(given[i]);
  }
  return out;
}

// (grid, block, shared bytes), block None where the launch record fixes it.
LaunchGeometry geometry_of(const std::string& kernel, py::handle grid, py::handle block,
                           py::handle shared) {
  LaunchGeometry geometry;
  geometry.grid = extents(kernel, grid, "grid", 0x7fffffffLL);
  if (!block.is_none()) geometry.block = extents(kernel, block, "block", 1024);
  const auto bytes = shared.cast<long long>();
  if (bytes < 0 || bytes > 0xffffffffLL) {
    throw InvalidArgument(kernel, "shared_memory",
                          "must lie in [0, 2^32), got " + std::to_string(bytes));
  }
  geometry.shared_bytes = static_cast<std::uint32_t>(bytes);
  return geometry;
}

py::tuple arguments_tuple(PyObject* const* args, Py_ssize_t count) {
  py::tuple out(count);
  for (Py_ssize_t i = 0; i < count; ++i) out[i] = py::reinterpret_borrow<py::object>(args[i]);
  return out;
}

// Every tensor of the launch is a CUDA tensor on the call's device (the first tensor's): another
// device's pointer would be read on the launch's.
void check_devices(FastCall& call, const std::vector<std::string>& names,
                   const std::vector<CallValue>& values, std::size_t count) {
  std::optional<Device> device;
  for (std::size_t i = 0; i < count; ++i) {
    if (values[i].kind != CallValue::Kind::tensor) continue;
    const TensorDesc& desc = values[i].tensor.desc;
    const std::string_view name = i < names.size() ? std::string_view(names[i]) : "args";
    if (desc.device.kind != DeviceKind::cuda) {
      call.fail(name, "must be a CUDA tensor, got " + to_string(desc));
    }
    if (!device) {
      device = desc.device;
    } else if (desc.device != *device) {
      call.fail(name, "is on " + to_string(desc.device) + " but the call's first tensor is on " +
                          to_string(*device) + "; every tensor must be on one device");
    }
  }
}

// What a packer reports becomes the call's error: a specialization miss through the kernel
// (a monitor event, always refused), a bad value an InvalidArgument.
class CallFailure final : public languages::PackFailure {
 public:
  CallFailure(DynamicKernel& kernel, std::int64_t slot, const std::vector<std::string>& names,
              const std::vector<CallValue>& values)
      : kernel_(kernel), slot_(slot), names_(names), values_(values) {}
  [[noreturn]] void refuse(std::string_view argument, const std::string& detail) override {
    kernel_.refuse_specialization(kernel_.slot_text(slot_), std::string(argument), detail,
                                  describe_values(names_, values_));
  }
  [[noreturn]] void fail(std::string_view argument, const std::string& problem) override {
    throw InvalidArgument(kernel_.name(), std::string(argument), problem);
  }

 private:
  DynamicKernel& kernel_;
  std::int64_t slot_;
  const std::vector<std::string>& names_;
  const std::vector<CallValue>& values_;
};

// The buffers of one call, reused from call to call on a thread: no allocation once they have
// grown. A call whose dispatch or plan (Python) calls another kernel takes the next set, so the
// inner call never overwrites the outer one's.
struct CallScratch {
  std::vector<CallValue> values;
  std::vector<CallValue> launch_values;
  std::vector<std::uint64_t> fingerprint;
};

class ScratchLease {
 public:
  ScratchLease() {
    if (depth_ == stack_.size()) stack_.push_back(std::make_unique<CallScratch>());
    scratch_ = stack_[depth_++].get();
  }
  ~ScratchLease() { --depth_; }
  ScratchLease(const ScratchLease&) = delete;
  ScratchLease& operator=(const ScratchLease&) = delete;
  CallScratch& operator*() const { return *scratch_; }

 private:
  static thread_local std::vector<std::unique_ptr<CallScratch>> stack_;
  static thread_local std::size_t depth_;
  CallScratch* scratch_;
};
thread_local std::vector<std::unique_ptr<CallScratch>> ScratchLease::stack_;
thread_local std::size_t ScratchLease::depth_ = 0;

}  // namespace

KernelCall::KernelCall(DynamicKernel& kernel, Language language, std::vector<std::string> names,
                       std::size_t required, std::vector<bool> memoized, PyObject* resolve,
                       PyObject* plan, std::vector<std::string> launch_names)
    : kernel_(kernel),
      language_(language),
      packer_(entry_kind(language).make_packer(kernel.name())),
      names_(std::move(names)),
      launch_names_(std::move(launch_names)),
      required_(required),
      memoized_(std::move(memoized)),
      resolve_(resolve),
      plan_(plan) {
  if (memoized_.size() != names_.size() || required_ > names_.size()) {
    throw Error("kernel " + kernel_.name() + ": the memo flags do not match the arguments");
  }
  if (names_.size() > static_cast<std::size_t>(kMaxKernelParams)) {
    throw InvalidArgument(kernel_.name(), "params",
                          std::to_string(names_.size()) + " arguments; zerojit launches at most " +
                              std::to_string(kMaxKernelParams));
  }
  Py_INCREF(resolve_);
  Py_XINCREF(plan_);
}

KernelCall::~KernelCall() {
  Py_DECREF(resolve_);
  Py_XDECREF(plan_);
}

const CallMemo::Entry& KernelCall::resolve(PyObject* const* args, Py_ssize_t count,
                                           const std::vector<CallValue>& values,
                                           const std::vector<std::uint64_t>& fingerprint,
                                           std::uint64_t hash) {
  py::object result = py::reinterpret_steal<py::object>(
      PyObject_CallOneArg(resolve_, arguments_tuple(args, count).ptr()));
  if (!result) throw py::error_already_set();
  const auto pair = result.cast<std::pair<std::int64_t, py::object>>();
  CallMemo::Entry resolved;
  resolved.fingerprint = fingerprint;
  resolved.slot = pair.first;
  if (!pair.second.is_none()) {
    const auto geometry = pair.second.cast<py::tuple>();
    if (geometry.size() != 3) throw Error("kernel " + kernel_.name() + ": a malformed geometry");
    resolved.geometry = geometry_of(kernel_.name(), geometry[0], geometry[1], geometry[2]);
  }
  if (!packer_->has_spec(resolved.slot)) {
    throw Error("kernel " + kernel_.name() + ": resolve gave slot " +
                std::to_string(resolved.slot) + ", which has no specialization");
  }
  // The memo's words name the scalar types by address: keep each alive as long as the memo.
  for (Py_ssize_t i = 0; i < count; ++i) {
    if (values[static_cast<std::size_t>(i)].type == nullptr) continue;
    auto* type = reinterpret_cast<PyObject*>(Py_TYPE(args[i]));
    if (held_types_.insert(type).second) Py_INCREF(type);
  }
  return memo_.insert(std::move(resolved), hash);
}

PyObject* KernelCall::plan_call(std::int64_t slot, PyObject* const* args, Py_ssize_t count,
                                FastCall& call, std::vector<CallValue>& values,
                                LaunchGeometry& geometry) {
  py::object planned = py::reinterpret_steal<py::object>(PyObject_CallFunctionObjArgs(
      plan_, py::int_(slot).ptr(), arguments_tuple(args, count).ptr(), nullptr));
  if (!planned) throw py::error_already_set();
  const auto launch = planned.cast<py::tuple>();
  if (launch.size() != 5) throw Error("kernel " + kernel_.name() + ": a malformed plan");
  geometry = geometry_of(kernel_.name(), launch[0], launch[1], launch[2]);
  const py::object launch_args = launch[3];
  if (!py::isinstance<py::tuple>(launch_args) || py::len(launch_args) != launch_names_.size()) {
    call.fail("args", "the plan must give a tuple of " + std::to_string(launch_names_.size()) +
                          " arguments, one per parameter");
  }
  values.clear();
  for (std::size_t i = 0; i < launch_names_.size(); ++i) {
    values.push_back(read_value(call, PyTuple_GET_ITEM(launch_args.ptr(), i), launch_names_[i]));
  }
  return py::object(launch[4]).release().ptr();
}

PyObject* KernelCall::call(PyObject* const* args, Py_ssize_t count, PyObject* stream) {
  FastCall call(kernel_.name(), stream);
  if (count < static_cast<Py_ssize_t>(required_) ||
      count > static_cast<Py_ssize_t>(names_.size())) {
    std::string names;
    for (const auto& name : names_) names += (names.empty() ? "" : ", ") + name;
    call.fail("args", "takes " + std::to_string(names_.size()) + " arguments (" + names +
                          "), got " + std::to_string(count));
  }
  const ScratchLease lease;
  std::vector<CallValue>& values = (*lease).values;
  std::vector<CallValue>& launch_values = (*lease).launch_values;
  std::vector<std::uint64_t>& fingerprint = (*lease).fingerprint;
  values.resize(static_cast<std::size_t>(count));
  fingerprint.clear();
  fingerprint.push_back(static_cast<std::uint64_t>(count));
  for (std::size_t i = 0; i < values.size(); ++i) {
    values[i] = read_value(call, args[i], names_[i]);
    if (memoized_[i]) add_fingerprint(values[i], fingerprint);
  }
  const std::uint64_t hash = CallMemo::hash(fingerprint);
  const CallMemo::Entry* found = memo_.find(fingerprint, hash);
  if (found == nullptr) found = &resolve(args, count, values, fingerprint, hash);
  const std::int64_t slot = found->slot;

  PackedCall packed;
  packed.geometry = found->geometry;
  py::object result = py::none();
  const std::vector<std::string>* names = &names_;
  std::vector<CallValue>* launched = &values;
  if (plan_ != nullptr) {
    result = py::reinterpret_steal<py::object>(
        plan_call(slot, args, count, call, launch_values, packed.geometry));
    names = &launch_names_;
    launched = &launch_values;
  }
  check_devices(call, *names, *launched, launched->size());
  const LaunchTarget target{call.device(), call.stream()};
  CallFailure failure(kernel_, slot, *names, *launched);
  packer_->pack({slot, *names, *launched, target.stream}, failure, packed);

  const KeySlot key{slot};
  const cuda::ScopedDevice scoped(target.device);
  if (kernel_.has_executor(key, target.device)) {
    kernel_.launch_packed(key, packed, target);
    return result.release().ptr();
  }
  // A miss (slow anyway, and it may compile) describes its arguments for the monitor's and
  // errors' messages, and runs without the GIL.
  CallDescriptors descriptors;
  descriptors.tensors = describe_values(*names, *launched);
  PyThreadState* saved = PyEval_SaveThread();
  try {
    kernel_.launch_packed(key, packed, target, DescriptorText::of(descriptors));
  } catch (...) {
    PyEval_RestoreThread(saved);
    throw;
  }
  PyEval_RestoreThread(saved);
  return result.release().ptr();
}

namespace {

KernelCall* kernel_call_of(PyObject* capsule) {
  return static_cast<KernelCall*>(PyCapsule_GetPointer(capsule, kCapsuleName));
}

// <owner>.__call__(self, *args, stream=None), in C, for every Python-defined kernel: the
// kernel's call path is its `_launcher` attribute, the arguments are read where they lie (no
// Python frame of its own).
PyObject* instance_call(PyObject*, PyObject* const* argv, Py_ssize_t nargsf, PyObject* kwnames) {
  static PyObject* const launcher_name = PyUnicode_InternFromString("_launcher");
  static PyObject* const stream_name = PyUnicode_InternFromString("stream");
  const Py_ssize_t positional = PyVectorcall_NARGS(nargsf);
  PyObject* stream = Py_None;
  const Py_ssize_t keywords = kwnames == nullptr ? 0 : PyTuple_GET_SIZE(kwnames);
  for (Py_ssize_t i = 0; i < keywords; ++i) {
    PyObject* name = PyTuple_GET_ITEM(kwnames, i);
    if (PyUnicode_Compare(name, stream_name) != 0) {
      PyErr_Format(PyExc_TypeError, "a kernel's call takes no keyword '%U' (only stream)", name);
      return nullptr;
    }
    stream = argv[positional + i];
  }
  if (positional < 1) {
    PyErr_SetString(PyExc_TypeError, "a kernel's __call__ needs the kernel instance");
    return nullptr;
  }
  try {
    py::object capsule =
        py::reinterpret_steal<py::object>(PyObject_GetAttr(argv[0], launcher_name));
    if (!capsule) return nullptr;
    KernelCall* launcher = kernel_call_of(capsule.ptr());
    if (launcher == nullptr) return nullptr;
    return launcher->call(argv + 1, positional - 1, stream);
  } catch (...) {
    set_python_error_from_current_exception();
    return nullptr;
  }
}

PyMethodDef kInstanceCall = {
    "__call__", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(instance_call)),
    METH_FASTCALL | METH_KEYWORDS,
    "Dispatches (from a memo), checks the call against its key's specialization, packs and "
    "launches it on the tensors' current stream (or stream=...)."};

}  // namespace

void bind_kernel_call(py::module_& module) {
  // An instance method (bound to the kernel when looked up on it), for the owners' __call__.
  py::object function = py::reinterpret_steal<py::object>(PyCFunction_New(&kInstanceCall, nullptr));
  if (!function) throw py::error_already_set();
  py::object method = py::reinterpret_steal<py::object>(PyInstanceMethod_New(function.ptr()));
  if (!method) throw py::error_already_set();
  module.attr("kernel_call_method") = method;
  // One call path per kernel class for the life of the process (as the kernel itself): a
  // launch in flight or a warmed executor may refer to it at any time. Never destroyed (a thread
  // may be launching through one with the GIL released), so a kernel class defined again gets a
  // new one beside the old one.
  module.def(
      "kernel_call",
      [](DynamicKernel& kernel, const std::string& language, std::vector<std::string> names,
         std::size_t required, std::vector<bool> memoized, py::object resolve, py::object plan,
         std::vector<std::string> launch_names) {
        const auto parsed = parse_language(language);
        if (!parsed) throw InvalidArgument(kernel.name(), "language", "unknown: " + language);
        static std::mutex mutex;
        static auto* calls = new std::vector<std::unique_ptr<KernelCall>>();
        std::lock_guard lock(mutex);
        calls->push_back(std::make_unique<KernelCall>(
            kernel, *parsed, std::move(names), required, std::move(memoized), resolve.ptr(),
            plan.is_none() ? nullptr : plan.ptr(), std::move(launch_names)));
        return py::reinterpret_steal<py::object>(
            PyCapsule_New(calls->back().get(), kCapsuleName, nullptr));
      },
      py::arg("kernel"), py::arg("language"), py::arg("names"), py::arg("required"),
      py::arg("memoized"), py::arg("resolve"), py::arg("plan") = py::none(),
      py::arg("launch_names") = std::vector<std::string>{});
  // The argument specification of a slot, a JSON list as the language's owner writes it.
  module.def("kernel_call_set_spec",
             [](py::object capsule, std::int64_t slot, const std::string& spec) {
               KernelCall* launcher = kernel_call_of(capsule.ptr());
               if (launcher == nullptr) throw py::error_already_set();
               launcher->packer().set_spec(slot, spec);
             });
  module.def("kernel_call_forget_memo", [](py::object capsule) {
    KernelCall* launcher = kernel_call_of(capsule.ptr());
    if (launcher == nullptr) throw py::error_already_set();
    launcher->forget_memo();
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
}

}  // namespace zerojit::python
