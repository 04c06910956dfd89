// `python -m zerojit <command> ...`: the zerojit tool (zerojit::cli) in this interpreter, with
// the families of the `zerojit` binary (DSv4, the examples: tools/zerojit/builtin_families.hpp)
// and the family of the kernels Python modules define and register (zerojit.register, Triton,
// CuTeDSL and CUDA C++ alike; `--module M`): the same commands, options, exit codes and --json
// as the binary, so a pip install needs no separate program. The Python family's configuration
// imports the modules (with the GIL) and interns their keys; the commands then run without the
// GIL, and compiles and the `run` battery take it back where they reach Python.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "builtin_families.hpp"
#include "exit_codes.hpp"
#include "py_kernel.hpp"
#include "zerojit/tool.hpp"

namespace py = pybind11;

namespace zerojit::python {
namespace {

std::vector<std::string> module_names(const tool::OptionValues& values) {
  std::vector<std::string> modules;
  for (const auto& [flag, value] : values) {
    if (flag != "--module") continue;
    std::size_t start = 0;
    while (start <= value.size()) {  // a comma-separated list, as well as repeated flags
      const std::size_t end = std::min(value.find(',', start), value.size());
      if (end > start) modules.push_back(value.substr(start, end - start));
      start = end + 1;
    }
  }
  return modules;
}

tool::FamilyConfiguration configure_python_family(const tool::OptionValues& values,
                                                  const std::optional<std::string>& arch) {
  const std::vector<std::string> modules = module_names(values);
  if (modules.empty()) {
    throw tool::ConfigurationError(
        "no --module given: name the Python modules that register "
        "the kernels",
        "e.g. --module mypackage.kernels");
  }
  std::vector<DynamicRegistration> registrations;
  std::string description;
  {
    py::gil_scoped_acquire gil;
    try {
      const py::tuple configured =
          py::module_::import("zerojit.tool.modules").attr("configure")(modules);
      registrations = dynamic_registrations(configured[0]);
      description = configured[1].cast<std::string>();
    } catch (py::error_already_set& error) {
      const std::string message = py::str(error.value());
      throw tool::ConfigurationError("--module: " + message,
                                     "the module must import without errors and register its "
                                     "kernels with zerojit.register");
    }
  }
  tool::FamilyConfiguration configuration;
  configuration.description = description;
  configuration.arch = arch.value_or("sm_90a");
  configuration.register_warmup = [registrations](WarmupRegistry& registry) {
    add_dynamic_registrations(registry, registrations);
  };
  return configuration;
}

// One step of a battery as Python sees it (zerojit.tool.battery.Step wraps it). It outlives
// the step if Python keeps it, so it forgets the step when the step is over.
struct PyRunStep {
  tool::RunStep* step = nullptr;
  std::exception_ptr failure;  // what the tool raised through Python (a call outside the manifest)

  tool::RunStep& current() const {
    if (step == nullptr) throw Error("this battery step is over (a step is used during its call)");
    return *step;
  }
};

std::string where(const tool::RunStep& step) {
  return "step " + std::to_string(step.index()) +
         (step.device() >= 0 ? " on device " + std::to_string(step.device()) : "");
}

// What a battery raised, as the tool reports it: the exit code of the error's kind (as
// run_battery maps the C++ errors of a C++ battery), the Python message and type.
[[noreturn]] void throw_as_tool_error(py::error_already_set& error, const tool::RunStep& step) {
  const std::string message = py::str(error.value());
  const py::module_ errors = py::module_::import("zerojit.runtime.errors");
  if (error.matches(errors.attr("RuntimeJitError"))) {
    throw tool::ToolError{tool::kExitRuntimeJit, message + "\n  at " + where(step),
                          "widen the warmup space of " +
                              py::str(error.value().attr("kernel")).cast<std::string>() +
                              " to cover this call"};
  }
  if (error.matches(errors.attr("InvalidArgument"))) {
    throw tool::ToolError{
        tool::kExitFailure,
        "the battery made a call its kernel rejects, at " + where(step) + ": " + message,
        "a bug in the module's battery: it must make only calls serving makes"};
  }
  const std::string type = py::str(error.type().attr("__name__"));
  throw tool::ToolError{tool::kExitFailure,
                        "the battery raised " + type + " at " + where(step) + ": " + message,
                        "a bug in the module's battery (zerojit.register_battery)"};
}

int run_python_family(const tool::RunRequest& request) {
  const tool::FamilyConfiguration configuration =
      configure_python_family(request.values, request.arch);
  std::shared_ptr<py::object> battery;
  {
    py::gil_scoped_acquire gil;
    py::object found = py::module_::import("zerojit.tool.battery").attr("battery")();
    if (found.is_none()) {
      throw tool::ConfigurationError(
          "the modules register no battery, and `run` makes a battery's runtime calls",
          "register one with zerojit.register_battery(fn): fn(step) makes one step's calls with "
          "step.call(kernel, *args, **options)");
    }
    battery = hold(std::move(found));
  }
  return tool::run_battery(request, configuration, [&battery](tool::RunStep& step) {
    py::gil_scoped_acquire gil;
    auto handle = std::make_shared<PyRunStep>();
    handle->step = &step;
    try {
      (*battery)(py::cast(handle));
    } catch (py::error_already_set& error) {
      handle->step = nullptr;
      if (handle->failure) std::rethrow_exception(handle->failure);
      throw_as_tool_error(error, step);
    }
    handle->step = nullptr;
    if (handle->failure) std::rethrow_exception(handle->failure);
  });
}

tool::Family python_family() {
  tool::Family family;
  family.name = "python";
  family.summary = "the kernels Python modules register (zerojit.register)";
  tool::FamilyOption module;
  module.flag = "--module";
  module.value_name = "MODULE";
  module.help =
      "A Python module that defines and registers kernels (repeatable, or a "
      "comma-separated list); selects the python family";
  family.options.push_back(module);
  family.configure = configure_python_family;
  family.run = run_python_family;
  family.run_help =
      "Warm up, arm the monitor, and run the battery the modules register "
      "(zerojit.register_battery) through the kernels (on each GPU; without one, through "
      "dispatch alone)";
  return family;
}

// `--module` selects the python family (unless --family says otherwise), as `--examples`
// selects the example family: a module's kernels are never the DSv4 default.
std::vector<std::string> with_family(std::vector<std::string> arguments) {
  std::size_t module = 0;
  for (std::size_t i = 1; i < arguments.size() && arguments[i] != "--"; ++i) {
    const std::string& argument = arguments[i];
    if (argument == "--family" || argument.rfind("--family=", 0) == 0) return arguments;
    if (module == 0 && (argument == "--module" || argument.rfind("--module=", 0) == 0)) {
      module = i;
    }
  }
  if (module != 0) {
    arguments.insert(arguments.begin() + static_cast<std::ptrdiff_t>(module),
                     {"--family", "python"});
  }
  return arguments;
}

int run_cli(const std::vector<std::string>& arguments) {
  std::vector<tool::Family> families = tool::builtin_families();
  families.push_back(python_family());
  std::vector<std::string> storage = with_family(arguments);
  std::vector<char*> argv;
  for (std::string& argument : storage) argv.push_back(argument.data());
  argv.push_back(nullptr);
  // The name the tool was called by (argv[0]): `zerojit` (the console script) or
  // `python -m zerojit`, for --help and the messages.
  tool::ToolOptions options = tool::builtin_tool_options(
      arguments.empty() || arguments[0].empty() ? "python -m zerojit" : arguments[0]);
  options.description =
      "zerojit: warm up, list, run and cache the kernels of zerojit's families (DSv4 by "
      "default, --examples) and of Python modules (--module: Triton, CuTeDSL and CUDA C++)";
  py::gil_scoped_release release;
  return tool::run_cli(static_cast<int>(storage.size()), argv.data(), families, options);
}

}  // namespace

void bind_cli(py::module_& module) {
  module.def("run_cli", &run_cli, py::arg("argv"),
             "the zerojit tool in this interpreter; argv[0] is the program name");
  // A battery step (zerojit.tool.battery.Step), valid during its call.
  py::class_<PyRunStep, std::shared_ptr<PyRunStep>>(module, "RunStep")
      .def_property_readonly("index", [](const PyRunStep& s) { return s.current().index(); })
      .def_property_readonly("seed", [](const PyRunStep& s) { return s.current().seed(); })
      .def_property_readonly("launching",
                             [](const PyRunStep& s) { return s.current().launching(); })
      .def_property_readonly("device", [](const PyRunStep& s) { return s.current().device(); })
      .def_property_readonly(
          "stream",
          [](const PyRunStep& s) { return reinterpret_cast<std::uintptr_t>(s.current().stream()); })
      // The call's key checked against the manifest; on a GPU, launch(stream) then runs it.
      .def("check", [](PyRunStep& self, DynamicKernel& kernel, const std::string& key_text,
                       const std::string& descriptors, py::object launch) {
        std::function<void(cuda::Stream)> run;
        if (!launch.is_none()) {
          run = [&launch](cuda::Stream stream) {
            launch(reinterpret_cast<std::uintptr_t>(stream));
          };
        }
        try {
          self.current().call(kernel, key_text, descriptors, run);
        } catch (const tool::ToolError& error) {
          // The tool's own verdict (a key outside the manifest in error mode): it ends the run
          // with its exit code whatever the battery does with the Python exception.
          self.failure = std::current_exception();
          throw Error(error.message);
        }
      });
}

}  // namespace zerojit::python
