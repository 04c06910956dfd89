"""CPU references of the DSv4 kernels, callable with host tensors.

Each function has the arguments of its GPU counterpart in ``zerojit`` (no ``stream``) and takes
CPU tensors (torch CPU tensors, numpy arrays, anything with ``__dlpack__`` on the host). The
arguments go through the kernel owner's own validation, dispatch and argument packing, and the
C++ reference then runs on the very argument block the GPU kernel would receive: bit-exact for
the indexer-Q, dequant-gather and DCP kernels and for the store stages given the same pooled
rows; the compress stages compare with the tolerances of ``compare_*`` below.

Outputs are allocated and returned as by the GPU functions, except that the compressor
functions return the rows they wrote (kv slots for the stores, token rows for the C128
compress) so a test can hand them to the comparisons.
"""

import functools

from zerojit import _core
from zerojit import dsv4 as _dsv4

# A CPU reference of every function of zerojit.dsv4 (wrapped below, one by one), then the
# comparisons a test checks their outputs with.
__all__ = [
    *_dsv4.__all__,
    "compare_ds_mla_rows",
    "compare_full_rows",
    "compare_compressed_kv",
]


def _on_cpu(function):
    @functools.wraps(function)
    def reference(*args, **kwargs):
        if "stream" in kwargs:
            raise TypeError(
                f"zerojit.dsv4.reference.{function.__name__} runs on the CPU: no stream"
            )
        return function(*args, _reference=True, **kwargs)

    reference.__doc__ = f"CPU reference of zerojit.{function.__name__} (host tensors).\n\n" + (
        function.__doc__ or ""
    )
    return reference


fused_indexer_q_rope_quant = _on_cpu(_dsv4.fused_indexer_q_rope_quant)
fused_indexer_q_rope_quant_fp8 = _on_cpu(_dsv4.fused_indexer_q_rope_quant_fp8)
fused_indexer_q_rope_quant_mxfp4 = _on_cpu(_dsv4.fused_indexer_q_rope_quant_mxfp4)
dequantize_and_gather_k_cache = _on_cpu(_dsv4.dequantize_and_gather_k_cache)
compress_norm_rope_store = _on_cpu(_dsv4.compress_norm_rope_store)
fused_kv_compress_norm_rope_insert_sparse_attn = _on_cpu(
    _dsv4.fused_kv_compress_norm_rope_insert_sparse_attn
)
split_kv_compress_norm_rope_insert_sparse_attn = _on_cpu(
    _dsv4.split_kv_compress_norm_rope_insert_sparse_attn
)
sparse_attn_compress_c128 = _on_cpu(_dsv4.sparse_attn_compress_c128)
sparse_attn_norm_rope_store = _on_cpu(_dsv4.sparse_attn_norm_rope_store)
pack_dcp_topk_candidates = _on_cpu(_dsv4.pack_dcp_topk_candidates)


def compare_ds_mla_rows(expected, actual, page_stride_bytes, kv_cache_block_size, kv_slots):
    """Compares two fp8_ds_mla caches (contiguous host tensors that started from the same
    bytes): identical outside the rows of ``kv_slots``, and within the compressor tolerances
    there. Returns "" when they agree, else the first mismatch."""
    return _core.reference.compare_ds_mla_rows(
        expected, actual, int(page_stride_bytes), int(kv_cache_block_size), list(kv_slots)
    )


def compare_full_rows(
    expected,
    actual,
    page_stride_bytes,
    row_stride_bytes,
    kv_cache_block_size,
    kv_slots,
    store_full_fp8,
):
    """As compare_ds_mla_rows, for full-row caches (bf16, or e4m3 with ``store_full_fp8``);
    strides in bytes."""
    return _core.reference.compare_full_rows(
        expected,
        actual,
        int(page_stride_bytes),
        int(row_stride_bytes),
        int(kv_cache_block_size),
        list(kv_slots),
        bool(store_full_fp8),
    )


def compare_compressed_kv(expected, actual, row_length, rows):
    """Compares two float32 compressed_kv buffers: identical outside ``rows``, within the
    pooling tolerance inside. Returns "" when they agree, else the first mismatch."""
    return _core.reference.compare_compressed_kv(expected, actual, int(row_length), list(rows))
