"""``python -m zerojit <command> ...``: the zerojit tool in this interpreter (python/src/cli.cpp),
over zerojit's own families and, with ``--module M``, the kernels that Python modules define and
register (``zerojit.register``), Triton, CuTeDSL and CUDA C++ alike: ``warmup`` (also
``--compile-only`` for a named ``--arch``, into a ``--cache-dir`` pack), ``keys``, ``run`` (the
battery a module registers: zerojit.tool.battery) and ``cache``, with the tool's options, exit
codes and ``--json`` (docs/TOOL.md)."""

import importlib
import sys

from zerojit import _core
from zerojit.runtime import warmup as _warmup

__all__ = ["run", "configure"]


def configure(modules):
    """Imports the modules (each registers its kernels) and returns the registrations as the
    core takes them, and a one-line description. Called by the tool, with the GIL."""
    for name in modules:
        importlib.import_module(name)
    registered = _warmup.registrations()
    if not registered:
        raise ValueError(
            f"the modules {', '.join(modules)} registered no kernel "
            "(call zerojit.register(kernel) at import)"
        )
    kernels = sorted({kernel.name for kernel, _ in registered})
    description = (
        f"Python modules {', '.join(modules)}: {len(kernels)} kernels ({', '.join(kernels)})"
    )
    return _warmup._expanded(None), description


def run(argv, program="python -m zerojit"):
    """Runs the tool over ``argv`` (without the program name); returns its exit code."""
    if not hasattr(_core, "run_cli"):
        sys.stderr.write(
            "python -m zerojit: this build of the module has no tool library (it was built "
            "with -DZEROJIT_BUILD_CLI=OFF); set ZEROJIT_TOOL to a zerojit tool binary\n"
        )
        return 5
    try:
        return _core.run_cli([program, *argv])
    finally:
        from zerojit.languages import workers as _workers

        _workers.shutdown()
