"""What a CuTeDSL key compiles: the program an owner's ``program(key)`` returns (CuteProgram,
CuteTensor, CuteSym) and the two things zerojit makes of it, the compile request a worker
builds the fakes from (part of the identity) and the call's argument spec the C++ packer checks
every call against (src/languages/cutedsl/packer.cpp).

A tensor is described as the DSL's fake-tensor builders take it: compact in a stride order
(``make_fake_compact_tensor``) or with explicit strides (``make_fake_tensor``), each extent and
stride static (an int) or dynamic (None, or a ``CuteSym`` with its own divisibility and width).
A named ``CuteSym`` is one ``cute.sym_int`` shared by every place the program uses its name, as
an engine reuses one symbol for the same extent of several tensors; the exported entry still
takes each use's value separately, so the packer checks that a call's uses agree.
"""

import dataclasses
import hashlib
import json
import math
import sys
import typing

from zerojit.languages.cutedsl.compile import CUTE_TYPES
from zerojit.languages.function_owner import check_program_names
from zerojit.runtime.errors import InvalidArgument
from zerojit.runtime.types import DType

__all__ = ["CuteProgram", "CuteSym", "CuteTensor", "encode_constant", "specialize"]

SCALARS = ("i32", "i64", "f32", "f64", "bool")


@dataclasses.dataclass(frozen=True)
class CuteSym:
    """A dynamic extent or stride (``cute.sym_int``).

    name: None for a symbol of its own; a name makes it one symbol shared by every extent and
        stride of the program that uses that name (every use must then give the same
        divisibility and width), and a call's values there must agree.
    divisibility: the value is a multiple of it (checked at every call).
    width: 32 or 64 bits; None: 64 where the symbol is used as a stride (the DSL passes strides
        as 64-bit), else 32.
    """

    name: typing.Optional[str] = None
    divisibility: int = 1
    width: typing.Optional[int] = None


@dataclasses.dataclass(frozen=True)
class CuteTensor:
    """A tensor argument as the program compiles it.

    dtype: its element type. shape: per mode an int (static), None (dynamic, a multiple of
    ``divisibility``, ``dynamic_width`` bits) or a CuteSym. stride: None for a compact tensor
    (``make_fake_compact_tensor``: compact in ``stride_order``, the mode of order 0 innermost;
    default row-major), else per mode an int (static), None (dynamic, any value) or a CuteSym
    (``make_fake_tensor``). assumed_align: the data pointer's alignment in bytes. A call must
    pass exactly such a tensor: the static extents and strides as compiled (a mode of extent 1
    takes any static stride), the dynamic ones multiples of their divisibility and within
    their width, each named symbol one value.
    """

    dtype: typing.Any
    shape: tuple
    stride_order: typing.Optional[tuple] = None
    divisibility: int = 1
    dynamic_width: int = 32
    assumed_align: int = 16
    stride: typing.Optional[tuple] = None

    @classmethod
    def strided(cls, dtype, shape, divisibility=1, leading_dim=-1):
        """What engines' ``make_fake_tensor(dtype, shape, divisibility, leading_dim)`` helper
        builds: stride 1 in ``leading_dim``, every other stride dynamic and a multiple of
        ``divisibility`` (which applies to the strides, not to the extents), and the pointer
        aligned to ``divisibility`` elements. ``shape`` is as for CuteTensor (None extents
        take any value)."""
        rank = len(shape)
        leading = leading_dim + rank if leading_dim < 0 else leading_dim
        if not 0 <= leading < rank:
            raise ValueError(f"leading_dim {leading_dim} is no mode of a rank-{rank} tensor")
        stride = tuple(
            1 if d == leading else CuteSym(divisibility=divisibility) for d in range(rank)
        )
        itemsize = max(1, _BITS.get(DType.of(dtype).value, 8) // 8)
        return cls(dtype, tuple(shape), stride=stride, assumed_align=divisibility * itemsize)


_BITS = {"f64": 64, "i64": 64, "u64": 64, "f32": 32, "i32": 32, "u32": 32}
_BITS.update({name: 16 for name in ("f16", "bf16", "i16", "u16")})


@dataclasses.dataclass(frozen=True)
class CuteProgram:
    """The CuTeDSL specialization a key stands for.

    arguments: every runtime parameter of the entry (the stream excepted) -> a CuteTensor, a
        scalar type ("i32", "i64", "f32", "f64", "bool"), or None: an optional tensor compiled
        absent (``Optional[cute.Tensor]``; a call passes None there).
    constexprs: every ``cutlass.Constexpr`` parameter's value: int, float, bool, str, None, a
        zerojit.DType or a type of the DSL (``cutlass.Float32``; the worker gets the DSL's type
        for both), or a tuple of these.
    options: further ``cute.compile`` options (the arch is zerojit's to set).
    init: for an entry that is a method (``fn = "module:Class.__call__"``), the keyword
        arguments its class is constructed with in the compile worker, values as constexprs.
    """

    arguments: typing.Mapping[str, typing.Any]
    constexprs: typing.Mapping[str, typing.Any] = dataclasses.field(default_factory=dict)
    options: str = ""
    init: typing.Optional[typing.Mapping[str, typing.Any]] = None


def encode_constant(value):
    """A constexpr (or constructor) value as canonical JSON, or raises ValueError: a DSL type
    and the zerojit DType naming it encode alike (``{"cutlass": "Float32"}``), so both
    spellings are one identity; tuples and lists become lists (the worker rebuilds tuples)."""
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, DType):  # before str: DType is a str enum
        if value.value not in CUTE_TYPES:
            raise ValueError(f"{value!r} has no CuTeDSL type")
        return {"cutlass": CUTE_TYPES[value.value]}
    if isinstance(value, str):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError("a float constexpr must be finite")
        return value
    if isinstance(value, (tuple, list)):
        return [encode_constant(item) for item in value]
    if isinstance(value, type) and (getattr(value, "__module__", "") or "").split(".")[0] == (
        "cutlass"
    ):
        # Only a type the DSL exports at its top level, so that the worker finds the same one
        # by name (its module is imported: the value came from it).
        name = value.__name__
        if getattr(sys.modules.get("cutlass"), name, None) is value:
            return {"cutlass": name}
        raise ValueError(f"{value!r} is not exported as cutlass.{name}")
    raise ValueError(f"{value!r} is none of the supported values")


_CONSTANT_KINDS = (
    "an int, float, bool, str, None, a zerojit.DType, a type of the DSL (cutlass.Float32) "
    "or a tuple of these"
)


class _Symbols:
    """The program's named symbols in order of first use: name -> [index, CuteSym, as stride]."""

    def __init__(self, fail):
        self.fail, self.named = fail, {}

    def collect(self, name, tensor):
        """Registers the named symbols of a tensor (before any spec is made: a symbol's default
        width depends on whether any tensor uses it as a stride)."""
        uses = [(value, False) for value in tuple(tensor.shape)]
        uses += [(value, True) for value in tuple(tensor.stride or ())]
        for sym, as_stride in uses:
            if not isinstance(sym, CuteSym) or sym.name is None:
                continue
            if not (isinstance(sym.name, str) and sym.name):
                self.fail(name, f"tensor '{name}': a symbol's name is a non-empty str")
            found = self.named.get(sym.name)
            if found is None:
                self.named[sym.name] = [len(self.named), sym, as_stride]
            elif found[1] != sym:
                self.fail(
                    name,
                    f"symbol '{sym.name}' is {found[1]} in one use and {sym} in another: every "
                    "use of a named symbol gives the same divisibility and width",
                )
            else:
                found[2] = found[2] or as_stride

    def index(self, sym):
        return -1 if sym is None or sym.name is None else self.named[sym.name][0]

    def width(self, sym, as_stride):
        if sym.name is not None:
            _, sym, as_stride = self.named[sym.name]
        return sym.width if sym.width is not None else (64 if as_stride else 32)

    def listing(self):
        return [
            {"name": name, "width": self.width(sym, stride), "divisibility": sym.divisibility}
            for name, (_, sym, stride) in self.named.items()
        ]


def _entries(fail, name, values, what):
    """(value or -1, divisibility, CuteSym or None) per mode of a shape or stride."""
    out = []
    for value in values:
        if type(value) is int and value >= 0:
            out.append((value, 1, None))
        elif value is None:
            out.append((-1, 1, None))
        elif isinstance(value, CuteSym):
            if not (type(value.divisibility) is int and value.divisibility >= 1) or (
                value.width not in (None, 32, 64)
            ):
                fail(name, f"tensor '{name}': {value} needs a positive divisibility, width 32/64")
            out.append((-1, value.divisibility, value))
        else:
            fail(
                name,
                f"tensor '{name}': {what} {tuple(values)!r} takes per mode an int >= 0, None or "
                "a zerojit.CuteSym",
            )
    return out


def _tensor_spec(fail, name, tensor, symbols):
    """The tensor's request entry: what the worker builds its fake from and the struct layout
    the export takes (the call's spec adds the symbol names)."""
    try:
        dtype = DType.of(tensor.dtype).value
    except ValueError:
        dtype = None
    if dtype not in CUTE_TYPES:
        fail(
            name,
            f"tensor '{name}' has dtype {tensor.dtype!r}, which zerojit does not pass to CuTeDSL",
        )
    shape = _entries(fail, name, tuple(tensor.shape), "shape")
    if not shape:
        fail(name, f"tensor '{name}' has no modes")
    if tensor.dynamic_width not in (32, 64) or tensor.divisibility < 1 or tensor.assumed_align < 1:
        fail(
            name,
            f"tensor '{name}': dynamic_width is 32 or 64, divisibility and assumed_align positive",
        )
    rank = len(shape)
    explicit = tensor.stride is not None
    if explicit:
        if tensor.stride_order is not None:
            fail(name, f"tensor '{name}': give stride_order (compact) or stride, not both")
        stride = _entries(fail, name, tuple(tensor.stride), "stride")
        if len(stride) != rank:
            fail(name, f"tensor '{name}': {len(stride)} strides for {rank} modes")
        if any(s is not None and symbols.width(s, True) != 64 for _, _, s in stride):
            fail(
                name,
                f"tensor '{name}': a symbol used as a stride is 64-bit (the export passes "
                "strides as int64)",
            )
        order = list(range(rank - 1, -1, -1))
    else:
        order = list(tensor.stride_order or range(rank - 1, -1, -1))
        if sorted(order) != list(range(rank)):
            fail(
                name,
                f"tensor '{name}': stride_order {tuple(order)!r} is no permutation of its modes",
            )
        stride = [(0, 1, None)] * rank
    # None extents take the tensor's divisibility and width.
    shape = [(v, tensor.divisibility if v < 0 and s is None else d, s) for v, d, s in shape]
    widths = {
        tensor.dynamic_width if s is None else symbols.width(s, False) for v, _, s in shape if v < 0
    }
    if len(widths) > 1:
        fail(
            name,
            f"tensor '{name}': its dynamic extents have widths {sorted(widths)}; the export "
            "passes one tensor's dynamic extents at one width",
        )
    if explicit:
        dynamic_strides = [d for d in range(rank) if stride[d][0] < 0]
    else:
        # A compact stride is dynamic when an extent inside it (a mode of lower order) is.
        dynamic_strides, inner_dynamic = [], False
        for mode in sorted(range(rank), key=lambda m: order[m]):
            if inner_dynamic:
                dynamic_strides.append(mode)
            inner_dynamic = inner_dynamic or shape[mode][0] < 0
        dynamic_strides.sort()
    return {
        "kind": "tensor",
        "dtype": dtype,
        "shape": [v for v, _, _ in shape],
        "shape_div": [d for _, d, _ in shape],
        "shape_sym": [symbols.index(s) for _, _, s in shape],
        "stride": [v for v, _, _ in stride] if explicit else None,
        "stride_div": [d for _, d, _ in stride],
        "stride_sym": [symbols.index(s) for _, _, s in stride],
        "stride_order": order,
        "shape_bytes": (widths.pop() if widths else tensor.dynamic_width) // 8,
        "dynamic_strides": dynamic_strides,
        "stride_bytes": 8,
        "assumed_align": tensor.assumed_align,
    }


def specialize(kernel, key_text, source, program):
    """(the compile request as bytes, part of the identity; the call's argument spec)."""
    where = f"kernel {kernel} [{key_text}]"

    def fail(field, problem):
        raise InvalidArgument(f"{where}: {problem}", kernel, field)

    arguments, constexprs = dict(program.arguments), dict(program.constexprs)
    check_program_names(fail, source, arguments, constexprs, "Constexpr")
    symbols = _Symbols(fail)
    for name, value in arguments.items():
        if isinstance(value, CuteTensor):
            symbols.collect(name, value)
    request_arguments, spec = {}, []
    for name, kind in source.params:
        if kind == "stream":
            spec.append({"kind": "stream", "name": name})
        elif kind == "runtime":
            if name not in arguments:
                fail(name, f"the runtime parameter '{name}' has no fake in the program's arguments")
            value = arguments[name]
            if isinstance(value, CuteTensor):
                request_arguments[name] = _tensor_spec(fail, name, value, symbols)
            elif value is None:
                request_arguments[name] = {"kind": "none"}
            elif isinstance(value, str) and value in SCALARS:
                request_arguments[name] = {"kind": "scalar", "type": value}
            else:
                fail(
                    name,
                    f"'{name}' = {value!r}: an argument is a zerojit.CuteTensor, None (an "
                    f"optional tensor compiled absent) or a scalar type ({', '.join(SCALARS)})",
                )
            spec.append(dict(request_arguments[name], name=name))
            if isinstance(value, CuteTensor):  # the packer names a symbol by its index here
                spec[-1]["symbols"] = list(symbols.named)
    encoded = {}
    for name, value in sorted(constexprs.items()):
        try:
            encoded[name] = encode_constant(value)
        except ValueError as error:
            fail(name, f"constexpr '{name}' = {value!r}: {error}; a value is {_CONSTANT_KINDS}")
    if not isinstance(program.options, str) or "--gpu-arch" in program.options:
        fail(
            "options",
            "options are a str of further cute.compile options, without --gpu-arch "
            "(zerojit sets the arch)",
        )
    request = {
        "params": list(source.params),
        "arguments": request_arguments,
        "constexprs": encoded,
        "options": program.options,
        "symbols": symbols.listing(),
    }
    if source.method is not None:
        init = {}
        for name, value in sorted(dict(program.init or {}).items()):
            try:
                init[name] = encode_constant(value)
            except ValueError as error:
                fail("init", f"init '{name}' = {value!r}: {error}; a value is {_CONSTANT_KINDS}")
        request["init"] = init
    elif program.init is not None:
        fail("init", f"init is for an entry that is a method; {source.qualname} is a function")
    # The exported symbols' prefix: a C identifier of the kernel and key, so that entries of
    # different keys never share symbols.
    request["prefix"] = "zj_" + hashlib.sha256(f"{kernel}\0{key_text}".encode()).hexdigest()[:24]
    return json.dumps(request, separators=(",", ":"), sort_keys=True).encode(), spec
