"""Your own CUDA kernels on zerojit's core, from Python.

A kernel is a subclass of ``zerojit.Kernel`` that declares, as a C++ owner does:

* ``name``: the kernel's name (in the identity, messages, the monitor and the manifest);
* ``Key``: a frozen dataclass of what the code specializes on (int, bool, str, ``DType``);
* ``params``: the kernel function's parameters, ``(("x", "tensor"), ("n", "i64"), ...)``;
* ``dispatch(*descriptors) -> Key``: pure, over the ``TensorDesc`` of the call's first
  tensors (as many as dispatch takes);
* ``program(key) -> Program``: the CUDA source and the function to compile, with the key
  rendered as template arguments (default) or macros, exactly as the C++ core renders a key;
* ``plan(key, *args) -> Launch``: grid, block, shared memory and the argument tuple;
* ``warmup_space() -> Space`` (optional): the descriptors a configuration can produce.

Keys are interned into the C++ core the first time they are seen (here, with the GIL held);
compiles then run in C++ without the GIL, in the same warmup pool as the C++ kernels, through
the same executor cache, disk cache and monitor. See docs/PYTHON.md ("your kernel in 15
minutes").
"""

import dataclasses
import enum
import inspect
import os
import re
import typing

from . import _core
from ._errors import Error, InvalidArgument
from .spaces import Space, next_power_of_two

__all__ = [
    "DType",
    "TensorDesc",
    "Program",
    "Launch",
    "Kernel",
    "Space",
    "next_power_of_two",
]


class DType(str, enum.Enum):
    """zerojit's element types; the value is the name C++ keys print (``DType.f32 == "f32"``)."""

    boolean = "bool"
    i8 = "i8"
    i16 = "i16"
    i32 = "i32"
    i64 = "i64"
    u8 = "u8"
    u16 = "u16"
    u32 = "u32"
    u64 = "u64"
    f16 = "f16"
    bf16 = "bf16"
    f32 = "f32"
    f64 = "f64"
    e4m3 = "e4m3"
    e5m2 = "e5m2"
    e2m1x2 = "e2m1x2"
    ue8m0 = "ue8m0"

    def __str__(self):
        return self.value

    @classmethod
    def of(cls, value):
        """A DType from a DType, its name, or a ``torch.dtype``."""
        if isinstance(value, cls):
            return value
        if isinstance(value, str):
            try:
                return cls(value)
            except ValueError:
                raise ValueError(f"'{value}' is not a zerojit dtype name") from None
        found = _torch_dtypes().get(value)
        if found is None:
            raise ValueError(f"{value!r} has no zerojit dtype")
        return found


_TORCH_NAMES = {
    "bool": "bool", "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
    "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64", "float16": "f16",
    "bfloat16": "bf16", "float32": "f32", "float64": "f64", "float8_e4m3fn": "e4m3",
    "float8_e5m2": "e5m2", "float4_e2m1fn_x2": "e2m1x2", "float8_e8m0fnu": "ue8m0",
}
_torch_map = None


def _torch_dtypes():
    """torch.dtype -> DType, built once PyTorch is imported (never imports it itself)."""
    global _torch_map
    if _torch_map is None:
        import sys

        torch = sys.modules.get("torch")
        if torch is None:
            return {}
        _torch_map = {
            getattr(torch, name): DType(ours)
            for name, ours in _TORCH_NAMES.items()
            if hasattr(torch, name)
        }
    return _torch_map


class TensorDesc(typing.NamedTuple):
    """What dispatch sees of a tensor: dtype, shape, strides (in elements) and the alignment
    of its base address in bytes (the largest power of two dividing it, at most 256), as the
    C++ TensorDesc. A tuple, so that building one per call costs little."""

    dtype: DType
    shape: tuple
    strides: tuple
    alignment: int = 256

    @classmethod
    def contiguous(cls, dtype, shape, alignment=256):
        shape = tuple(int(s) for s in shape)
        strides, step = [], 1
        for extent in reversed(shape):
            strides.append(step)
            step *= max(extent, 1)
        return cls(DType.of(dtype), shape, tuple(reversed(strides)), int(alignment))

    @classmethod
    def of(cls, tensor):
        """The descriptor of a torch.Tensor (or a TensorDesc, returned as it is)."""
        if isinstance(tensor, TensorDesc):
            return tensor
        try:
            dtype = _torch_dtypes()[tensor.dtype]
            pointer = tensor.data_ptr()
        except (KeyError, AttributeError, TypeError):
            raise TypeError(
                f"cannot describe {type(tensor).__name__}: dispatch takes torch tensors "
                "(or TensorDesc) of a zerojit dtype"
            ) from None
        alignment = 256 if pointer == 0 else min(pointer & -pointer, 256)
        return cls(dtype, tuple(tensor.shape), tuple(tensor.stride()), alignment)

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def numel(self):
        count = 1
        for extent in self.shape:
            count *= extent
        return count

    def is_contiguous(self):
        """Row-major and packed (extents of 1 may have any stride), as the C++ check."""
        expected = 1
        for extent, stride in zip(reversed(self.shape), reversed(self.strides)):
            if extent != 1 and stride != expected:
                return False
            expected *= extent
        return True


_INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.MULTILINE)


@dataclasses.dataclass(frozen=True)
class Program:
    """What NVRTC compiles for a key.

    source: the CUDA source text. path: the name it has in the program identity and in
    ``#include`` resolution (relative, e.g. ``"mykernels/axpby.cu"``). headers: further files
    the source includes with ``#include "..."``, as {path: text}. function: the ``__global__``
    function (with its namespace). key_as: ``"template"`` (``function<field, ...>``, fields in
    declaration order), ``"macros"`` (``-D<PREFIX><FIELD>=value`` options) or ``"none"``.
    options: further NVRTC options. toolkit_headers: the source includes CUDA toolkit headers
    (``<cuda_fp16.h>``, ...).
    """

    source: str
    function: str
    path: str = "kernel.cu"
    headers: typing.Mapping[str, str] = dataclasses.field(default_factory=dict)
    key_as: str = "template"
    macro_prefix: str = "ZJ_"
    options: typing.Sequence[str] = ()
    toolkit_headers: bool = False

    @classmethod
    def from_file(cls, file, function, root=None, **kwargs):
        """The program of a source file: its path relative to ``root`` (default: its folder)
        names it, and every ``#include "..."`` it reaches under ``root`` becomes a header."""
        file = os.path.abspath(os.fspath(file))
        root = os.path.abspath(os.fspath(root)) if root is not None else os.path.dirname(file)
        headers, pending = {}, []

        def read(path):
            with open(path, encoding="utf-8") as handle:
                return handle.read()

        source = read(file)
        pending.extend(_INCLUDE.findall(source))
        while pending:
            name = pending.pop()
            full = os.path.join(root, name)
            if name in headers or not os.path.isfile(full):
                continue  # a toolkit or system header, or one already read
            headers[name] = read(full)
            pending.extend(_INCLUDE.findall(headers[name]))
        return cls(source=source, function=function, path=os.path.relpath(file, root),
                   headers=headers, **kwargs)


class Launch(typing.NamedTuple):
    """What plan() returns: grid and block (an int or a tuple of up to 3), the arguments in
    the order of ``params`` (tensors, ints, floats, bools), the dynamic shared memory in bytes
    and what the call returns (e.g. an output tensor the plan allocated)."""

    grid: typing.Any
    block: typing.Any
    args: tuple
    shared_memory: int = 0
    result: typing.Any = None


_DISPATCH_MEMO = 4096  # descriptor tuples remembered per kernel
_FIELD_KINDS = {bool: "bool", int: "int", str: "str", DType: "dtype"}
_PARAM_KINDS = ("tensor", "i32", "i64", "u32", "u64", "f32", "f64", "bool", "pointer")


def _field_kind(kernel, field, annotation):
    if isinstance(annotation, str):  # from __future__ import annotations
        annotation = {"bool": bool, "int": int, "str": str, "DType": DType,
                      "zerojit.DType": DType}.get(annotation, annotation)
    kind = _FIELD_KINDS.get(annotation)
    if kind is None:
        raise InvalidArgument(
            f"kernel {kernel}: key field '{field}' has type {annotation!r}; a key field is "
            "an int, bool, str or zerojit.DType",
            kernel, field,
        )
    return kind


class Kernel:
    """Base of a Python kernel; see the module's documentation. One instance per class."""

    name: str = ""
    Key: type = None
    params: tuple = ()

    _instances = {}   # class -> its instance
    _names = {}       # kernel name -> class

    def __new__(cls):
        instance = Kernel._instances.get(cls)
        if instance is None:
            instance = super().__new__(cls)
            instance._setup()
            Kernel._instances[cls] = instance
        return instance

    @classmethod
    def instance(cls):
        return cls()

    def _setup(self):
        cls = type(self)
        name = self.name
        if not isinstance(name, str) or not name:
            raise InvalidArgument(f"kernel class {cls.__name__}: set `name` to a non-empty str",
                                  cls.__name__, "name")
        other = Kernel._names.get(name)
        if other is not None and other is not cls:
            raise InvalidArgument(
                f"kernel {name}: the name is taken by {other.__qualname__}; kernel names are "
                "unique in a process", name, "name")
        key = self.Key
        if not (dataclasses.is_dataclass(key) and isinstance(key, type)
                and key.__dataclass_params__.frozen):
            raise InvalidArgument(f"kernel {name}: Key must be a frozen dataclass", name, "Key")
        hints = typing.get_type_hints(key) if not _has_string_annotations(key) else {}
        self._fields = tuple(
            (f.name, _field_kind(name, f.name, hints.get(f.name, f.type)))
            for f in dataclasses.fields(key)
        )
        params = []
        for entry in self.params:
            if (not isinstance(entry, tuple) or len(entry) != 2
                    or entry[1] not in _PARAM_KINDS):
                raise InvalidArgument(
                    f"kernel {name}: parameter {entry!r} must be (name, kind) with kind one of "
                    f"{', '.join(_PARAM_KINDS)}", name, "params")
            params.append((str(entry[0]), entry[1]))
        self._core = _core.dynamic_kernel(name)
        self._core.set_params(params)
        self._capsule = self._core.capsule
        self._slots = {}
        self._dispatched = {}  # descriptors -> (key, slot)
        dispatch_params = inspect.signature(self.dispatch).parameters.values()
        self._described = sum(
            1 for p in dispatch_params
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))
        Kernel._names[name] = cls

    # --- What the owner writes ----------------------------------------------------------------
    def dispatch(self, *descriptors):
        raise NotImplementedError(f"kernel {self.name}: define dispatch()")

    def program(self, key):
        raise NotImplementedError(f"kernel {self.name}: define program()")

    def plan(self, key, *args):
        raise NotImplementedError(f"kernel {self.name}: define plan()")

    def warmup_space(self):
        return None

    # --- What the base provides ----------------------------------------------------------------
    def __call__(self, *args, stream=None):
        """Dispatches, plans and launches; returns the plan's ``result``. ``stream``: None
        (the tensors' current stream), a CUstream handle or an object with .cuda_stream."""
        descriptors = tuple([TensorDesc.of(a) for a in args[: self._described]])
        # Dispatch is pure (the contract), so its result is memoized per descriptors: a
        # repeated shape costs a dict lookup, not a Python dispatch. Bounded: a workload of
        # ever-new shapes (a sweep) starts over rather than growing without limit.
        dispatched = self._dispatched.get(descriptors)
        if dispatched is None:
            key = self.dispatch(*descriptors)
            dispatched = (key, self.slot(key))
            if len(self._dispatched) >= _DISPATCH_MEMO:
                self._dispatched.clear()
            self._dispatched[descriptors] = dispatched
        key, slot = dispatched
        launch = self.plan(key, *args)
        _core.launch(self._capsule, slot, launch.grid, launch.block, launch.shared_memory,
                     stream, launch.args)
        return launch.result

    def slot(self, key):
        """The core's handle of ``key``, interning it (and building its program) on first use."""
        slot = self._slots.get(key)
        if slot is not None:
            return slot
        if type(key) is not self.Key:
            raise InvalidArgument(
                f"kernel {self.name}: dispatch returned {type(key).__name__}, not "
                f"{self.Key.__name__}", self.name, "Key")
        fields = []
        for field, kind in self._fields:
            value = getattr(key, field)
            fields.append((field, kind, _field_value(self.name, field, kind, value)))
        program = self.program(key)
        if not isinstance(program, Program):
            raise InvalidArgument(
                f"kernel {self.name}: program() returned {type(program).__name__}, not "
                "zerojit.Program", self.name, "program")
        files = [(program.path, program.source)]
        files += [(path, text) for path, text in program.headers.items() if path != program.path]
        slot = self._core.intern(
            fields, program.path, files, program.function, program.key_as,
            program.macro_prefix, [str(o) for o in program.options],
            bool(program.toolkit_headers))
        self._slots[key] = slot
        return slot

    def key_text(self, key):
        """The key as the core prints it: ``"dtype=f32, vector_width=4"``."""
        return self._core.slot_text(self.slot(key))

    def identity(self, key, arch="sm_90a"):
        """The key's program identity on ``arch`` (32 hex digits), as the disk cache names it."""
        return self._core.identity(self.slot(key), arch)

    def compile(self, key, arch="sm_90a"):
        """Compiles one key (memory -> disk cache -> NVRTC); returns its origin ("compiled",
        "disk" or "memory")."""
        origin, _ = self._core.compile(self.slot(key), arch)
        return origin

    def expand(self, space=None):
        """The warmup space's keys (dispatch evaluated at every kept point), in first-seen
        order, with its dead axes and point counts."""
        space = space if space is not None else self.warmup_space()
        if space is None:
            raise Error(f"kernel {self.name}: no warmup space (define warmup_space())")
        try:
            return space.expand(self._dispatch_point)
        except Error as error:
            raise type(error)(f"kernel {self.name}: {error}") from error

    def _dispatch_point(self, point_arguments):
        if isinstance(point_arguments, dict):
            return self.dispatch(**point_arguments)
        return self.dispatch(*point_arguments)

    def counters(self):
        """hits, misses, compiles, disk_loads, loads and runtime_jit of this kernel."""
        return self._core.counters_json()


def _has_string_annotations(key):
    return any(isinstance(f.type, str) for f in dataclasses.fields(key))


def _field_value(kernel, field, kind, value):
    if kind == "bool":
        ok = isinstance(value, bool)
    elif kind == "int":
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif kind == "str":
        ok = isinstance(value, str) and not isinstance(value, DType)
    else:
        try:
            value = DType.of(value)
            ok = True
        except ValueError:
            ok = False
        value = value.value if ok else value
    if not ok:
        raise InvalidArgument(
            f"kernel {kernel}: key field '{field}' must be {kind}, got {value!r}", kernel, field)
    # What the C++ key holds: a 64-bit int, a UTF-8 string.
    if kind == "int" and not -(2**63) <= value < 2**63:
        raise InvalidArgument(
            f"kernel {kernel}: key field '{field}' must fit in 64 bits, got {value}", kernel, field)
    if kind == "str":
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidArgument(
                f"kernel {kernel}: key field '{field}' must be valid Unicode text (no lone "
                f"surrogates), got {value!r}", kernel, field) from None
    return value
