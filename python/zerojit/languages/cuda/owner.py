"""Your own CUDA kernels on zerojit's core, from Python.

A kernel is a subclass of ``zerojit.Kernel`` that declares, as a C++ owner does:

* ``name``: the kernel's name (in the identity, messages, the monitor and the manifest);
* ``Key``: a frozen dataclass of what the code specializes on (int, bool, str, ``DType``);
* ``params``: the kernel function's parameters, ``(("x", "tensor"), ("n", "i64"), ...)``: a
  call passes exactly these, in this order;
* ``dispatch(**arguments) -> Key``: pure; its parameters name the ``params`` it looks at (a
  tensor, of torch or any DLPack producer, seen as its ``TensorDesc``; a scalar, a mode flag or
  a size, as its value); calls and warmup bind them by name;
* ``program(key) -> Program``: the CUDA source and the function to compile, with the key
  rendered as template arguments (default) or macros, exactly as the C++ core renders a key;
* ``geometry(key, **arguments) -> Geometry``: grid, block and shared memory, pure as dispatch
  (the fast path: memoized with dispatch, the arguments packed in C++ by their kinds); or, for
  a launch that needs arbitrary Python on every call, ``plan(key, *args) -> Launch`` (the slow
  path: the call then takes plan's arguments);
* ``warmup_space() -> Space`` (optional): the descriptors a configuration can produce.

Keys are interned into the C++ core the first time they are seen (here, with the GIL held);
compiles then run in C++ without the GIL, in the same warmup pool as the C++ kernels, through
the same executor cache, disk cache and monitor. A call goes through the one C++ call path of
every Python-defined kernel (as a Triton or CuTeDSL kernel's). See docs/PYTHON.md ("your
kernel in 15 minutes").
"""

import dataclasses
import inspect
import json
import os
import re
import typing

from zerojit import _core
from zerojit.languages.function_owner import is_scalar
from zerojit.languages.owner import KernelOwner
from zerojit.runtime.errors import InvalidArgument
from zerojit.runtime.types import DType, TensorDesc
from zerojit.spaces import Space, next_power_of_two

__all__ = [
    "DType",
    "TensorDesc",
    "Program",
    "Launch",
    "Geometry",
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


class Geometry(typing.NamedTuple):
    """What geometry() returns: grid and block (an int or a tuple of up to 3) and the dynamic
    shared memory in bytes."""

    grid: typing.Any
    block: typing.Any
    shared_memory: int = 0


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
        if not any(kind == "tensor" for _, kind in params):
            raise InvalidArgument(
                f"kernel {name}: the parameters hold no tensor; a launch's first CUDA tensor "
                "selects its device",
                name,
                "params",
            )
        self._param_names = tuple(param for param, _ in params)
        self._params_json = json.dumps(params)
        has_geometry = type(self).geometry is not Kernel.geometry
        has_plan = type(self).plan is not Kernel.plan
        if has_geometry and has_plan:
            raise InvalidArgument(
                f"kernel {name}: define geometry() or plan(), not both", name, "plan"
            )
        self._dispatch_names = _named(self, self.dispatch, "dispatch", self._param_names)
        if has_plan:
            self._make_planned_launcher()
        else:
            self._geometry_names = (
                _named(self, self.geometry, "geometry", self._param_names, skip=1)
                if has_geometry
                else ()
            )
            seen = set(self._dispatch_names) | set(self._geometry_names)
            self._call_names = self._param_names
            self._call_defaults = {}
            self._launcher = _core.kernel_call(
                self._core,
                "cuda",
                list(self._param_names),
                len(self._param_names),
                [param in seen for param in self._param_names],
                self._resolve,
            )

    def _make_planned_launcher(self):
        """The call of an owner that plans every launch in Python: it takes plan()'s
        parameters after the key (those with defaults may be left out)."""
        name = self.name
        signature = list(inspect.signature(self.plan).parameters.values())[1:]
        if any(p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in signature):
            raise InvalidArgument(
                f"kernel {name}: plan(key, ...) takes its arguments by position (no *args, "
                "**kwargs or keyword-only parameters)",
                name,
                "plan",
            )
        self._call_names = tuple(p.name for p in signature)
        self._call_defaults = {p.name: p.default for p in signature if p.default is not p.empty}
        for argument in self._dispatch_names:
            if argument not in self._call_names:
                raise InvalidArgument(
                    f"kernel {name}: dispatch() takes '{argument}', which plan() does not "
                    f"({', '.join(self._call_names)}): a call binds both by name",
                    name,
                    "dispatch",
                )
        self._geometry_names = ()
        self._launcher = _core.kernel_call(
            self._core,
            "cuda",
            list(self._call_names),
            len(self._call_names) - len(self._call_defaults),
            [param in self._dispatch_names for param in self._call_names],
            self._resolve,
            self._plan_call,
            list(self._param_names),
        )

    # --- What the owner writes ----------------------------------------------------------------
    def program(self, key):
        raise NotImplementedError(f"kernel {self.name}: define program()")

    def geometry(self, key, **arguments):
        """The launch geometry of a call: pure, over the parameters it names (tensors as
        TensorDesc), memoized with dispatch. The fast path: the call's arguments are the
        kernel's ``params``, packed by their kinds."""
        raise NotImplementedError(f"kernel {self.name}: define geometry() or plan()")

    def plan(self, key, *args):
        """The slow path, for a launch that needs arbitrary Python on every call (outputs
        allocated here, a result computed): returns a Launch."""
        raise NotImplementedError(f"kernel {self.name}: define geometry() or plan()")

    # --- What the base provides ----------------------------------------------------------------
    # kernel(*args, stream=None): dispatches (from a memo of what dispatch and geometry saw),
    # packs the arguments by ``params`` and launches; returns None, or the plan's ``result``.
    # ``stream``: None (the tensors' current stream), a CUstream handle or an object with
    # .cuda_stream. In C, the call path of every Python-defined kernel
    # (python/src/kernel_call.cpp).
    __call__ = _core.kernel_call_method

    def _resolve(self, args):
        """(slot, geometry) of a call the memo has not seen: dispatch (and geometry) over the
        arguments they name, bound by name as warmup binds a space's points."""
        seen = self._seen(args)
        return self._launch_of(self.dispatch(**{n: seen[n] for n in self._dispatch_names}), seen)

    def _resolve_key(self, key, args, options=None):
        return self._launch_of(key, self._seen(args))

    def _seen(self, args):
        bound = dict(self._call_defaults)
        bound.update(zip(self._call_names, args))
        return {
            n: v if is_scalar(v) else TensorDesc.of(v)
            for n, v in bound.items()
            if n in self._dispatch_names or n in self._geometry_names
        }

    def _launch_of(self, key, seen):
        slot = self.slot(key)
        if type(self).plan is not Kernel.plan:
            return slot, None
        geometry = self.geometry(key, **{n: seen[n] for n in self._geometry_names})
        return slot, _geometry_tuple(self.name, geometry)

    def _point_refusal(self, key, fallback, point):
        """The geometry's checks at a warmup point that describes what it reads: a fallback
        whose geometry refuses the point the key's accepts would refuse that call."""
        if not isinstance(point, dict) or not all(n in point for n in self._geometry_names):
            return None
        if type(self).geometry is Kernel.geometry:
            return None
        values = {n: point[n] for n in self._geometry_names}
        try:
            self.geometry(key, **values)
        except InvalidArgument:
            return None  # the key refuses it too: no call to serve
        try:
            self.geometry(fallback, **values)
        except InvalidArgument as error:
            return str(error)
        return None

    def _plan_call(self, slot, args):
        launch = self.plan(self._keys[slot], *args)
        if not isinstance(launch, Launch):
            raise InvalidArgument(
                f"kernel {self.name}: plan() returned {type(launch).__name__}, not zerojit.Launch",
                self.name,
                "plan",
            )
        return launch.grid, launch.block, launch.shared_memory, tuple(launch.args), launch.result

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
        slot = self._core.intern(
            fields,
            program.path,
            files,
            program.function,
            program.key_as,
            program.macro_prefix,
            [str(o) for o in program.options],
            bool(program.toolkit_headers),
        )
        _core.kernel_call_set_spec(self._launcher, slot, self._params_json)
        return slot


def _named(owner, method, what, params, skip=0):
    """The parameters `method` takes after `skip` leading ones: each names one of `params`,
    since calls and warmup both bind by name."""
    kernel = owner.name
    names = []
    if getattr(method, "__func__", None) is getattr(KernelOwner, method.__name__, None):
        return ()  # not defined: nothing to bind
    for param in list(inspect.signature(method).parameters.values())[skip:]:
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise InvalidArgument(
                f"kernel {kernel}: {what}() must name the arguments it takes (no *args or "
                "**kwargs)",
                kernel,
                what,
            )
        if param.name not in params:
            raise InvalidArgument(
                f"kernel {kernel}: {what}() takes '{param.name}', which is no entry of params "
                f"({', '.join(params)}): calls and warmup bind its arguments by name",
                kernel,
                what,
            )
        names.append(param.name)
    return tuple(names)


def _geometry_tuple(kernel, geometry):
    if isinstance(geometry, tuple) and len(geometry) in (2, 3):
        return tuple(geometry) + (0,) * (3 - len(geometry))
    raise InvalidArgument(
        f"kernel {kernel}: geometry() must return zerojit.Geometry(grid, block, shared_memory), "
        f"got {geometry!r}",
        kernel,
        "geometry",
    )
