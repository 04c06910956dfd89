// zerojit._core: the compiled half of the zerojit Python package. The package's Python files
// (python/zerojit/) hold the public API: argument names as in the reference implementation,
// output allocation, streams; this module does the work.
#include <pybind11/pybind11.h>

#include "bindings.hpp"

PYBIND11_MODULE(_core, module) {
  module.doc() = "zerojit's compiled core; use the zerojit package rather than this module";
  zerojit::python::register_errors(module);
  zerojit::python::bind_kernels(module);
  zerojit::python::bind_fast_ops(module);
  zerojit::python::bind_benchmark(module);
  zerojit::python::bind_runtime(module);
  zerojit::python::bind_ranks(module);
  zerojit::python::bind_py_kernels(module);
  zerojit::python::bind_kernel_call(module);
  zerojit::python::bind_language_compilers(module);
#ifdef ZEROJIT_PYTHON_CLI
  zerojit::python::bind_cli(module);
#endif
}
