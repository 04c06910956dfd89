// `python -m zerojit <command> --module M ...`: the zerojit tool (zerojit::cli) over the kernels
// Python modules define and register (zerojit.register), Triton and CUDA C++ alike, in this
// interpreter: the same commands, options, exit codes and --json as the `zerojit` binary.
// The family's configuration imports the modules (with the GIL) and interns their keys; the
// commands then run without the GIL, and Triton compiles take it back only to reach their
// worker processes.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "bindings.hpp"
#include "py_kernel.hpp"
#include "zerojit/tool.hpp"

namespace py = pybind11;

namespace zerojit::python {
namespace {

tool::FamilyConfiguration configure_python_family(const tool::OptionValues& values,
                                                  const std::optional<std::string>& arch) {
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

int run_cli(const std::vector<std::string>& arguments) {
  tool::Family family;
  family.name = "python";
  family.summary = "the kernels Python modules register (zerojit.register)";
  tool::FamilyOption module;
  module.flag = "--module";
  module.value_name = "MODULE";
  module.help =
      "A Python module that defines and registers kernels (repeatable, or a "
      "comma-separated list)";
  family.options.push_back(module);
  family.configure = configure_python_family;
  const tool::Family families[] = {family};

  std::vector<std::string> storage = arguments;
  std::vector<char*> argv;
  for (std::string& argument : storage) argv.push_back(argument.data());
  argv.push_back(nullptr);
  tool::ToolOptions options;
  options.program = "python -m zerojit";
  options.description = "zerojit over the kernels of Python modules (Triton and CUDA C++)";
  py::gil_scoped_release release;
  return tool::run_cli(static_cast<int>(storage.size()), argv.data(), families, options);
}

}  // namespace

void bind_cli(py::module_& module) {
  module.def("run_cli", &run_cli, py::arg("argv"),
             "the zerojit tool over Python modules' kernels; argv[0] is the program name");
}

}  // namespace zerojit::python
