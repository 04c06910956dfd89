"""Triton kernels on zerojit's contract: warmed ahead of time, launched from C++, never JIT.

A Triton kernel is a subclass of ``zerojit.TritonKernel`` that declares, as every owner does:

* ``name`` and ``Key`` (a frozen dataclass of what the code specializes on);
* ``fn``: the ``@triton.jit`` function, or ``"package.module:function"`` (a process that only
  serves warmed kernels then never imports Triton, nor the module);
* ``dispatch(**arguments) -> Key``: pure; it names the call's arguments it looks at (tensors
  are seen as ``TensorDesc``, scalars as their values);
* ``program(key) -> TritonProgram``: the specialization the key stands for;
* ``grid(key, **arguments) -> tuple``: the launch grid, pure as dispatch;
* ``warmup_space() -> Space`` (optional).

A call, ``kernel(x, y, out, n)``, takes the function's runtime parameters (every parameter not
annotated ``tl.constexpr``) in order. The key and grid come from a memo of what dispatch and
grid saw, so Python runs only for inputs it has not seen; every argument is checked against the
specialization (a call that needs another one is a monitor event naming the class and is
refused, never recompiled and never launched on the wrong code), packed as Triton's own
launcher packs it, and launched through the executor cache with ``cuLaunchKernelEx`` and the
compiled kernel's launch attributes. docs/PYTHON.md, "Triton kernels", walks through one.
"""

import dataclasses
import importlib.metadata
import importlib.util
import json
import os
import re
import subprocess
import threading
import typing

from zerojit import _core
from zerojit.languages.function_owner import (
    FunctionKernel,
    check_constexpr_values,
    check_program_names,
    compile_in_worker,
)
from zerojit.runtime.errors import InvalidArgument, UnavailableError

__all__ = ["TritonKernel", "TritonProgram", "triton_version", "SUPPORTED_TRITON"]

# Triton minor versions whose parameter ABI zerojit launches (docs/PYTHON.md).
SUPPORTED_TRITON = ("3.5", "3.6")

# Triton's element types -> zerojit's, for the dtype a pointer was compiled for.
_POINTEES = {
    "i1": "bool",
    "i8": "i8",
    "i16": "i16",
    "i32": "i32",
    "i64": "i64",
    "u8": "u8",
    "u16": "u16",
    "u32": "u32",
    "u64": "u64",
    "fp16": "f16",
    "bf16": "bf16",
    "fp32": "f32",
    "fp64": "f64",
    "fp8e4nv": "e4m3",
    "fp8e5": "e5m2",
    "fp8e8m0": "ue8m0",
}
_INTEGERS = ("i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64")
_FLOATS = ("fp16", "bf16", "fp32", "fp64")
_BOOLEANS = ("i1", "u1")
# The compile options a key may set, with what each must be.
_OPTIONS = {
    "num_warps": lambda v: type(v) is int and v in (1, 2, 4, 8, 16, 32),
    "num_stages": lambda v: type(v) is int and 1 <= v <= 16,
    "num_ctas": lambda v: type(v) is int and 1 <= v <= 16,
    "maxnreg": lambda v: v is None or (type(v) is int and 16 <= v <= 255),
    "launch_pdl": lambda v: type(v) is bool,
    "launch_cooperative_grid": lambda v: type(v) is bool,
    "enable_fp_fusion": lambda v: type(v) is bool,
    "debug": lambda v: type(v) is bool,
}


@dataclasses.dataclass(frozen=True)
class TritonProgram:
    """The Triton specialization a key stands for.

    signature: every runtime parameter of the function -> its Triton type: ``"*fp32"`` (a
        pointer to float32; ``"*bf16"``, ``"*fp8e4nv"``, ``"*i32"``...), ``"i32"``, ``"i64"``,
        ``"u64"`` (an integer's width class), ``"fp32"``, ``"i1"`` (a bool). A runtime
        parameter given in ``constexprs`` instead is compiled as that constant (Triton's
        ``== 1`` and ``None`` classes) and must be passed as exactly it.
    constexprs: every ``tl.constexpr`` parameter's value (int, float, bool, str or None), and
        runtime parameters specialized to a constant.
    options: Triton's compile options: num_warps, num_stages, num_ctas, maxnreg, launch_pdl,
        launch_cooperative_grid, enable_fp_fusion, debug.
    divisible_by_16: the pointer and integer parameters compiled with Triton's divisibility-16
        attribute (a 16-byte aligned base, a multiple of 16), checked at every call. None (the
        default): every pointer parameter, and no integer.
    """

    signature: typing.Mapping[str, str]
    constexprs: typing.Mapping[str, typing.Any] = dataclasses.field(default_factory=dict)
    options: typing.Mapping[str, typing.Any] = dataclasses.field(default_factory=dict)
    divisible_by_16: typing.Optional[typing.Sequence[str]] = None


class TritonKernel(FunctionKernel):
    """Base of a Triton kernel; see the module's documentation. One instance per class."""

    _language = "triton"
    _decorator = "@triton.jit"
    _program_type = TritonProgram

    def _setup_owner(self):
        self._read_source()
        self._dispatch_names = self._call_names(self.dispatch, "dispatch")
        self._grid_names = self._call_names(self.grid, "grid", skip=1)
        self._make_launcher(set(self._dispatch_names) | set(self._grid_names))
        install_compiler()

    # --- What the owner writes (with program(key)) --------------------------------------------
    def grid(self, key, **arguments):
        raise NotImplementedError(f"kernel {self.name}: define grid()")

    # --- What the base provides ----------------------------------------------------------------
    # kernel(*args, stream=None): checks the call against its key's specialization, packs and
    # launches it; returns None. ``stream``: None (the tensors' current stream), a CUstream
    # handle or an object with .cuda_stream. In C, the call path of every Python-defined kernel
    # (python/src/kernel_call.cpp), so that the call costs the launch and no Python frame of its
    # own.

    def _resolve(self, args):
        """(slot, geometry) of a call the launcher's memo has not seen: dispatch and grid over
        the arguments they name; the block comes from the compiled kernel's launch record."""
        seen = self._seen(args)
        key = self.dispatch(**{n: seen[n] for n in self._dispatch_names})
        slot = self.slot(key)
        grid = self.grid(key, **{n: seen[n] for n in self._grid_names})
        return slot, (_grid_tuple(self.name, grid), None, 0)

    def _specialize(self, key_text, program):
        return _specialize(self.name, key_text, self._source, program)


def _grid_tuple(kernel, grid):
    if isinstance(grid, int) and not isinstance(grid, bool):
        grid = (grid,)
    if (
        not isinstance(grid, (tuple, list))
        or not 1 <= len(grid) <= 3
        or not all(isinstance(g, int) and not isinstance(g, bool) for g in grid)
    ):
        raise InvalidArgument(
            f"kernel {kernel}: grid() must return an int or a tuple of 1 to 3 ints, got {grid!r}",
            kernel,
            "grid",
        )
    return tuple(grid)


def _specialize(kernel, key_text, source, program):
    """The compile request (bytes, part of the identity) and the call's argument specs."""
    where = f"kernel {kernel} [{key_text}]"

    def fail(field, problem):
        raise InvalidArgument(f"{where}: {problem}", kernel, field)

    params = [name for name, _ in source.params]
    signature, constexprs = dict(program.signature), dict(program.constexprs)
    check_program_names(fail, source, signature, constexprs, "tl.constexpr")
    for name in source.constexpr_params:
        if name in signature:
            fail(name, f"'{name}' is a tl.constexpr parameter; give its value in constexprs")
    for name in source.runtime_params:
        if (name in signature) == (name in constexprs):
            fail(
                name,
                f"the runtime parameter '{name}' needs a type in the program's signature "
                "or (to compile it as a constant) a value in its constexprs, not both"
                if name in signature
                else f"the runtime parameter '{name}' has no type in the program's signature",
            )
    check_constexpr_values(fail, constexprs)
    for name, value in program.options.items():
        check = _OPTIONS.get(name)
        if check is None:
            fail(name, f"'{name}' is no Triton option zerojit passes ({', '.join(_OPTIONS)})")
        if not check(value):
            fail(name, f"option {name}={value!r} is out of its range")
    divisible = program.divisible_by_16
    if divisible is None:
        divisible = [n for n, t in signature.items() if t.startswith("*")]
    for name in divisible:
        if name not in signature or not (
            signature[name].startswith("*") or signature[name] in _INTEGERS
        ):
            fail(
                name,
                f"divisible_by_16 names '{name}', which is no pointer or integer "
                "parameter of the signature",
            )
    spec = [
        _argument_spec(fail, name, signature, constexprs, divisible)
        for name in source.runtime_params
    ]
    full = {name: ("constexpr" if name in constexprs else signature[name]) for name in params}
    request = json.dumps(
        {
            "signature": full,
            "constexprs": dict(sorted(constexprs.items())),
            "divisible": sorted(divisible),
            "options": dict(sorted(program.options.items())),
        },
        separators=(",", ":"),
    )
    return request.encode(), spec


def _argument_spec(fail, name, signature, constexprs, divisible):
    """How the call path checks and packs one argument (src/languages/triton/packer.cpp)."""
    return dict(
        zip(
            ("name", "kind", "type", "pointee", "divisible", "constant_none", "constant_value"),
            _argument_fields(fail, name, signature, constexprs, divisible),
        )
    )


def _argument_fields(fail, name, signature, constexprs, divisible):
    """(name, kind, type, pointee dtype, divisible, constant None, constant value)."""
    if name in constexprs:
        value = constexprs[name]
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            fail(
                name,
                f"runtime parameter '{name}' can be compiled as None or an integer "
                f"constant, not {value!r}",
            )
        return (
            name,
            "constant",
            "constexpr",
            "",
            False,
            value is None,
            0 if value is None else value,
        )
    kind_type = signature[name]
    if not isinstance(kind_type, str):
        fail(name, f"the type of '{name}' must be a str such as '*fp32' or 'i32'")
    if kind_type.startswith("*"):
        element = kind_type[2:] if kind_type.startswith("*k") else kind_type[1:]
        if element not in _POINTEES:
            fail(
                name,
                f"'{kind_type}' points to no element type zerojit knows ({', '.join(_POINTEES)})",
            )
        return (name, "pointer", kind_type, _POINTEES[element], name in divisible, False, 0)
    if kind_type in _INTEGERS:
        return (name, "integer", kind_type, "", name in divisible, False, 0)
    if kind_type in _FLOATS:
        return (name, "floating", kind_type, "", False, False, 0)
    if kind_type in _BOOLEANS:
        return (name, "boolean", kind_type, "", False, False, 0)
    fail(
        name,
        f"'{kind_type}' is no Triton parameter type zerojit launches (pointers '*fp32', "
        f"integers {', '.join(_INTEGERS)}, floats {', '.join(_FLOATS)}, 'i1')",
    )


# --- The compiler zerojit's core calls for Triton keys ------------------------------------------

_versions = {}
_versions_lock = threading.Lock()
_installed = False


def _capability(arch):
    match = re.fullmatch(r"sm_(\d+)[a-z]?", arch)
    if match is None:
        raise InvalidArgument(
            f"'{arch}' is no CUDA arch name (sm_90a, sm_100a, ...)", "triton", "arch"
        )
    return int(match.group(1))


def triton_version(arch="sm_90a"):
    """The Triton compiler's version for an arch as identities name it,
    ``"triton-3.6.0+ptxas-12.8.93"``, found without importing Triton (a serving process need
    not have it). Raises UnavailableError when Triton is not installed."""
    with _versions_lock:
        if arch in _versions:
            return _versions[arch]
    try:
        version = importlib.metadata.version("triton")
        spec = importlib.util.find_spec("triton")
    except (importlib.metadata.PackageNotFoundError, ImportError, ValueError):
        version, spec = None, None
    if version is None or spec is None or not spec.submodule_search_locations:
        raise UnavailableError(
            "Triton is not installed in this Python (zerojit compiles Triton "
            f"{', '.join(SUPPORTED_TRITON)}; pip install triton==3.6.0)"
        )
    if not version.startswith(SUPPORTED_TRITON):
        raise UnavailableError(
            f"Triton {version} is installed; zerojit launches Triton {', '.join(SUPPORTED_TRITON)}"
        )
    # Triton picks ptxas by arch, an explicit path first (triton/knobs.py, env_nvidia_tool).
    blackwell = _capability(arch) >= 100
    tool = "ptxas-blackwell" if blackwell else "ptxas"
    variable = "TRITON_PTXAS_BLACKWELL_PATH" if blackwell else "TRITON_PTXAS_PATH"
    bundled = os.path.join(spec.submodule_search_locations[0], "backends", "nvidia", "bin", tool)
    ptxas = None
    for path in (os.environ.get(variable), bundled):
        if path:
            ptxas = _ptxas_version(path)
            if ptxas:
                break
    if ptxas is None:
        raise UnavailableError(f"Triton {version} has no working {tool} ({bundled})")
    text = f"triton-{version}+ptxas-{ptxas}"
    with _versions_lock:
        _versions[arch] = text
    return text


def _ptxas_version(path):
    try:
        output = subprocess.run(
            [path, "--version"], capture_output=True, timeout=60, check=True
        ).stdout.decode("utf-8", "replace")
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.search(r"V(\d+\.\d+\.\d+)", output) or re.search(r"release (\d+\.\d+)", output)
    return match.group(1) if match else None


def _compile(kernel, key_text, function, request, arch):
    """One Triton key, compiled in a worker process: (cubin, entry, launch record, log, s)."""
    message = {
        "capability": _capability(arch),
        "triton_version": importlib.metadata.version("triton"),
        **json.loads(request),
    }
    return compile_in_worker(TritonKernel, kernel, key_text, arch, message)


def install_compiler():
    """Installs Triton's compiler in zerojit's core (once; every TritonKernel does it)."""
    global _installed
    if not _installed:
        _core.set_language_compiler("triton", triton_version, _compile)
        _installed = True
