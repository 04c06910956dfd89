"""CuTeDSL kernels on zerojit's contract: compiled once per fleet, not once per process.

A CuTeDSL kernel is a subclass of ``zerojit.CuteKernel`` that declares, as every owner does:

* ``name`` and ``Key`` (a frozen dataclass of what the code specializes on);
* ``fn``: the ``@cute.jit`` host function, or ``"package.module:function"`` (a serving process
  then never imports the DSL, nor that module); it takes a ``stream: cuda.CUstream``, which
  zerojit fills with the call's stream;
* ``dispatch(**arguments) -> Key``: pure; it names the call's arguments it looks at (tensors as
  ``TensorDesc``, scalars as their values);
* ``program(key) -> CuteProgram``: each runtime argument's fake (a ``CuteTensor`` or a scalar
  type), the ``cutlass.Constexpr`` values and the compile options;
* ``warmup_space() -> Space`` (optional).

Warmup compiles each key with ``cute.compile`` in worker processes (the target arch set before
the DSL is imported: ``CUTE_DSL_ARCH``), exports it (``export_to_c``) and stores the object in
every cache tier as a CuTeDSL entry; the entry is host machine code, so it is loaded only from
roots zerojit trusts and never from Redis unless the deployment opts in. At warmup the object
is loaded by NVIDIA's CuTeDSL runtime (``libcute_dsl_runtime.so``), and a call runs its
exported host entry from C++ with the argument structs filled from the tensors' descriptors:
no Python and no DSL on the call path. docs/PYTHON.md, "CuTeDSL kernels", walks through one.
"""

import dataclasses
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import re
import threading
import typing

from zerojit import _core
from zerojit.languages.function_owner import (
    FunctionKernel,
    check_constexpr_values,
    check_program_names,
    compile_in_worker,
)
from zerojit.runtime.errors import CompileError, InvalidArgument, UnavailableError
from zerojit.runtime.types import DType

__all__ = ["CuteKernel", "CuteProgram", "CuteTensor", "cutedsl_version"]

_SCALARS = ("i32", "i64", "f32", "f64", "bool")
_TENSOR_TYPES = (
    "f16",
    "bf16",
    "f32",
    "f64",
    "i8",
    "i16",
    "i32",
    "i64",
    "u8",
    "u16",
    "u32",
    "u64",
    "bool",
    "e4m3",
    "e5m2",
    "ue8m0",
)


@dataclasses.dataclass(frozen=True)
class CuteTensor:
    """A tensor argument as the program compiles it (``make_fake_compact_tensor``).

    dtype: its element type. shape: an int for each static extent, None for each dynamic one.
    stride_order: the order of its strides as CuTeDSL takes it (the mode of order 0 is the
    innermost); None: row-major (the last mode innermost). divisibility: every dynamic extent is
    a multiple of it. dynamic_width: 32 or 64 bits for the dynamic extents. assumed_align: the
    data pointer's alignment in bytes. A call must pass exactly such a tensor: compact in that
    order, the static extents as compiled, the dynamic ones multiples of ``divisibility``.
    """

    dtype: typing.Any
    shape: tuple
    stride_order: typing.Optional[tuple] = None
    divisibility: int = 1
    dynamic_width: int = 32
    assumed_align: int = 16


@dataclasses.dataclass(frozen=True)
class CuteProgram:
    """The CuTeDSL specialization a key stands for.

    arguments: every runtime parameter of the function (the stream excepted) -> a CuteTensor, or
        a scalar type ("i32", "i64", "f32", "f64", "bool").
    constexprs: every ``cutlass.Constexpr`` parameter's value (int, float, bool, str or None).
    options: further ``cute.compile`` options (the arch is zerojit's to set).
    """

    arguments: typing.Mapping[str, typing.Any]
    constexprs: typing.Mapping[str, typing.Any] = dataclasses.field(default_factory=dict)
    options: str = ""


class CuteKernel(FunctionKernel):
    """Base of a CuTeDSL kernel; see the module's documentation. One instance per class."""

    _language = "cutedsl"
    _decorator = "@cute.jit"
    _program_type = CuteProgram

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

    def _specialize(self, key_text, program):
        return _specialize(self.name, key_text, self._source, program)


def _tensor_spec(fail, name, tensor):
    """The tensor's request entry and its call spec (the struct layout the export takes)."""
    try:
        dtype = DType.of(tensor.dtype).value
    except ValueError:
        dtype = None
    if dtype not in _TENSOR_TYPES:
        fail(
            name,
            f"tensor '{name}' has dtype {tensor.dtype!r}, which zerojit does not pass to CuTeDSL",
        )
    shape = tuple(tensor.shape)
    if not shape or not all(e is None or (type(e) is int and e >= 0) for e in shape):
        fail(
            name,
            f"tensor '{name}': shape {shape!r} takes an int per static extent and None per "
            "dynamic one",
        )
    order = (
        tuple(tensor.stride_order)
        if tensor.stride_order is not None
        else tuple(range(len(shape) - 1, -1, -1))
    )
    if sorted(order) != list(range(len(shape))):
        fail(name, f"tensor '{name}': stride_order {order!r} is no permutation of its modes")
    if tensor.dynamic_width not in (32, 64) or tensor.divisibility < 1 or tensor.assumed_align < 1:
        fail(
            name,
            f"tensor '{name}': dynamic_width is 32 or 64, divisibility and assumed_align positive",
        )
    # A compact stride is dynamic when an extent inside it (a mode of lower order) is.
    by_order = sorted(range(len(shape)), key=lambda mode: order[mode])
    dynamic_strides, inner_dynamic = [], False
    for mode in by_order:
        if inner_dynamic:
            dynamic_strides.append(mode)
        inner_dynamic = inner_dynamic or shape[mode] is None
    dynamic_strides.sort()
    shape_bytes = tensor.dynamic_width // 8
    entry = {
        "kind": "tensor",
        "dtype": dtype,
        "shape": [-1 if e is None else e for e in shape],
        "stride_order": list(order),
        "divisibility": tensor.divisibility,
        "shape_bytes": shape_bytes,
        "dynamic_strides": dynamic_strides,
        "stride_bytes": 8,
        "assumed_align": tensor.assumed_align,
    }
    return entry, dict(entry, name=name)


def _specialize(kernel, key_text, source, program):
    where = f"kernel {kernel} [{key_text}]"

    def fail(field, problem):
        raise InvalidArgument(f"{where}: {problem}", kernel, field)

    arguments, constexprs = dict(program.arguments), dict(program.constexprs)
    check_program_names(fail, source, arguments, constexprs, "Constexpr")
    request_arguments, spec = {}, []
    for name, kind in source.params:
        if kind == "stream":
            spec.append({"kind": "stream", "name": name})
        elif kind == "runtime":
            if name not in arguments:
                fail(name, f"the runtime parameter '{name}' has no fake in the program's arguments")
            value = arguments[name]
            if isinstance(value, CuteTensor):
                request_arguments[name], entry = _tensor_spec(fail, name, value)
                spec.append(entry)
            elif value in _SCALARS:
                request_arguments[name] = {"kind": "scalar", "type": value}
                spec.append({"kind": "scalar", "name": name, "type": value})
            else:
                fail(
                    name,
                    f"'{name}' = {value!r}: an argument is a zerojit.CuteTensor or a "
                    f"scalar type ({', '.join(_SCALARS)})",
                )
    check_constexpr_values(fail, constexprs)
    if not isinstance(program.options, str) or "--gpu-arch" in program.options:
        fail(
            "options",
            "options are a str of further cute.compile options, without --gpu-arch "
            "(zerojit sets the arch)",
        )
    # The exported symbols' prefix: a C identifier of the kernel and key, so that entries of
    # different keys never share symbols.
    prefix = "zj_" + hashlib.sha256(f"{kernel}\0{key_text}".encode()).hexdigest()[:24]
    request = json.dumps(
        {
            "params": list(source.params),
            "arguments": request_arguments,
            "constexprs": dict(sorted(constexprs.items())),
            "options": program.options,
            "prefix": prefix,
        },
        separators=(",", ":"),
    )
    return request.encode(), spec


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
