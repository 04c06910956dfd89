"""The DSv4 ops as PyTorch custom ops: ``torch.ops.zerojit.<op>``.

Each op's schema comes from its kernel's arguments, declared once with roles in C++
(``zerojit._core.fast.SCHEMAS``: mutated arguments marked ``(a!)``, vLLM's restated sizes and
flags as ``int?`` and ``bool?``); each is implemented for CUDA tensors by zerojit's launch path
and given a fake (meta) implementation, so that
``torch.compile(fullgraph=True)`` traces through the DSv4 functions of ``zerojit.dsv4`` without a
graph break, FakeTensor mode runs them, and a compiled region captured into a CUDA graph replays
them. The ops write their outputs in place and return nothing, as vLLM's custom ops do; the
allocating functions of ``zerojit.dsv4`` allocate with ``torch.empty`` when traced.

Registered when ``zerojit`` is imported and PyTorch can be imported (set ``ZEROJIT_NO_TORCH=1``
to skip it), through PyTorch's ``Library`` directly: the least dispatcher work per call.
"""

import torch
from torch import library as torch_library

from zerojit import _core
from zerojit.dsv4 import launch as _dsv4_launch

_fast = _core.fast

LIBRARY = torch_library.Library("zerojit", "FRAGMENT")


def _declared(name, schema):
    """The CUDA implementation of an op derived from its kernel's declared arguments: the fast
    op's positional arguments are the schema's, then the stream. The dispatcher passes only the
    arguments the caller gave, so trailing ones left out take the schema's defaults (the launch
    options': ``bool pdl=False``)."""
    function = getattr(_fast, name)
    declared = schema[1 : schema.rindex(") -> ")].split(", ")
    defaults = [part.split("=", 1)[1] == "True" if "=" in part else None for part in declared]

    def implementation(*args):
        function(*args, *defaults[len(args) :], None)

    return implementation


# name -> (schema, CUDA implementation), every op derived from its kernels' declaration, with the
# schema the C++ side derived. Arguments marked (a!), (b!), ... are written.
_OPS = {name: (schema, _declared(name, schema)) for name, schema in _fast.SCHEMAS.items()}


def _fake(*args):
    """The ops only write into their (a!) arguments: tracing needs no output."""
    return None


def _register():
    for name, (schema, implementation) in _OPS.items():
        LIBRARY.define(name + schema)
        LIBRARY.impl(name, implementation, "CUDA")
        torch_library.register_fake(f"zerojit::{name}", _fake, lib=LIBRARY)


def _eager(anchor):
    """The launch path for plain tensors outside tracing (replaces zerojit.dsv4.launch.eager)."""
    return not (
        torch.compiler.is_dynamo_compiling()
        or (isinstance(anchor, torch.Tensor) and type(anchor) is not torch.Tensor)
    )


_register()
_dsv4_launch.eager = _eager
OPS = tuple(_OPS)
