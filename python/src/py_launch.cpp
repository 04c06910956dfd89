// The launch path of a Python kernel (zerojit.Kernel.__call__ ends here): one METH_FASTCALL
// function, the arguments read in place as the DSv4 ops' are (fast_call.hpp), packed by the
// kernel's declared parameter kinds, launched through the kernel's executor cache: a warmed
// key with the GIL held, a miss (which may compile) with the GIL released.
#include <Python.h>

#include <optional>
#include <string>

#include "bindings.hpp"
#include "fast_call.hpp"
#include "py_kernel.hpp"

namespace zerojit::python {
namespace {

constexpr const char* kCapsuleName = "zerojit.DynamicKernel";

std::uint32_t extent(const FastCall& call, PyObject* value, std::string_view argument) {
  const std::int64_t v = call.integer(value, argument);
  if (v < 0 || v > 0xFFFFFFFFLL) {
    call.fail(argument, "extents must lie in [0, 2^32), got " + std::to_string(v));
  }
  return static_cast<std::uint32_t>(v);
}

// An int, or a tuple of one to three ints (x, y, z).
Dim3 dim3(const FastCall& call, PyObject* value, std::string_view argument) {
  Dim3 out;
  if (!PyTuple_Check(value)) {
    out.x = extent(call, value, argument);
    return out;
  }
  const Py_ssize_t size = PyTuple_GET_SIZE(value);
  if (size < 1 || size > 3) {
    call.fail(argument,
              "must be an int or a tuple of 1 to 3 ints, got " + std::to_string(size) + " values");
  }
  std::uint32_t* fields[] = {&out.x, &out.y, &out.z};
  for (Py_ssize_t i = 0; i < size; ++i)
    *fields[i] = extent(call, PyTuple_GET_ITEM(value, i), argument);
  return out;
}

template <class T>
T bounded(const FastCall& call, PyObject* value, std::string_view argument, long long low,
          unsigned long long high) {
  if constexpr (std::is_unsigned_v<T>) {
    // Through __index__, as the signed kinds read theirs (PyLong_AsLongLong): a numpy integer
    // is an int here too, a float is not.
    PyObject* index = PyNumber_Index(value);
    const bool is_integer = index != nullptr;
    const unsigned long long v = is_integer ? PyLong_AsUnsignedLongLong(index) : 0;
    Py_XDECREF(index);
    if (PyErr_Occurred() || v > high) {
      PyErr_Clear();
      call.fail(argument,
                "must be an int in [0, " + std::to_string(high) + "], got " +
                    (is_integer ? "one out of range" : std::string(Py_TYPE(value)->tp_name)));
    }
    return static_cast<T>(v);
  } else {
    const std::int64_t v = call.integer(value, argument);
    if (v < low || v > static_cast<long long>(high)) {
      call.fail(argument, "must be an int in [" + std::to_string(low) + ", " +
                              std::to_string(high) + "], got " + std::to_string(v));
    }
    return static_cast<T>(v);
  }
}

void pack(FastCall& call, const DynamicKernel& kernel, PyObject* tuple, KernelArgs& args,
          std::string* described) {
  const auto& kinds = kernel.param_kinds();
  const auto& names = kernel.param_names();
  if (!PyTuple_Check(tuple) || PyTuple_GET_SIZE(tuple) != static_cast<Py_ssize_t>(kinds.size())) {
    call.fail("args", "the plan must give a tuple of " + std::to_string(kinds.size()) +
                          " arguments, one per parameter");
  }
  std::optional<Device> first_device;  // the launch goes to the first tensor's device
  for (std::size_t i = 0; i < kinds.size(); ++i) {
    PyObject* value = PyTuple_GET_ITEM(tuple, static_cast<Py_ssize_t>(i));
    const std::string_view name = names[i];
    switch (kinds[i]) {
      case ParamKind::tensor: {
        const TensorRef ref = call.tensor(value, name);
        if (ref.desc.device.kind != DeviceKind::cuda) {
          call.fail(name, "must be a CUDA tensor, got " + to_string(ref.desc));
        }
        // Another device's pointer would be read on the launch's device.
        if (!first_device) {
          first_device = ref.desc.device;
        } else if (ref.desc.device != *first_device) {
          call.fail(name, "is on " + to_string(ref.desc.device) +
                              " but the launch's first tensor is on " + to_string(*first_device) +
                              "; every tensor must be on one device");
        }
        if (described != nullptr) {
          *described +=
              (described->empty() ? "" : ", ") + std::string(name) + ": " + to_string(ref.desc);
        }
        args.push(ref.data);
        break;
      }
      case ParamKind::i32:
        args.push(bounded<std::int32_t>(call, value, name, INT32_MIN, INT32_MAX));
        break;
      case ParamKind::i64:
        args.push(call.integer(value, name));
        break;
      case ParamKind::u32:
        args.push(bounded<std::uint32_t>(call, value, name, 0, UINT32_MAX));
        break;
      case ParamKind::u64:
        args.push(bounded<std::uint64_t>(call, value, name, 0, UINT64_MAX));
        break;
      case ParamKind::f32:
        args.push(static_cast<float>(call.number(value, name)));
        break;
      case ParamKind::f64:
        args.push(call.number(value, name));
        break;
      case ParamKind::boolean: {
        const int flag = PyObject_IsTrue(value);
        if (flag < 0) {
          PyErr_Clear();
          call.fail(name, "must be True or False");
        }
        args.push(static_cast<bool>(flag));
        break;
      }
      case ParamKind::pointer:
        args.push(
            reinterpret_cast<void*>(bounded<std::uintptr_t>(call, value, name, 0, UINTPTR_MAX)));
        break;
    }
  }
}

// (kernel capsule, slot, grid, block, shared_bytes, stream, args tuple) -> None
PyObject* launch(PyObject*, PyObject* const* argv, Py_ssize_t nargs) {
  if (nargs != 7) {
    PyErr_Format(PyExc_TypeError, "zerojit._core.launch takes 7 positional arguments (%zd given)",
                 nargs);
    return nullptr;
  }
  try {
    auto* kernel = static_cast<DynamicKernel*>(PyCapsule_GetPointer(argv[0], kCapsuleName));
    if (kernel == nullptr) return nullptr;
    FastCall call(kernel->name(), argv[5]);
    const std::int64_t slot = call.integer(argv[1], "key");
    LaunchSpec<KeySlot> spec;
    spec.key = KeySlot{slot};
    spec.geometry.grid = dim3(call, argv[2], "grid");
    spec.geometry.block = dim3(call, argv[3], "block");
    spec.geometry.shared_bytes =
        bounded<std::uint32_t>(call, argv[4], "shared_memory", 0, UINT32_MAX);
    pack(call, *kernel, argv[6], spec.args, nullptr);
    spec.device = call.device();
    const LaunchTarget target{spec.device, call.stream()};
    const cuda::ScopedDevice device(spec.device);
    if (spec.geometry.empty() || kernel->has_executor(spec.key, spec.device)) {
      kernel->launch(std::move(spec), target);
      Py_RETURN_NONE;
    }
    // A miss (slow anyway) describes its tensors for the monitor's and errors' messages; a hit
    // builds no text.
    CallDescriptors descriptors;
    KernelArgs scratch;
    FastCall again(kernel->name(), argv[5]);
    pack(again, *kernel, argv[6], scratch, &descriptors.tensors);
    PyThreadState* saved = PyEval_SaveThread();
    try {
      kernel->launch(std::move(spec), target, &descriptors);
    } catch (...) {
      PyEval_RestoreThread(saved);
      throw;
    }
    PyEval_RestoreThread(saved);
    Py_RETURN_NONE;
  } catch (...) {
    set_python_error_from_current_exception();
    return nullptr;
  }
}

PyMethodDef kLaunch[] = {
    {"launch", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(launch)), METH_FASTCALL,
     "launch of a Python kernel (zerojit.Kernel): kernel, key slot, grid, block, shared memory, "
     "stream, argument tuple"},
    {nullptr, nullptr, 0, nullptr},
};

}  // namespace

PyObject* kernel_capsule(DynamicKernel& kernel) {
  return PyCapsule_New(&kernel, kCapsuleName, nullptr);
}

void bind_launch(pybind11::module_& module) {
  if (PyModule_AddFunctions(module.ptr(), kLaunch) != 0) throw pybind11::error_already_set();
}

}  // namespace zerojit::python
