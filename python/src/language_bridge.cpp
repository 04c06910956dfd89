// The compilers of the languages whose compilers are Python (Triton, CuTeDSL), installed on the
// Runtime from Python (zerojit.languages): the core asks them for a version and for compiles
// from whichever thread needs one (a warmup worker, a launch's miss), with the GIL taken here;
// the Python side runs each compile in a worker process and waits without the GIL.
#include <pybind11/pybind11.h>

#include <string>

#include "bindings.hpp"
#include "zerojit/zerojit.hpp"

namespace py = pybind11;

namespace zerojit::python {
namespace {

class PythonLanguageCompiler final : public LanguageCompiler {
 public:
  PythonLanguageCompiler(Language language, py::object version, py::object compile)
      : language_(language),
        version_(hold(std::move(version))),
        compile_(hold(std::move(compile))) {}

  std::string version(std::string_view arch) override {
    ensure_python();
    py::gil_scoped_acquire gil;
    try {
      return (*version_)(std::string(arch)).cast<std::string>();
    } catch (py::error_already_set& error) {
      rethrow(error, nullptr);
    }
  }

  CompiledArtifact compile(const Program& program, std::string_view arch) override {
    ensure_python();
    py::gil_scoped_acquire gil;
    try {
      const py::tuple result =
          (*compile_)(program.kernel_name, program.key_text, program.name_expressions.at(0),
                      py::bytes(program.compile_request), std::string(arch));
      if (result.size() != 5) {
        throw Error("kernel " + program.kernel_name + ": the " + std::string(to_string(language_)) +
                    " compiler returned " + std::to_string(result.size()) + " values, not 5");
      }
      CompiledArtifact artifact;
      artifact.cubin = result[0].cast<std::string>();
      artifact.lowered_names.push_back(
          {program.name_expressions.at(0), result[1].cast<std::string>()});
      artifact.launch_record = result[2].cast<std::string>();
      artifact.log = result[3].cast<std::string>();
      artifact.compile_seconds = result[4].cast<double>();
      return artifact;
    } catch (py::error_already_set& error) {
      rethrow(error, &program);
    } catch (const py::cast_error& error) {
      throw Error("kernel " + program.kernel_name + ": the " + std::string(to_string(language_)) +
                  " compiler returned a value of the wrong type: " + error.what());
    }
  }

 private:
  static void ensure_python() {
    if (!Py_IsInitialized() || finalizing()) {
      throw UnavailableError("the Python interpreter is shutting down: nothing can be compiled");
    }
  }

  // The Python exception as zerojit's own: UnavailableError stays one (a compiler that is not
  // installed), a CompileError keeps its log, anything else is a CompileError naming its type.
  [[noreturn]] void rethrow(py::error_already_set& error, const Program* program) {
    const std::string message = py::str(error.value());
    const py::module_ errors = py::module_::import("zerojit.runtime.errors");
    if (error.matches(errors.attr("UnavailableError"))) throw UnavailableError(message);
    const std::string kernel = program ? program->kernel_name : std::string();
    const std::string key = program ? program->key_text : std::string();
    if (error.matches(errors.attr("CompileError"))) {
      py::object log = error.value().attr("log");
      throw CompileError(kernel, key,
                         log.is_none() ? std::string() : py::str(log).cast<std::string>(), message);
    }
    const std::string type = py::str(error.type().attr("__name__"));
    throw CompileError(
        kernel, key, {},
        "the " + std::string(to_string(language_)) + " compiler raised " + type + ": " + message);
  }

  Language language_;
  std::shared_ptr<py::object> version_;
  std::shared_ptr<py::object> compile_;
};

}  // namespace

void bind_language_compilers(py::module_& module) {
  // set_language_compiler(language, version(arch) -> str, compile(kernel, key, function,
  // request, arch) -> (image, entry, launch record, log, seconds)); None, None removes it.
  module.def(
      "set_language_compiler",
      [](const std::string& name, py::object version, py::object compile) {
        const auto language = parse_language(name);
        if (!language || entry_kind(*language).compiled_by_nvrtc) {
          throw InvalidArgument("set_language_compiler", "language",
                                "must be 'triton' or 'cutedsl', got '" + name + "'");
        }
        if (version.is_none() || compile.is_none()) {
          Runtime::instance().set_language_compiler(*language, nullptr);
          return;
        }
        Runtime::instance().set_language_compiler(
            *language, std::make_shared<PythonLanguageCompiler>(*language, std::move(version),
                                                                std::move(compile)));
      },
      py::arg("language"), py::arg("version"), py::arg("compile"));
  // Where the host runtime of a language whose entries are host objects is (its wheel's copy).
  module.def("set_host_runtime_library", [](const std::string& name, const std::string& path) {
    const auto language = parse_language(name);
    if (!language || entry_kind(*language).host_runtime == nullptr) {
      throw InvalidArgument("set_host_runtime_library", "language",
                            "has no host runtime: '" + name + "'");
    }
    entry_kind(*language).host_runtime()->set_library(path);
  });
  // The compiler version the identities of `language` use on `arch` (for tests and tools).
  module.def("compiler_version", [](const std::string& name, const std::string& arch) {
    const auto language = parse_language(name);
    if (!language) {
      throw InvalidArgument("compiler_version", "language", "is no language: '" + name + "'");
    }
    py::gil_scoped_release release;
    return Runtime::instance().compiler_version(*language, arch);
  });
}

}  // namespace zerojit::python
