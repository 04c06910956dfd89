#include <pybind11/pybind11.h>

#include <exception>
#include <initializer_list>
#include <string>
#include <utility>

#include "bindings.hpp"
#include "dsv4/config.hpp"
#include "fast_call.hpp"
#include "zerojit/error.hpp"
#include "zerojit/redis_store.hpp"

namespace py = pybind11;

namespace zerojit::python {
namespace {

// The Python exception classes, looked up once when the module is imported. They are
// immutable after that and live as long as the interpreter (intentionally never freed: a
// translator may run during interpreter shutdown).
struct ErrorClasses {
  py::object error;
  py::object invalid_argument;
  py::object config_error;
  py::object unavailable;
  py::object cuda_error;
  py::object compile_error;
  py::object runtime_jit_error;
  py::object launch_error;
};

const ErrorClasses*& error_classes() {
  static const ErrorClasses* classes = nullptr;
  return classes;
}

void raise(const py::object& type, const std::string& message,
           std::initializer_list<std::pair<const char*, py::object>> attributes) {
  py::object instance = type(message);
  for (const auto& [name, value] : attributes) instance.attr(name) = value;
  PyErr_SetObject(type.ptr(), instance.ptr());
}

void translate(std::exception_ptr pointer) {
  const ErrorClasses& classes = *error_classes();
  try {
    if (pointer) std::rethrow_exception(pointer);
  } catch (const InvalidArgument& e) {
    raise(classes.invalid_argument, e.what(),
          {{"kernel", py::str(e.kernel())}, {"argument", py::str(e.argument())}});
  } catch (const RuntimeJitError& e) {
    raise(classes.runtime_jit_error, e.what(),
          {{"kernel", py::str(e.kernel())},
           {"key", py::str(e.key())},
           {"descriptors", py::str(e.descriptors())}});
  } catch (const CompileError& e) {
    raise(classes.compile_error, e.what(),
          {{"kernel", py::str(e.kernel())}, {"key", py::str(e.key())}, {"log", py::str(e.log())}});
  } catch (const CudaError& e) {
    raise(classes.cuda_error, e.what(),
          {{"call", py::str(e.call())},
           {"code", py::int_(e.code())},
           {"error_name", py::str(e.error_name())}});
  } catch (const StoreTimeout& e) {  // as torch.distributed's stores raise
    PyErr_SetString(PyExc_TimeoutError, e.what());
  } catch (const UnavailableError& e) {
    raise(classes.unavailable, e.what(), {});
  } catch (const LaunchError& e) {
    raise(classes.launch_error, e.what(), {});
  } catch (const dsv4::ConfigError& e) {  // a zerojit::Error: caught before it
    raise(classes.config_error, e.what(), {});
  } catch (const Error& e) {
    raise(classes.error, e.what(), {});
  }
}

}  // namespace

void set_python_error_from_current_exception() {
  try {
    throw;
  } catch (py::error_already_set& error) {
    error.restore();
  } catch (const std::exception& error) {
    try {
      if (error_classes() != nullptr) translate(std::current_exception());
    } catch (...) {
      // Not one of zerojit's: a RuntimeError below.
    }
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, error.what());
  } catch (...) {
    PyErr_SetString(PyExc_RuntimeError, "zerojit: unknown C++ exception");
  }
}

void register_errors(py::module_& module) {
  py::module_ errors = py::module_::import("zerojit.runtime.errors");
  error_classes() =
      new ErrorClasses{errors.attr("Error"),           errors.attr("InvalidArgument"),
                       errors.attr("ConfigError"),     errors.attr("UnavailableError"),
                       errors.attr("CudaError"),       errors.attr("CompileError"),
                       errors.attr("RuntimeJitError"), errors.attr("LaunchError")};
  py::register_exception_translator(&translate);
  module.attr("_errors") = errors;
}

}  // namespace zerojit::python
