"""Your own CUDA kernels on zerojit's core, from Python.

A kernel is a subclass of ``zerojit.Kernel`` that declares, as a C++ owner does:

* ``name``: the kernel's name (in the identity, messages, the monitor and the manifest);
* ``Key``: a frozen dataclass of what the code specializes on (int, bool, str, ``DType``);
* ``params``: the kernel function's parameters, ``(("x", "tensor"), ("n", "i64"), ...)``;
* ``dispatch(*descriptors) -> Key``: pure, over the call's first arguments (as many as
  dispatch takes): a tensor (torch, or any DLPack producer) as its ``TensorDesc``, a scalar (a
  mode flag, a size) as its value; the memo of dispatch's results is keyed by both;
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
import inspect
import numbers
import os
import re
import typing

from . import _core
from ._errors import InvalidArgument
from ._owner import KernelOwner
from ._types import DType, TensorDesc
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
        return cls(
            source=source,
            function=function,
            path=os.path.relpath(file, root),
            headers=headers,
            **kwargs,
        )


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


def _is_scalar(value):
    return value is None or isinstance(value, numbers.Number)


_PARAM_KINDS = ("tensor", "i32", "i64", "u32", "u64", "f32", "f64", "bool", "pointer")


class Kernel(KernelOwner):
    """Base of a Python kernel; see the module's documentation. One instance per class."""

    params: tuple = ()

    def _setup_owner(self):
        name = self.name
        params = []
        for entry in self.params:
            if not isinstance(entry, tuple) or len(entry) != 2 or entry[1] not in _PARAM_KINDS:
                raise InvalidArgument(
                    f"kernel {name}: parameter {entry!r} must be (name, kind) with kind one of "
                    f"{', '.join(_PARAM_KINDS)}",
                    name,
                    "params",
                )
            params.append((str(entry[0]), entry[1]))
        self._core.set_params(params)
        self._capsule = self._core.capsule
        self._dispatched = {}  # descriptors -> (key, slot)
        dispatch_params = inspect.signature(self.dispatch).parameters.values()
        self._described = sum(
            1 for p in dispatch_params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        )

    # --- What the owner writes ----------------------------------------------------------------
    def program(self, key):
        raise NotImplementedError(f"kernel {self.name}: define program()")

    def plan(self, key, *args):
        raise NotImplementedError(f"kernel {self.name}: define plan()")

    # --- What the base provides ----------------------------------------------------------------
    def __call__(self, *args, stream=None):
        """Dispatches, plans and launches; returns the plan's ``result``. ``stream``: None
        (the tensors' current stream), a CUstream handle or an object with .cuda_stream."""
        # Tensors (any DLPack producer) reach dispatch as descriptors, scalars as their values.
        descriptors = tuple(
            [a if _is_scalar(a) else TensorDesc.of(a) for a in args[: self._described]]
        )
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
        _core.launch(
            self._capsule,
            slot,
            launch.grid,
            launch.block,
            launch.shared_memory,
            stream,
            launch.args,
        )
        return launch.result

    def _intern(self, key, fields):
        program = self.program(key)
        if not isinstance(program, Program):
            raise InvalidArgument(
                f"kernel {self.name}: program() returned {type(program).__name__}, not "
                "zerojit.Program",
                self.name,
                "program",
            )
        files = [(program.path, program.source)]
        files += [(path, text) for path, text in program.headers.items() if path != program.path]
        return self._core.intern(
            fields,
            program.path,
            files,
            program.function,
            program.key_as,
            program.macro_prefix,
            [str(o) for o in program.options],
            bool(program.toolkit_headers),
        )
