"""Triton kernels on zerojit's contract: warmed ahead of time, launched from C++, never JIT.

A Triton kernel is a subclass of ``zerojit.TritonKernel`` that declares, as every owner does:

* ``name`` and ``Key`` (a frozen dataclass of what the code specializes on);
* ``fn``: the ``@triton.jit`` function, or ``"package.module:function"`` (a process that only
  serves warmed kernels then never imports Triton, nor the module);
* ``call_options`` (optional): the launcher's meta-parameters a call passes by keyword, which
  reach dispatch and grid but not the kernel (``("compress_ratio", ("fp4", False))``);
* ``dispatch(**arguments) -> Key``: pure; it names the call's arguments and options it looks
  at (tensors are seen as ``TensorDesc``, scalars as their values);
* ``program(key) -> TritonProgram``: the specialization the key stands for; what the function
  itself says (a parameter's type annotation, a ``tl.constexpr``'s default) may be left out;
* ``grid(key, **arguments) -> tuple``: the launch grid, pure as dispatch;
* ``warmup_space() -> Space`` (optional): its points describe the call's arguments and options
  (dispatch's and grid's).

A call, ``kernel(x, y, out, n, compress_ratio=4)``, takes the function's runtime parameters
(every parameter not annotated ``tl.constexpr``) in order, those with defaults in the function
optional, then its call options by keyword. The key and grid come from a memo of what dispatch
and grid saw, so Python runs only for inputs it has not seen; every argument is checked against the
specialization (a call that needs another one is a monitor event naming the class and is
refused, never recompiled and never launched on the wrong code), packed as Triton's own
launcher packs it, and launched through the executor cache with ``cuLaunchKernelEx`` and the
compiled kernel's launch attributes. docs/PYTHON.md, "Triton kernels", walks through one.
"""

import ast
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
from zerojit.runtime.types import DType, TensorDesc

__all__ = ["TritonKernel", "TritonProgram", "pointer", "triton_version", "SUPPORTED_TRITON"]

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
# A type annotation's name -> Triton's type (what Triton's binder takes an annotated parameter
# to be: `n: int` is i32, `eps: float` fp32, `flag: bool` u1, `x: tl.bfloat16` bf16).
_ANNOTATED = {
    "bool": "u1",
    "int1": "u1",
    "uint1": "u1",
    "i1": "u1",
    "float8e4nv": "fp8e4nv",
    "float8_e4m3fn": "fp8e4nv",
    "float8e5": "fp8e5",
    "float8_e5m2": "fp8e5",
    "half": "fp16",
    "float16": "fp16",
    "bfloat16": "bf16",
    "float": "fp32",
    "float32": "fp32",
    "double": "fp64",
    "float64": "fp64",
    "int8": "i8",
    "int16": "i16",
    "int": "i32",
    "int32": "i32",
    "int64": "i64",
    "uint8": "u8",
    "uint16": "u16",
    "uint32": "u32",
    "uint64": "u64",
}
_ANNOTATED.update({v: v for v in list(_ANNOTATED.values())})
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

    signature: the runtime parameters of the function -> their Triton types: ``"*fp32"`` (a
        pointer to float32; ``"*bf16"``, ``"*fp8e4nv"``, ``"*i32"``...; ``pointer(dtype)``
        writes one), ``"i32"``, ``"i64"``, ``"u64"`` (an integer's width class), ``"fp32"``,
        ``"i1"`` (a bool). A parameter the function annotates with a type (``n: int``,
        ``eps: tl.float32``, ``x_ptr: "*bf16"``) may be left out: it takes the type Triton's
        binder gives the annotation (``int`` is i32, ``float`` fp32, ``bool`` u1); a type
        given here wins. A runtime parameter given in ``constexprs`` instead is compiled as
        that constant (Triton's ``== 1`` and ``None`` classes) and must be passed as exactly it.
    constexprs: the ``tl.constexpr`` parameters' values (int, float, bool, str or None), and
        runtime parameters specialized to a constant. One with a default in the function may
        be left out: it is compiled with that default, as ``kernel[grid](...)`` without it is.
    options: Triton's compile options: num_warps, num_stages, num_ctas, maxnreg, launch_pdl,
        launch_cooperative_grid, enable_fp_fusion, debug.
    divisible_by_16: the pointer and integer parameters compiled with Triton's divisibility-16
        attribute (a 16-byte aligned base, a multiple of 16), checked at every call: names, or
        one str of comma-separated names (what ``TritonKernel.divisible_by_16`` gives a key).
        None (the default): every pointer parameter, and no integer.
    """

    signature: typing.Mapping[str, str] = dataclasses.field(default_factory=dict)
    constexprs: typing.Mapping[str, typing.Any] = dataclasses.field(default_factory=dict)
    options: typing.Mapping[str, typing.Any] = dataclasses.field(default_factory=dict)
    divisible_by_16: typing.Optional[typing.Union[str, typing.Sequence[str]]] = None


_TRITON_ELEMENTS = {zerojit: triton for triton, zerojit in _POINTEES.items()}


def pointer(dtype):
    """The Triton type of a pointer to ``dtype`` (a zerojit.DType or its name): ``"*bf16"``."""
    name = DType.of(dtype).value
    if name not in _TRITON_ELEMENTS:
        raise InvalidArgument(
            f"no Triton pointer type points to {name} (zerojit launches pointers to "
            f"{', '.join(sorted(_TRITON_ELEMENTS))})",
            "triton",
            "dtype",
        )
    return "*" + _TRITON_ELEMENTS[name]


class TritonKernel(FunctionKernel):
    """Base of a Triton kernel; see the module's documentation. One instance per class."""

    _language = "triton"
    _decorator = "@triton.jit"
    _program_type = TritonProgram

    def _setup_owner(self):
        self._read_source()
        self._read_options()
        self._dispatch_names = self._call_names(self.dispatch, "dispatch")
        self._grid_names = self._call_names(self.grid, "grid", skip=1)
        self._make_launcher(set(self._dispatch_names) | set(self._grid_names), defaults=True)
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

    def divisible_by_16(self, **arguments):
        """The arguments Triton's binder would compile divisible by 16 at this call, as a key
        field: a str of their names in the function's order (``"x_ptr,out_ptr,n"``), which
        ``TritonProgram(divisible_by_16=key.<field>)`` compiles. A tensor (a TensorDesc, as
        dispatch sees it) is divisible when its base address is 16-byte aligned, an integer
        when it is a multiple of 16 (0 included); floats, bools and None never are. Give it,
        from dispatch, the arguments Triton specializes (all, unless the function's
        ``do_not_specialize`` names some): the key then compiles what ``kernel[grid]`` would,
        and the warmup space must reach both classes of each, as serving does."""
        kernel, runtime = self.name, self._source.runtime_params
        divisible = []
        for name, value in arguments.items():
            if name not in runtime:
                raise InvalidArgument(
                    f"kernel {kernel}: divisible_by_16() takes the function's runtime "
                    f"parameters ({', '.join(runtime)}), not '{name}'",
                    kernel,
                    name,
                )
            if value is None or isinstance(value, (bool, float)):
                continue
            if isinstance(value, int) or hasattr(value, "__index__"):
                if int(value) % 16 == 0:
                    divisible.append(name)
                continue
            try:
                desc = TensorDesc.of(value)
            except TypeError:
                raise InvalidArgument(
                    f"kernel {kernel}: divisible_by_16() takes tensors (TensorDesc), integers, "
                    f"floats, bools and None; '{name}' is {type(value).__name__}",
                    kernel,
                    name,
                ) from None
            if desc.alignment >= 16:
                divisible.append(name)
        return ",".join(n for n in runtime if n in divisible)

    def _resolve(self, args, options=None):
        """(slot, geometry) of a call the launcher's memo has not seen: dispatch and grid over
        the arguments and options they name; the block comes from the compiled kernel's launch
        record."""
        seen = self._seen(args, options)
        key = self.dispatch(**{n: seen[n] for n in self._dispatch_names})
        return self._launch_of(key, seen)

    def _resolve_key(self, key, args, options=None):
        return self._launch_of(key, self._seen(args, options))

    def _launch_of(self, key, seen):
        slot = self.slot(key)
        grid = self.grid(key, **{n: seen[n] for n in self._grid_names})
        return slot, (_grid_tuple(self.name, grid), None, 0)

    def _dispatch_point(self, point_arguments):
        """Dispatch at a warmup space's point; a point that describes what grid reads also
        runs grid, so that a launch geometry the serving calls would fail on fails warmup."""
        if not isinstance(point_arguments, dict):
            return self.dispatch(*point_arguments)
        values = self._point_values(point_arguments)
        key = self._point_call(self.dispatch, "dispatch", self._dispatch_names, values)
        if all(name in values for name in self._grid_names):
            grid = self._point_call(self.grid, "grid", self._grid_names, values, (key,))
            _grid_tuple(self.name, grid)
        return key

    def _specialize(self, key_text, program):
        return _specialize(self.name, key_text, self._source, program)


_GRID_LIMIT = 0x7FFFFFFF  # what a launch takes (python/src/kernel_call.cpp, extents)


def _grid_tuple(kernel, grid):
    if isinstance(grid, int) and not isinstance(grid, bool):
        grid = (grid,)
    if (
        not isinstance(grid, (tuple, list))
        or not 1 <= len(grid) <= 3
        or not all(isinstance(g, int) and not isinstance(g, bool) for g in grid)
        or not all(0 <= g <= _GRID_LIMIT for g in grid)
    ):
        raise InvalidArgument(
            f"kernel {kernel}: grid() must return an int or a tuple of 1 to 3 ints in "
            f"[0, 2^31), got {grid!r}",
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
    _complete(fail, source, signature, constexprs)
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
                else f"the runtime parameter '{name}' has no type in the program's signature "
                "(nor a type annotation in the function that names one)",
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
    elif isinstance(divisible, str):
        divisible = [n for n in divisible.split(",") if n]
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


def _complete(fail, source, signature, constexprs):
    """What the program leaves to the function: a runtime parameter's type from its
    annotation, a tl.constexpr's value from its default."""
    for name in source.constexpr_params:
        default = source.defaults.get(name)
        if name in constexprs or default is None:
            continue
        if not default.readable:
            fail(
                name,
                f"the tl.constexpr parameter '{name}' defaults to `{default.text}`, which "
                "zerojit does not read without importing the module (a literal, "
                "tl.constexpr(<literal>) or a module-level name bound to one is read): give "
                "its value in the program's constexprs",
            )
        constexprs[name] = default.value
    for name in source.runtime_params:
        if name not in signature and name not in constexprs:
            annotated = _annotation_type(source.annotations.get(name))
            if annotated is not None:
                signature[name] = annotated


def _annotation_type(text):
    """The Triton type a parameter annotation names, as Triton's binder reads it (``int`` is
    i32, ``tl.float32`` fp32, ``"*bf16"`` a pointer to bf16), or None."""
    if text is None:
        return None
    try:
        written = ast.literal_eval(text)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        written = None
    if isinstance(written, str):
        return _annotated_name(written)
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*", text):
        return _ANNOTATED.get(text.rsplit(".", 1)[-1])
    return None


def _annotated_name(text):
    text = text.strip()
    if text.startswith("const "):
        inner = _annotated_name(text[len("const ") :])
        return "*k" + inner[1:] if inner and inner.startswith("*") else None
    if text.endswith("*") or text.startswith("*"):
        inner = _annotated_name(text[:-1] if text.endswith("*") else text[1:])
        return "*" + inner if inner else None
    if text.startswith("tl."):
        return _annotated_name(text[3:])
    return _ANNOTATED.get(text.replace("_t", ""))


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
