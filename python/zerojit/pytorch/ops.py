"""The DSv4 ops as PyTorch custom ops: ``torch.ops.zerojit.<op>``.

Each op is declared once with its schema (mutated arguments marked ``(a!)``; for the kernels whose
arguments are declared with roles in C++, the schema comes from that declaration:
``zerojit._core.fast.SCHEMAS``), implemented for
CUDA tensors by zerojit's launch path and given a fake (meta) implementation, so that
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


# The CUDA implementations: the launch path with PyTorch's current stream (None). The fast
# functions return their outputs; an op returns nothing.


def _indexer_q_fp8(positions, q, cos_sin_cache, weights, scale, q_fp8, weights_out, pdl=False):
    _fast.indexer_q_fp8(positions, q, cos_sin_cache, weights, scale, q_fp8, weights_out, None, pdl)


def _indexer_q_mxfp4(
    positions, q, cos_sin_cache, weights, scale, q_packed, q_scale, weights_out, pdl=False
):
    _fast.indexer_q_mxfp4(
        positions, q, cos_sin_cache, weights, scale, q_packed, q_scale, weights_out, None, pdl
    )


def _dequant_gather(out, k_cache, seq_lens, gather_lens, block_table, offset, pdl=False):
    _fast.dequant_gather(out, k_cache, seq_lens, gather_lens, block_table, None, offset, None, pdl)


def _c4_store(
    state,
    requests,
    positions,
    slots,
    table,
    weight,
    eps,
    cos_sin,
    cache,
    kv_slots,
    fp8_scale,
    pdl=False,
):
    _fast.c4_store(
        state,
        requests,
        positions,
        slots,
        table,
        None,
        weight,
        eps,
        cos_sin,
        cache,
        kv_slots,
        None,
        None,
        fp8_scale,
        None,
        None,
        None,
        pdl,
    )


def _c128_compress(state, requests, positions, slots, table, compressed_kv):
    _fast.c128_compress(state, requests, positions, slots, table, None, compressed_kv, None)


def _c128_store(compressed_kv, positions, slots, weight, eps, cos_sin, cache, kv_slots, fp8_scale):
    _fast.c128_store(
        compressed_kv,
        positions,
        slots,
        weight,
        eps,
        cos_sin,
        cache,
        kv_slots,
        None,
        None,
        fp8_scale,
        None,
        None,
        None,
    )


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


# name -> (schema, CUDA implementation). Arguments marked (a!), (b!), ... are written.
_OPS = {
    "indexer_q_fp8": (
        "(Tensor positions, Tensor q, Tensor cos_sin_cache, Tensor weights, float scale, "
        "Tensor(a!) q_fp8, Tensor(b!) weights_out, bool pdl=False) -> ()",
        _indexer_q_fp8,
    ),
    "indexer_q_mxfp4": (
        "(Tensor positions, Tensor q, Tensor cos_sin_cache, Tensor weights, float scale, "
        "Tensor(a!) q_packed, Tensor(b!) q_scale, Tensor(c!) weights_out, bool pdl=False) -> ()",
        _indexer_q_mxfp4,
    ),
    "dequant_gather": (
        "(Tensor(a!) out, Tensor k_cache, Tensor seq_lens, Tensor? gather_lens, "
        "Tensor block_table, int offset, bool pdl=False) -> ()",
        _dequant_gather,
    ),
    "c4_store": (
        "(Tensor state_cache, Tensor token_to_req_indices, Tensor positions, "
        "Tensor slot_mapping, Tensor block_table, Tensor rms_norm_weight, float rms_norm_eps, "
        "Tensor cos_sin_cache, Tensor(a!) k_cache, Tensor kv_slot_mapping, "
        "Tensor? fp8_scale, bool pdl=False) -> ()",
        _c4_store,
    ),
    "c128_compress": (
        "(Tensor state_cache, Tensor token_to_req_indices, Tensor positions, "
        "Tensor slot_mapping, Tensor block_table, Tensor(a!) compressed_kv) -> ()",
        _c128_compress,
    ),
    "c128_store": (
        "(Tensor compressed_kv, Tensor positions, Tensor slot_mapping, Tensor rms_norm_weight, "
        "float rms_norm_eps, Tensor cos_sin_cache, Tensor(a!) k_cache, Tensor kv_slot_mapping, "
        "Tensor? fp8_scale) -> ()",
        _c128_store,
    ),
}
# The ops derived from their kernels' declarations, with the schemas the C++ side derived.
_OPS.update({name: (schema, _declared(name, schema)) for name, schema in _fast.SCHEMAS.items()})


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
