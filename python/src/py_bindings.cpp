// Python kernels (zerojit.Kernel) in zerojit._core: the kernel handle, key interning, compile
// and identity for tests and tools, the manifest of registered Python kernels, and the engine
// hooks that carry library log lines and monitor events into Python.
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "bindings.hpp"
#include "examples/scale_add/scale_add.hpp"
#include "py_kernel.hpp"
#include "zerojit/log.hpp"

namespace py = pybind11;

namespace zerojit::python {

namespace {

DynamicField to_field(const std::string& kernel,
                      const std::tuple<std::string, std::string, py::object>& spec) {
  const auto& [name, kind, value] = spec;
  DynamicField field{name, false};
  if (kind == "bool") {
    field.value = value.cast<bool>();
  } else if (kind == "int") {
    field.value = value.cast<std::int64_t>();
  } else if (kind == "str") {
    field.value = value.cast<std::string>();
  } else if (kind == "dtype") {
    const std::string text = value.cast<std::string>();
    const auto dtype = parse_dtype(text);
    if (!dtype) {
      throw InvalidArgument(kernel, name, "is not a zerojit dtype name: '" + text + "'");
    }
    field.value = *dtype;
  } else {
    throw InvalidArgument(kernel, name, "has no key field kind '" + kind + "'");
  }
  return field;
}

KeyRendering parse_rendering(const std::string& kernel, const std::string& text) {
  if (text == "template") return KeyRendering::template_arguments;
  if (text == "macros") return KeyRendering::macros;
  if (text == "none") return KeyRendering::none;
  throw InvalidArgument(kernel, "key_as",
                        "must be 'template', 'macros' or 'none', got '" + text + "'");
}

std::int64_t intern(DynamicKernel& kernel,
                    const std::vector<std::tuple<std::string, std::string, py::object>>& fields,
                    const std::string& source_path,
                    const std::vector<std::pair<std::string, std::string>>& files,
                    const std::string& function, const std::string& key_as,
                    const std::string& macro_prefix, const std::vector<std::string>& options,
                    bool toolkit_headers) {
  DynamicKey key;
  for (const auto& spec : fields) key.fields.push_back(to_field(kernel.name(), spec));
  ProgramText text;
  text.source_path = source_path;
  text.files = files;
  text.function = function;
  text.rendering = parse_rendering(kernel.name(), key_as);
  text.macro_prefix = macro_prefix;
  text.options = options;
  text.toolkit_headers = toolkit_headers;
  return kernel.intern(std::move(key), std::move(text));
}

// A key of a kernel in another language (zerojit.TritonKernel): its source as the identity sees
// it, the function, and the compile request its compiler takes.
std::int64_t intern_language(
    DynamicKernel& kernel,
    const std::vector<std::tuple<std::string, std::string, py::object>>& fields,
    const std::string& language, const std::string& source_path, const std::string& source,
    const std::string& function, const py::bytes& compile_request) {
  DynamicKey key;
  for (const auto& spec : fields) key.fields.push_back(to_field(kernel.name(), spec));
  ProgramText text;
  const auto parsed = parse_language(language);
  if (!parsed || entry_kind(*parsed).compiled_by_nvrtc) {
    throw InvalidArgument(kernel.name(), "language", "must be 'triton' or 'cutedsl'");
  }
  text.language = *parsed;
  text.source_path = source_path;
  text.files = {{source_path, source}};
  text.function = function;
  text.rendering = KeyRendering::none;
  text.compile_request = compile_request;
  return kernel.intern(std::move(key), std::move(text));
}

std::string identity_of(const Program& program, const std::string& arch) {
  validate_arch(arch);
  return Runtime::instance().identity_of(program, arch).hex();
}

// Compiles one key (memory -> store -> NVRTC) without the GIL; returns (origin, identity).
std::tuple<std::string, std::string> compile(DynamicKernel& kernel, std::int64_t slot,
                                             const std::string& arch) {
  const KeySlot key{slot};
  const Program program = kernel.program(key);
  py::gil_scoped_release release;
  ArtifactOrigin origin;
  const auto artifact = kernel.compile_with_origin(key, arch, origin);
  return {std::string(to_string(origin)), artifact->identity.hex()};
}

using RegistrationTuple =
    std::tuple<DynamicKernel*, std::string, std::vector<std::int64_t>, std::vector<std::string>,
               std::vector<std::tuple<std::string, std::string, std::string>>>;

std::vector<DynamicRegistration> to_registrations(const std::vector<RegistrationTuple>& items) {
  std::vector<DynamicRegistration> out;
  for (const auto& [kernel, tag, slots, dead, failed] : items) {
    if (kernel == nullptr) throw InvalidArgument("warmup", "kernel", "is None in a registration");
    DynamicRegistration registration{kernel, tag, slots, dead, {}};
    for (const auto& [text, json, error] : failed)
      registration.failed.push_back({text, json, error});
    out.push_back(std::move(registration));
  }
  return out;
}

// --- Hooks -------------------------------------------------------------------------------------

// Calls `callable(args...)` from any thread; a Python exception is reported as unraisable
// rather than thrown into zerojit (the caller may be a warmup worker).
template <class... Args>
void call_from_any_thread(const std::shared_ptr<py::object>& callable, const char* where,
                          Args&&... args) {
  if (!Py_IsInitialized() || finalizing()) return;
  py::gil_scoped_acquire gil;
  try {
    (*callable)(std::forward<Args>(args)...);
  } catch (py::error_already_set& error) {
    error.discard_as_unraisable(where);
  }
}

// Library log lines -> callable(level, component, message); None restores standard error.
// The handler is called by whichever thread logs, outside zerojit's log lock, and never while
// the caller holds a lock a GIL-holding thread waits for (zerojit releases the GIL around every
// compile, load and warmup).
void set_log_bridge(const py::object& callable) {
  if (callable.is_none()) {
    set_log_handler(nullptr);
    return;
  }
  auto held = hold(callable);
  set_log_handler([held](const LogRecord& record) {
    call_from_any_thread(held, "zerojit log bridge", std::string(to_string(record.level)),
                         std::string(record.component), std::string(record.message));
  });
}

// Monitor events -> callable(kind, kernel, key, descriptors), on the thread that asked for the
// compile or load, before an error-mode refusal is raised.
void set_event_bridge(const py::object& callable) {
  if (callable.is_none()) {
    Monitor::instance().set_event_callback(nullptr);
    return;
  }
  auto held = hold(callable);
  Monitor::instance().set_event_callback([held](const JitEvent& event) {
    call_from_any_thread(held, "zerojit monitor callback", std::string(to_string(event.kind)),
                         event.kernel, event.key, event.descriptors);
  });
}

}  // namespace

bool finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing() != 0;
#else
  return _Py_IsFinalizing() != 0;
#endif
}

std::shared_ptr<py::object> hold(py::object callable) {
  return std::shared_ptr<py::object>(new py::object(std::move(callable)), [](py::object* object) {
    if (!Py_IsInitialized() || finalizing()) return;  // leaked: no Python to release it to
    py::gil_scoped_acquire gil;
    delete object;
  });
}

// --- Interrupting a warmup --------------------------------------------------------------------

WarmupInterrupt::WarmupInterrupt() : caller_(std::this_thread::get_id()) {}

WarmupInterrupt::~WarmupInterrupt() { Py_XDECREF(pending_); }

bool WarmupInterrupt::requested() {
  if (interrupted_.load()) return true;
  // Python runs signal handlers on its main thread only; elsewhere there is nothing to check.
  if (std::this_thread::get_id() != caller_ || !Py_IsInitialized() || finalizing()) return false;
  py::gil_scoped_acquire gil;
  if (PyErr_CheckSignals() == 0) return false;
  py::error_already_set error;  // takes the raised exception (KeyboardInterrupt for Ctrl-C)
  if (!capture(error)) {
    // A handler that raised an ordinary exception: stop all the same, and raise it.
    std::lock_guard lock(mutex_);
    if (pending_ == nullptr) pending_ = py::object(error.value()).release().ptr();
    interrupted_.store(true);
  }
  return true;
}

bool WarmupInterrupt::capture(py::error_already_set& error) {
  if (error.matches(PyExc_Exception)) return false;
  std::lock_guard lock(mutex_);
  if (pending_ == nullptr) pending_ = py::object(error.value()).release().ptr();
  interrupted_.store(true);
  return true;
}

void WarmupInterrupt::raise_if_interrupted() {
  PyObject* pending = nullptr;
  {
    std::lock_guard lock(mutex_);
    std::swap(pending, pending_);
  }
  if (pending == nullptr) return;
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(pending)), pending);
  Py_DECREF(pending);
  throw py::error_already_set();
}

// The warmup progress callback: callable(kernel, key, origin, seconds, error, done, total).
std::function<void(const WarmupProgress&)> progress_bridge(const py::object& callable,
                                                           WarmupInterrupt& interrupt) {
  if (callable.is_none()) return nullptr;
  auto held = hold(callable);
  return [held, &interrupt](const WarmupProgress& progress) {
    if (!Py_IsInitialized() || finalizing()) return;
    const KeyReport& key = *progress.key;
    py::gil_scoped_acquire gil;
    try {
      (*held)(key.kernel, key.key,
              key.error.empty() ? std::string(to_string(key.origin)) : "failed", key.seconds,
              key.error, progress.done, progress.total);
    } catch (py::error_already_set& error) {
      if (!interrupt.capture(error))
        error.discard_as_unraisable("zerojit warmup progress callback");
    }
  };
}

std::vector<DynamicRegistration> dynamic_registrations(const py::object& items) {
  if (items.is_none()) return {};
  return to_registrations(items.cast<std::vector<RegistrationTuple>>());
}

void bind_space(py::module_& module);  // py_space.cpp

void bind_py_kernels(py::module_& module) {
  py::class_<DynamicKernel, std::unique_ptr<DynamicKernel, py::nodelete>>(
      module, "DynamicKernel", "a Python kernel's half in the core (zerojit.Kernel)")
      .def_property_readonly("name", &DynamicKernel::name)
      .def("intern", &intern, py::arg("fields"), py::arg("source_path"), py::arg("files"),
           py::arg("function"), py::arg("key_as"), py::arg("macro_prefix"), py::arg("options"),
           py::arg("toolkit_headers"))
      .def("intern_language", &intern_language, py::arg("fields"), py::arg("language"),
           py::arg("source_path"), py::arg("source"), py::arg("function"),
           py::arg("compile_request"))
      .def("slot_text", &DynamicKernel::slot_text, py::arg("slot"))
      .def("slot_json", &DynamicKernel::slot_json, py::arg("slot"))
      .def_property_readonly("slot_count", &DynamicKernel::slot_count)
      .def(
          "program",
          [](const DynamicKernel& kernel, std::int64_t slot) {
            const Program program = kernel.program(KeySlot{slot});
            return py::make_tuple(program.source_path, program.name_expressions.front(),
                                  program.options, program.key_text);
          },
          py::arg("slot"))
      .def(
          "identity",
          [](const DynamicKernel& kernel, std::int64_t slot, const std::string& arch) {
            return identity_of(kernel.program(KeySlot{slot}), arch);
          },
          py::arg("slot"), py::arg("arch"))
      .def("compile", &compile, py::arg("slot"), py::arg("arch"))
      .def(
          "has_executor",
          [](const DynamicKernel& kernel, std::int64_t slot, int device) {
            return kernel.has_executor(KeySlot{slot}, device);
          },
          py::arg("slot"), py::arg("device"))
      .def("counters_json", [](const DynamicKernel& kernel) {
        const KernelCounters c = kernel.counters();
        return py::dict(py::arg("hits") = c.hits, py::arg("misses") = c.misses,
                        py::arg("compiles") = c.compiles, py::arg("disk_loads") = c.disk_loads,
                        py::arg("loads") = c.loads, py::arg("runtime_jit") = c.runtime_jit);
      });
  module.def("dynamic_kernel", &DynamicKernel::named, py::arg("name"),
             py::return_value_policy::reference);

  // The C++ twin of the identity tests: examples.scale_add's identity for a key.
  module.def(
      "scale_add_identity",
      [](const std::string& dtype, int vector_width, const std::string& arch) {
        const auto parsed = parse_dtype(dtype);
        if (!parsed) throw InvalidArgument("examples.scale_add", "dtype", "unknown: " + dtype);
        const examples::ScaleAddKey key{*parsed, vector_width};
        return identity_of(examples::ScaleAddKernel::instance().program(key), arch);
      },
      py::arg("dtype"), py::arg("vector_width"), py::arg("arch"));

  module.def("dtype_names", [] {
    std::vector<std::string> names;
    for (int i = 0; i < kDTypeCount; ++i) {
      names.emplace_back(dtype_name(static_cast<DType>(i)));
    }
    return names;
  });

  // (kernel, key text, key JSON) per entry, and (kernel, tag, axis) per dead axis.
  module.def(
      "dynamic_manifest",
      [](const py::object& items) {
        WarmupRegistry registry;
        add_dynamic_registrations(registry, dynamic_registrations(items));
        const Manifest manifest = registry.manifest();
        std::vector<std::tuple<std::string, std::string, std::string>> entries;
        for (const ManifestEntry& entry : manifest.entries) {
          entries.emplace_back(entry.kernel->name(), entry.key_text, entry.key_json);
        }
        std::vector<std::tuple<std::string, std::string, std::string>> dead;
        for (const auto& axis : manifest.dead_axes)
          dead.emplace_back(axis.kernel, axis.tag, axis.axis);
        return py::make_tuple(entries, dead);
      },
      py::arg("registrations"));

  // A compile or load of a kernel zerojit does not own (the Triton guard, zerojit.monitor):
  // counted under `counter`, reported or (error mode) raised as RuntimeJitError.
  module.def(
      "monitor_foreign_event",
      [](const std::string& kind, const std::string& counter, const std::string& kernel,
         const std::string& key, const std::string& detail) {
        JitEvent event;
        event.kind = kind == "load" ? JitEventKind::load : JitEventKind::compile;
        event.kernel = kernel;
        event.key = key;
        event.detail = detail;
        Monitor::instance().on_foreign_jit(event, counter);
      },
      py::arg("kind"), py::arg("counter"), py::arg("kernel"), py::arg("key"), py::arg("detail"));

  module.def("set_log_bridge", &set_log_bridge, py::arg("callable"));
  module.def("set_event_bridge", &set_event_bridge, py::arg("callable"));
  module.def(
      "set_log_level",
      [](const std::string& text) {
        const auto level = parse_log_level(text);
        if (!level) {
          throw InvalidArgument("logging", "level",
                                "must be debug, info, warning, error or off, got '" + text + "'");
        }
        set_log_level(*level);
      },
      py::arg("level"));
  module.def("log", [](const std::string& level, const std::string& component,
                       const std::string& message) {
    const auto parsed = parse_log_level(level);
    if (!parsed) throw InvalidArgument("logging", "level", "unknown: " + level);
    py::gil_scoped_release release;  // the handler takes the GIL itself, as from any thread
    log(*parsed, component, message);
  });

  bind_space(module);
}

}  // namespace zerojit::python
