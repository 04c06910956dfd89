#include "kernel_call.hpp"

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <optional>

#include "bindings.hpp"
#include "exchange.hpp"
#include "fast_call.hpp"
#include "zerojit/log.hpp"

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
  std::vector<PyObject*> options;  // borrowed: the call's keyword values or the defaults
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

// A call option's words in the memo's fingerprint. Options are the launcher's configuration
// values (a compress ratio, a flag, a mode's name), so they are scalars or text; a tensor goes
// to the kernel as an argument, never as an option.
constexpr std::uint64_t kTextWord = 0x7465787400000000ULL;  // after every CallValue::Kind

void add_option_fingerprint(FastCall& call, PyObject* object, const std::string& name,
                            std::vector<std::uint64_t>& words) {
  if (PyUnicode_Check(object)) {
    Py_ssize_t size = 0;
    const char* text = PyUnicode_AsUTF8AndSize(object, &size);
    if (text == nullptr) {
      PyErr_Clear();
      call.fail(name, "is a str that is not valid Unicode (a lone surrogate)");
    }
    words.push_back(kTextWord);
    words.push_back(static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(Py_TYPE(object))));
    words.push_back(static_cast<std::uint64_t>(size));
    for (Py_ssize_t at = 0; at < size; at += 8) {
      std::uint64_t word = 0;
      std::memcpy(&word, text + at, static_cast<std::size_t>(std::min<Py_ssize_t>(8, size - at)));
      words.push_back(word);
    }
    return;
  }
  const PyNumberMethods* number = Py_TYPE(object)->tp_as_number;
  const bool scalar = object == Py_None || PyBool_Check(object) || PyLong_Check(object) ||
                      PyFloat_Check(object) || PyIndex_Check(object) ||
                      (number != nullptr && number->nb_float != nullptr);
  if (!scalar || PyObject_HasAttrString(object, "__dlpack__")) {
    call.fail(name,
              std::string("is a call option, so None, a bool, an int, a float or a str, got ") +
                  Py_TYPE(object)->tp_name +
                  " (a tensor goes to the kernel as one of its arguments)");
  }
  add_fingerprint(read_value(call, object, name), words);
}

}  // namespace

KernelCall::KernelCall(DynamicKernel& kernel, Language language, std::vector<std::string> names,
                       std::size_t required, std::vector<bool> memoized, PyObject* resolve,
                       PyObject* plan, std::vector<std::string> launch_names,
                       std::vector<PyObject*> defaults, std::vector<Option> options)
    : kernel_(kernel),
      language_(language),
      packer_(entry_kind(language).make_packer(kernel.name())),
      names_(std::move(names)),
      launch_names_(std::move(launch_names)),
      required_(required),
      memoized_(std::move(memoized)),
      resolve_(resolve),
      plan_(plan),
      defaults_(std::move(defaults)),
      options_(std::move(options)) {
  if (memoized_.size() != names_.size() || required_ > names_.size()) {
    throw Error("kernel " + kernel_.name() + ": the memo flags do not match the arguments");
  }
  if (!defaults_.empty() && defaults_.size() != names_.size() - required_) {
    throw Error("kernel " + kernel_.name() + ": one default is needed per optional argument");
  }
  for (PyObject* value : defaults_) Py_INCREF(value);
  for (const Option& option : options_) {
    Py_XINCREF(option.fallback);
    option_names_.push_back(PyUnicode_InternFromString(option.name.c_str()));
    if (option_names_.back() == nullptr) throw py::error_already_set();
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
  Py_XDECREF(fallback_);
  for (PyObject* value : defaults_) Py_DECREF(value);
  for (const Option& option : options_) Py_XDECREF(option.fallback);
  for (PyObject* name : option_names_) Py_DECREF(name);
}

void KernelCall::set_fallback(PyObject* fallback) {
  Py_XINCREF(fallback);
  Py_XDECREF(fallback_);
  fallback_ = fallback;
  uncovered_.clear();
}

// Only on a miss in the monitor's fallback mode, so the Python it runs (the owner's fallback
// and the fallback's geometry for these arguments) costs nothing on a hit; while the key's
// background compile runs it serves every call, and then it is never asked again.
std::int64_t KernelCall::serving_fallback(std::int64_t slot, PyObject* const* args,
                                          Py_ssize_t count, const std::vector<PyObject*>& options,
                                          FastCall& call, const std::vector<CallValue>& values,
                                          LaunchGeometry& geometry) {
  if (uncovered_.count(slot) != 0) return -1;
  py::object chosen_options = py::none();
  if (!options_.empty()) {
    py::dict chosen;
    for (std::size_t i = 0; i < options_.size(); ++i) {
      chosen[option_names_[i]] = py::reinterpret_borrow<py::object>(options[i]);
    }
    chosen_options = chosen;
  }
  py::object result = py::reinterpret_steal<py::object>(PyObject_CallFunctionObjArgs(
      fallback_, py::int_(slot).ptr(), arguments_tuple(args, count).ptr(), chosen_options.ptr(),
      nullptr));
  if (!result) throw py::error_already_set();
  if (result.is_none()) return -1;
  const auto pair = result.cast<std::pair<std::int64_t, py::object>>();
  const std::int64_t fallback = pair.first;
  const int device = call.device();
  // The fallback of the fallback is never asked: a fallback equal to its key, or one that is
  // not warmed on this device, leaves the call to the usual miss (as in warn mode).
  if (fallback == slot || !packer_->has_spec(fallback) ||
      !kernel_.has_executor(KeySlot{fallback}, device)) {
    return -1;
  }
  // Warmup refused such a fallback already; a key outside the warmed space is checked here,
  // once, so that a fallback never launches a call its arguments would be refused by.
  if (const std::string why = packer_->covers(slot, fallback); !why.empty()) {
    uncovered_.insert(slot);
    log_warning("monitor", "kernel " + kernel_.name() + " [" + kernel_.slot_text(slot) +
                               "]: its fallback [" + kernel_.slot_text(fallback) +
                               "] does not serve the calls the key accepts (" + why +
                               "); its misses compile as in warn mode");
    return -1;
  }
  DynamicKernel& kernel = kernel_;
  const KeySlot key{slot};
  const std::string arch = Runtime::instance().target_arch(device);
  const bool served = kernel_.serve_with_fallback(
      kernel_.slot_text(slot), kernel_.slot_json(slot), describe_values(names_, values),
      Runtime::instance().backend().is_capturing(call.stream()),
      [&kernel, key, arch] { (void)kernel.compile(key, arch); });
  if (!served) return -1;
  if (!pair.second.is_none()) {
    const auto fallback_geometry = pair.second.cast<py::tuple>();
    if (fallback_geometry.size() != 3) {
      throw Error("kernel " + kernel_.name() + ": a malformed geometry");
    }
    geometry = geometry_of(kernel_.name(), fallback_geometry[0], fallback_geometry[1],
                           fallback_geometry[2]);
  }
  return fallback;
}

void KernelCall::hold_type(PyObject* object) {
  auto* type = reinterpret_cast<PyObject*>(Py_TYPE(object));
  if (held_types_.insert(type).second) Py_INCREF(type);
}

void KernelCall::unknown_keyword(PyObject* name) const {
  const char* text = PyUnicode_AsUTF8(name);
  if (text == nullptr) PyErr_Clear();
  std::string takes = "stream=";
  for (const Option& option : options_) takes += ", " + option.name + "=";
  throw InvalidArgument(kernel_.name(), text != nullptr ? text : "?",
                        "is no keyword of this kernel's call, which takes " + takes +
                            (options_.empty() ? " only (an owner declares call options to take "
                                                "the launcher's meta-parameters)"
                                              : ""));
}

// Keywords are few and their names come interned from the call site, so a name is found by
// identity first; the option list is short (a linear scan costs less than a hash).
PyObject* KernelCall::read_keywords(PyObject* keywords, PyObject* const* keyword_values,
                                    std::vector<PyObject*>& chosen) const {
  static PyObject* const stream_name = PyUnicode_InternFromString("stream");
  PyObject* stream = Py_None;
  chosen.assign(options_.size(), nullptr);
  const Py_ssize_t count = keywords == nullptr ? 0 : PyTuple_GET_SIZE(keywords);
  for (Py_ssize_t i = 0; i < count; ++i) {
    PyObject* name = PyTuple_GET_ITEM(keywords, i);
    std::size_t option = 0;
    while (option < options_.size() && option_names_[option] != name) ++option;
    if (option == options_.size() && name != stream_name) {
      option = 0;
      while (option < options_.size() && PyUnicode_Compare(name, option_names_[option]) != 0) {
        ++option;
      }
      if (option == options_.size() && PyUnicode_Compare(name, stream_name) != 0) {
        unknown_keyword(name);
      }
    }
    if (option == options_.size()) {
      stream = keyword_values[i];
    } else {
      chosen[option] = keyword_values[i];
    }
  }
  for (std::size_t option = 0; option < options_.size(); ++option) {
    if (chosen[option] != nullptr) continue;
    chosen[option] = options_[option].fallback;
    if (chosen[option] == nullptr) {
      throw InvalidArgument(kernel_.name(), options_[option].name,
                            "is a call option of this kernel without a default: pass " +
                                options_[option].name + "=...");
    }
  }
  return stream;
}

const CallMemo::Entry& KernelCall::resolve(PyObject* const* args, Py_ssize_t count,
                                           const std::vector<CallValue>& values,
                                           const std::vector<PyObject*>& options,
                                           const std::vector<std::uint64_t>& fingerprint,
                                           std::uint64_t hash) {
  py::object result;
  if (options_.empty()) {
    result = py::reinterpret_steal<py::object>(
        PyObject_CallOneArg(resolve_, arguments_tuple(args, count).ptr()));
  } else {
    py::dict chosen;
    for (std::size_t i = 0; i < options_.size(); ++i) {
      chosen[option_names_[i]] = py::reinterpret_borrow<py::object>(options[i]);
    }
    result = py::reinterpret_steal<py::object>(PyObject_CallFunctionObjArgs(
        resolve_, arguments_tuple(args, count).ptr(), chosen.ptr(), nullptr));
  }
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
    if (values[static_cast<std::size_t>(i)].type != nullptr) hold_type(args[i]);
  }
  for (PyObject* value : defaults_) hold_type(value);
  for (PyObject* value : options) hold_type(value);
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

PyObject* KernelCall::call(PyObject* const* args, Py_ssize_t count, PyObject* keywords,
                           PyObject* const* keyword_values) {
  const ScratchLease lease;
  std::vector<PyObject*>& options = (*lease).options;
  // A positional call of a kernel without options (the common case) reads no keyword.
  PyObject* stream = keywords == nullptr && options_.empty()
                         ? Py_None
                         : read_keywords(keywords, keyword_values, options);
  FastCall call(kernel_.name(), stream);
  if (count < static_cast<Py_ssize_t>(required_) ||
      count > static_cast<Py_ssize_t>(names_.size())) {
    std::string names;
    for (const auto& name : names_) names += (names.empty() ? "" : ", ") + name;
    call.fail("args", "takes " +
                          (required_ == names_.size() ? "" : std::to_string(required_) + " to ") +
                          std::to_string(names_.size()) + " arguments (" + names + "), got " +
                          std::to_string(count));
  }
  std::vector<CallValue>& values = (*lease).values;
  std::vector<CallValue>& launch_values = (*lease).launch_values;
  std::vector<std::uint64_t>& fingerprint = (*lease).fingerprint;
  const std::size_t given = static_cast<std::size_t>(count);
  values.resize(defaults_.empty() ? given : names_.size());
  fingerprint.clear();
  fingerprint.push_back(static_cast<std::uint64_t>(count));
  for (std::size_t i = 0; i < values.size(); ++i) {
    // Left out: the function's own default, as Triton's binder fills it in.
    values[i] = read_value(call, i < given ? args[i] : defaults_[i - required_], names_[i]);
    if (memoized_[i]) add_fingerprint(values[i], fingerprint);
  }
  for (std::size_t i = 0; i < options_.size(); ++i) {
    add_option_fingerprint(call, options[i], options_[i].name, fingerprint);
  }
  const std::uint64_t hash = CallMemo::hash(fingerprint);
  const CallMemo::Entry* found = memo_.find(fingerprint, hash);
  if (found == nullptr) found = &resolve(args, count, values, options, fingerprint, hash);
  std::int64_t slot = found->slot;

  PackedCall packed;
  packed.geometry = found->geometry;
  // The monitor's fallback mode: a key that misses on the call's device launches its owner's
  // fallback (warmed, covering it) while the key compiles in the background.
  bool by_fallback = false;
  if (fallback_ != nullptr && Monitor::instance().serving_through_misses() &&
      !kernel_.has_executor(KeySlot{slot}, call.device())) {
    const std::int64_t fallback =
        serving_fallback(slot, args, count, options, call, values, packed.geometry);
    if (fallback >= 0) {
      slot = fallback;
      by_fallback = true;
    }
  }
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
    if (by_fallback) kernel_.count_fallback_launch();
    return result.release().ptr();
  }
  // A miss (slow anyway, and it may compile) describes its arguments for the monitor's and
  // errors' messages, and runs without the GIL.
  CallDescriptors descriptors;
  descriptors.tensors = describe_values(*names, *launched);
  for (std::size_t i = 0; i < options_.size(); ++i) {
    descriptors.tensors += ", " + options_[i].name + "=" + std::string(py::repr(options[i]));
  }
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
  const Py_ssize_t positional = PyVectorcall_NARGS(nargsf);
  if (kwnames != nullptr && PyTuple_GET_SIZE(kwnames) == 0) kwnames = nullptr;
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
    return launcher->call(argv + 1, positional - 1, kwnames, argv + positional);
  } catch (...) {
    set_python_error_from_current_exception();
    return nullptr;
  }
}

PyMethodDef kInstanceCall = {
    "__call__", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(instance_call)),
    METH_FASTCALL | METH_KEYWORDS,
    "Dispatches (from a memo of the arguments dispatch and the grid read, and the call options), "
    "checks the call against its key's specialization, packs and launches it on the tensors' "
    "current stream (or stream=...)."};

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
         std::vector<std::string> launch_names, py::list defaults, py::list options) {
        const auto parsed = parse_language(language);
        if (!parsed) throw InvalidArgument(kernel.name(), "language", "unknown: " + language);
        std::vector<PyObject*> default_values;
        for (py::handle value : defaults) default_values.push_back(value.ptr());
        // (name, has a default, the default)
        std::vector<KernelCall::Option> call_options;
        for (py::handle option : options) {
          const auto entry = option.cast<py::tuple>();
          call_options.push_back({entry[0].cast<std::string>(),
                                  entry[1].cast<bool>() ? py::object(entry[2]).ptr() : nullptr});
        }
        static std::mutex mutex;
        static auto* calls = new std::vector<std::unique_ptr<KernelCall>>();
        std::lock_guard lock(mutex);
        calls->push_back(std::make_unique<KernelCall>(
            kernel, *parsed, std::move(names), required, std::move(memoized), resolve.ptr(),
            plan.is_none() ? nullptr : plan.ptr(), std::move(launch_names),
            std::move(default_values), std::move(call_options)));
        return py::reinterpret_steal<py::object>(
            PyCapsule_New(calls->back().get(), kCapsuleName, nullptr));
      },
      py::arg("kernel"), py::arg("language"), py::arg("names"), py::arg("required"),
      py::arg("memoized"), py::arg("resolve"), py::arg("plan") = py::none(),
      py::arg("launch_names") = std::vector<std::string>{}, py::arg("defaults") = py::list(),
      py::arg("options") = py::list());
  // The argument specification of a slot, a JSON list as the language's owner writes it.
  module.def("kernel_call_set_spec",
             [](py::object capsule, std::int64_t slot, const std::string& spec) {
               KernelCall* launcher = kernel_call_of(capsule.ptr());
               if (launcher == nullptr) throw py::error_already_set();
               launcher->packer().set_spec(slot, spec);
             });
  module.def("kernel_call_set_fallback", [](py::object capsule, py::object fallback) {
    KernelCall* launcher = kernel_call_of(capsule.ptr());
    if (launcher == nullptr) throw py::error_already_set();
    launcher->set_fallback(fallback.is_none() ? nullptr : fallback.ptr());
  });
  // "" when every call `slot`'s spec accepts, `fallback`'s accepts too; else why not.
  module.def("kernel_call_covers",
             [](py::object capsule, std::int64_t slot, std::int64_t fallback) {
               KernelCall* launcher = kernel_call_of(capsule.ptr());
               if (launcher == nullptr) throw py::error_already_set();
               return launcher->covers(slot, fallback);
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
