"""The DeepSeek-V4 attention-side kernels, with the argument names of vLLM's implementation.

Each function takes tensors through DLPack (``torch.Tensor``, or anything with
``__dlpack__``), validates them exactly as the C++ API does (a bad argument raises
``zerojit.InvalidArgument``, a ``ValueError``, naming the kernel and the argument), and launches
on the tensors' device and PyTorch's current stream of that device (or ``stream=``, a
``torch.cuda.Stream`` or a raw ``CUstream`` handle). Outputs are allocated where vLLM's function
allocates them, and returned.

A call whose compile key was not warmed up compiles at run time: a monitor event (an error in
monitor mode ``error``) and always an error while the stream captures a CUDA graph.

The same functions run the CPU reference on host tensors: see ``zerojit.dsv4.reference``.
"""

from zerojit.dsv4 import launch as _launch
from zerojit.dsv4.compressors import (
    compress_norm_rope_store,
    fused_kv_compress_norm_rope_insert_sparse_attn,
    sparse_attn_compress_c128,
    sparse_attn_norm_rope_store,
    split_kv_compress_norm_rope_insert_sparse_attn,
)
from zerojit.runtime import errors as _errors
from zerojit.runtime.tensors import empty, is_torch_tensor, shape_of, torch_module

__all__ = [
    "fused_indexer_q_rope_quant",
    "fused_indexer_q_rope_quant_fp8",
    "fused_indexer_q_rope_quant_mxfp4",
    "dequantize_and_gather_k_cache",
    "compress_norm_rope_store",
    "fused_kv_compress_norm_rope_insert_sparse_attn",
    "split_kv_compress_norm_rope_insert_sparse_attn",
    "sparse_attn_compress_c128",
    "sparse_attn_norm_rope_store",
    "pack_dcp_topk_candidates",
]

MXFP4_BLOCK_SIZE = 32


# --- Indexer-Q RoPE + quant (spec section 1) -------------------------------------------------


def fused_indexer_q_rope_quant_fp8(
    positions,
    index_q,
    index_q_cos_sin_cache,
    index_weights,
    index_weights_softmax_scale,
    index_weights_head_scale,
    index_q_fp8,
    index_weights_out,
    *,
    stream=None,
    pdl=False,
    _reference=False,
):
    """RoPE + FP8 quantization of the indexer query into caller-allocated outputs.

    ``index_q_fp8``: ``[T, H, D]`` float8_e4m3fn (or uint8); ``index_weights_out``: ``[T, H]``
    float32 = weights * q_scale * softmax_scale * head_scale. ``pdl``: launch with programmatic
    dependent launch.
    """
    scale = float(index_weights_softmax_scale) * float(index_weights_head_scale)
    args = (positions, index_q, index_q_cos_sin_cache, index_weights, scale, index_q_fp8)
    if _reference:
        _launch.cpu.indexer_q_fp8(*args, index_weights_out)
    elif _launch.eager(index_q):
        _launch.fast.indexer_q_fp8(*args, index_weights_out, pdl, stream)
    else:
        _launch.torch_ops().indexer_q_fp8(*args, index_weights_out, bool(pdl))


def fused_indexer_q_rope_quant_mxfp4(
    positions,
    index_q,
    index_q_cos_sin_cache,
    index_weights,
    index_weights_softmax_scale,
    index_weights_head_scale,
    index_q_packed,
    index_q_scale,
    index_weights_out,
    *,
    stream=None,
    pdl=False,
    _reference=False,
):
    """RoPE + MXFP4 quantization of the indexer query into caller-allocated outputs.

    ``index_q_packed``: ``[T, H, D/2]`` uint8 (two E2M1 codes a byte, low nibble first);
    ``index_q_scale``: ``[T, H, D/32]`` uint8 UE8M0 exponents; ``index_weights_out``: ``[T, H]``
    float32 = weights * softmax_scale * head_scale. ``pdl``: launch with programmatic dependent
    launch.
    """
    scale = float(index_weights_softmax_scale) * float(index_weights_head_scale)
    args = (positions, index_q, index_q_cos_sin_cache, index_weights, scale, index_q_packed)
    if _reference:
        _launch.cpu.indexer_q_mxfp4(*args, index_q_scale, index_weights_out)
    elif _launch.eager(index_q):
        _launch.fast.indexer_q_mxfp4(*args, index_q_scale, index_weights_out, pdl, stream)
    else:
        _launch.torch_ops().indexer_q_mxfp4(*args, index_q_scale, index_weights_out, bool(pdl))


def fused_indexer_q_rope_quant(
    positions,
    index_q,
    index_q_cos_sin_cache,
    index_weights,
    index_weights_softmax_scale,
    index_weights_head_scale,
    use_fp4=False,
    *,
    stream=None,
    _reference=False,
):
    """Fused RoPE + quantization of the Lightning Indexer query (vLLM's
    ``fused_indexer_q_rope_quant``).

    Returns ``(q_fp8, weights_out)`` for FP8, or ``((q_packed, q_scale), weights_out)`` for
    MXFP4 (``use_fp4=True``), where a torch ``q_scale`` is viewed as int32 ``[T, H]`` (the four
    UE8M0 bytes of a row, block 0 in the low byte) as DeepGEMM takes it.
    """
    if not _reference and _launch.eager(index_q):
        # The outputs are allocated in C++ (the tensors' framework's allocator).
        scale = float(index_weights_softmax_scale) * float(index_weights_head_scale)
        args = (positions, index_q, index_q_cos_sin_cache, index_weights, scale)
        if not use_fp4:
            return _launch.fast.indexer_q_fp8(*args, None, None, False, stream)
        q_packed, q_scale, weights_out = _launch.fast.indexer_q_mxfp4(
            *args, None, None, None, False, stream
        )
        return (q_packed, _scales_as_int32(q_scale)), weights_out
    kernel = "dsv4.indexer_q_mxfp4" if use_fp4 else "dsv4.indexer_q_fp8"
    tokens, heads, head_dim = shape_of(index_q, kernel, "q", 3)
    index_weights_out = empty(index_weights, shape_of(index_weights, kernel, "weights", 2), "f32")
    if not use_fp4:
        index_q_fp8 = empty(index_q, (tokens, heads, head_dim), "e4m3")
        fused_indexer_q_rope_quant_fp8(
            positions,
            index_q,
            index_q_cos_sin_cache,
            index_weights,
            index_weights_softmax_scale,
            index_weights_head_scale,
            index_q_fp8,
            index_weights_out,
            stream=stream,
            _reference=_reference,
        )
        return index_q_fp8, index_weights_out
    if head_dim % MXFP4_BLOCK_SIZE != 0:
        raise _errors.InvalidArgument(
            f"{kernel}: argument 'q': head_dim {head_dim} must be a multiple of the MXFP4 "
            f"block size {MXFP4_BLOCK_SIZE}",
            kernel,
            "q",
        )
    scale_blocks = head_dim // MXFP4_BLOCK_SIZE
    index_q_packed = empty(index_q, (tokens, heads, head_dim // 2), "u8")
    index_q_scale = empty(index_q, (tokens, heads, scale_blocks), "u8")
    fused_indexer_q_rope_quant_mxfp4(
        positions,
        index_q,
        index_q_cos_sin_cache,
        index_weights,
        index_weights_softmax_scale,
        index_weights_head_scale,
        index_q_packed,
        index_q_scale,
        index_weights_out,
        stream=stream,
        _reference=_reference,
    )
    return (index_q_packed, _scales_as_int32(index_q_scale)), index_weights_out


def _scales_as_int32(q_scale):
    """A torch ``[T, H, D/32]`` uint8 scale tensor viewed as DeepGEMM takes it: int32 ``[T, H]``
    when D/32 == 4 (int32 ``[T, H, D/128]`` otherwise); other tensors as they are."""
    if is_torch_tensor(q_scale) and q_scale.shape[-1] % 4 == 0:
        scales = q_scale.view(torch_module().int32)
        return scales.squeeze(-1) if scales.shape[-1] == 1 else scales
    return q_scale


# --- Dequantize + gather of the paged K cache (spec section 2) -------------------------------


def dequantize_and_gather_k_cache(
    out,
    k_cache,
    seq_lens,
    gather_lens,
    block_table,
    block_size,
    offset=0,
    *,
    stream=None,
    pdl=False,
    _reference=False,
):
    """Dequantizes the trailing ``gather_lens[r]`` tokens (all ``seq_lens[r]`` when
    ``gather_lens`` is None) of each request's fp8_ds_mla K cache into
    ``out[r, offset + i, :]`` (bf16, 512 wide). Writes ``out`` in place; returns None. Rows
    outside ``[offset, offset + G)`` are untouched. ``block_size`` must equal
    ``k_cache.shape[1]``. ``pdl``: launch with programmatic dependent launch.
    """
    args = (out, k_cache, seq_lens, gather_lens, block_table, block_size, offset)
    if _reference:
        _launch.cpu.dequant_gather(*args)
    elif _launch.eager(out):
        _launch.fast.dequant_gather(*args, pdl, stream)
    else:
        kernel = "dsv4.dequant_gather"
        _launch.torch_ops().dequant_gather(
            out,
            k_cache,
            seq_lens,
            gather_lens,
            block_table,
            _check_block_size(k_cache, block_size, kernel),
            _launch.integer(offset, kernel, "offset"),
            bool(pdl),
        )


def _check_block_size(k_cache, block_size, kernel):
    """Under tracing the block size is checked here, where the tensors' shapes are known (the
    op checks it again when it runs). Returns it as an int (or None)."""
    block_size = _launch.optional_integer(block_size, kernel, "block_size")
    if block_size is not None and block_size != k_cache.shape[1]:
        raise _errors.InvalidArgument(
            f"{kernel}: argument 'block_size': must equal k_cache.shape[1] = "
            f"{k_cache.shape[1]}, got {block_size}",
            kernel,
            "block_size",
        )
    return block_size


# --- DCP top-k candidate packing (spec section 12) -------------------------------------------


def pack_dcp_topk_candidates(
    logits,
    topk_indices,
    packed,
    dcp_rank,
    dcp_world_size,
    cp_interleave,
    row_starts=None,
    *,
    stream=None,
    pdl=False,
    _reference=False,
):
    """Turns this rank's local top-k indices into ``(score, global id)`` float pairs:
    ``packed[r, c] = (logits[r, l + row_start], float(global(l)))`` for ``l =
    topk_indices[r, c] >= 0``, and ``(-inf, -1.0)`` for -1. ``packed`` ``[R, K, 2]`` float32 is
    allocated when None. ``pdl``: launch with programmatic dependent launch. Returns ``packed``.
    """
    if not _reference and _launch.eager(logits):
        return _launch.fast.dcp_pack(
            logits,
            topk_indices,
            packed,
            dcp_rank,
            dcp_world_size,
            cp_interleave,
            row_starts,
            pdl,
            stream,
        )
    kernel = "dsv4.dcp_pack"
    if packed is None:
        rows, topk = shape_of(topk_indices, kernel, "topk_indices", 2)
        packed = empty(logits, (rows, topk, 2), "f32")
    if _reference:
        _launch.cpu.dcp_pack(
            logits, topk_indices, packed, dcp_rank, dcp_world_size, cp_interleave, row_starts
        )
    else:
        _launch.torch_ops().dcp_pack(
            logits,
            topk_indices,
            packed,
            _launch.integer(dcp_rank, kernel, "dcp_rank"),
            _launch.integer(dcp_world_size, kernel, "dcp_world_size"),
            _launch.integer(cp_interleave, kernel, "cp_interleave"),
            row_starts,
            bool(pdl),
        )
    return packed
