"""CuTeDSL kernels on zerojit's contract: compiled once per fleet, not once per process.

A CuTeDSL kernel is a subclass of ``zerojit.CuteKernel`` that declares, as every owner does:

* ``name`` and ``Key`` (a frozen dataclass of what the code specializes on);
* ``fn``: the ``@cute.jit`` host function, or ``"package.module:function"`` (a serving process
  then never imports the DSL, nor that module), or a configured object's ``@cute.jit`` method,
  ``"package.module:Class.__call__"`` (the compile worker builds ``Class(**program.init)``); it
  takes a ``stream: cuda.CUstream``, which zerojit fills with the call's stream;
* ``dispatch(**arguments) -> Key``: pure; it names the call's arguments it looks at (tensors as
  ``TensorDesc``, scalars as their values);
* ``program(key) -> CuteProgram``: each runtime argument's fake (a ``CuteTensor``, compact or
  strided, its dynamic extents and strides free or named ``CuteSym`` symbols; a scalar type; or
  None for an optional tensor compiled absent), the ``cutlass.Constexpr`` values, the compile
  options and, for a method, the object's constructor arguments;
* ``warmup_space() -> Space`` (optional).

Warmup compiles each key with ``cute.compile`` in worker processes (the target arch set before
the DSL is imported: ``CUTE_DSL_ARCH``), exports it (``export_to_c``) and stores the object in
every cache tier as a CuTeDSL entry; the entry is host machine code, so it is loaded only from
roots zerojit trusts and never from Redis unless the deployment opts in. At warmup the object
is loaded by NVIDIA's CuTeDSL runtime (``libcute_dsl_runtime.so``), and a call runs its
exported host entry from C++ with the argument structs filled from the tensors' descriptors:
no Python and no DSL on the call path. docs/PYTHON.md, "CuTeDSL kernels", walks through one.
"""

import importlib.metadata
import importlib.util
import json
import os
import re
import sys
import threading

from zerojit import _core, languages
from zerojit.languages import workers as _workers
from zerojit.languages.cutedsl import program as _program
from zerojit.languages.cutedsl.program import CuteProgram, CuteSym, CuteTensor
from zerojit.languages.function_owner import FunctionKernel, compile_in_worker
from zerojit.runtime.errors import CompileError, InvalidArgument, UnavailableError

__all__ = ["CuteKernel", "CuteProgram", "CuteSym", "CuteTensor", "cutedsl_version", "prestart"]


class CuteKernel(FunctionKernel):
    """Base of a CuTeDSL kernel; see the module's documentation. One instance per class."""

    _language = "cutedsl"
    _decorator = "@cute.jit"
    _program_type = CuteProgram
    _methods = True

    def _setup_owner(self):
        name = self.name
        self._read_source()
        if len(self._source.stream_params) != 1:
            raise InvalidArgument(
                f"kernel {name}: the @cute.jit function must take exactly one "
                "`stream: cuda.CUstream` parameter (zerojit passes the call's stream there)",
                name,
                "fn",
            )
        self._read_options()
        self._dispatch_names = self._call_names(self.dispatch, "dispatch")
        self._make_launcher(set(self._dispatch_names))
        install_compiler()

    # --- What the base provides ----------------------------------------------------------------
    # kernel(*args, stream=None): checks the call against its key's specialization, fills the
    # exported entry's arguments and runs it; returns None. In C, the call path of every
    # Python-defined kernel (python/src/kernel_call.cpp).

    def _resolve(self, args, options=None):
        seen = self._seen(args, options)
        return self.slot(self.dispatch(**{n: seen[n] for n in self._dispatch_names})), None

    def _resolve_key(self, key, args, options=None):
        return self.slot(key), None

    def _specialize(self, key_text, program):
        return _specialize(self.name, key_text, self._source, program)

    def _prestart_compiler(self, arch):
        prestart(arch)

    def _registered(self):
        # A process that has imported the DSL (an engine whose kernel modules import it) and
        # has a GPU starts the workers' interpreter for device 0 now, so that its DSL import
        # overlaps the model's construction instead of preceding warmup's first compile. A
        # process that never imports the DSL (every fn a string) starts it only at warmup.
        if "cutlass" in sys.modules and _core.device_count() > 0:
            try:
                prestart(_core.device_arch(0))
            except Exception:  # only a hint; warmup says what is wrong with the device
                pass


def _specialize(kernel, key_text, source, program):
    """(the compile request, the call's argument spec): zerojit.languages.cutedsl.program."""
    return _program.specialize(kernel, key_text, source, program)


# --- The compiler zerojit's core calls for CuTeDSL keys -----------------------------------------

_installed = False
_lock = threading.Lock()


def cutedsl_version(arch="sm_90a"):
    """The CuTeDSL version identities name, ``"cutedsl-4.8.1"``, found without importing the
    DSL. Raises UnavailableError when nvidia-cutlass-dsl is not installed."""
    del arch  # one DSL compiles for every arch
    try:
        return "cutedsl-" + importlib.metadata.version("nvidia-cutlass-dsl")
    except importlib.metadata.PackageNotFoundError:
        raise UnavailableError(
            "nvidia-cutlass-dsl is not installed in this Python (pip install "
            "nvidia-cutlass-dsl==4.8.1)"
        ) from None


def _runtime_library():
    """The CuTeDSL runtime library of the installed wheel, or None."""
    try:
        spec = importlib.util.find_spec("nvidia_cutlass_dsl")
    except (ImportError, ValueError):
        return None
    for location in (spec.submodule_search_locations or []) if spec else []:
        for flavour in ("cu13", "cu12"):
            path = os.path.join(location, flavour, "lib", "libcute_dsl_runtime.so")
            if os.path.isfile(path):
                return path
    return None


def _compile(kernel, key_text, function, request, arch):
    """One CuTeDSL key, compiled and exported in a worker process whose DSL was imported for
    `arch`: (object, entry prefix, record, log, s)."""
    if re.fullmatch(r"sm_\d+[a-z]?", arch) is None:
        raise CompileError(
            f"kernel {kernel} [{key_text}]: '{arch}' is no CUDA arch name", kernel, key_text
        )
    message = {
        "arch": arch,
        "dsl_version": cutedsl_version(arch)[len("cutedsl-") :],
        **json.loads(request),
    }
    return compile_in_worker(
        CuteKernel, kernel, key_text, arch, message, env={"CUTE_DSL_ARCH": arch}
    )


def prestart(arch):
    """Starts the compile workers' interpreter for `arch` now (it imports the DSL, seconds on a
    large host), so that the import overlaps what warmup does before its first CuTeDSL compile
    instead of preceding that compile. Does nothing where the DSL is not installed; an
    interpreter no compile used is stopped at the end of the warmup without waiting for it."""
    if re.fullmatch(r"sm_\d+[a-z]?", arch or "") is None:
        return
    try:
        cutedsl_version(arch)
    except UnavailableError:
        return
    _workers.prestart(languages.row("cutedsl"), {"CUTE_DSL_ARCH": arch})


def install_compiler():
    """Installs CuTeDSL's compiler in zerojit's core, and points it at the DSL's runtime
    library (once; every CuteKernel does it)."""
    global _installed
    with _lock:
        if _installed:
            return
        _core.set_language_compiler("cutedsl", cutedsl_version, _compile)
        library = _runtime_library()
        if library is not None:
            _core.set_host_runtime_library("cutedsl", library)
        _installed = True
