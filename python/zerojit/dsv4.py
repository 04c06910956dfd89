"""The DeepSeek-V4 attention-side kernels, with the argument names of vLLM's implementation.

Each function takes tensors through DLPack (``torch.Tensor``, or anything with
``__dlpack__``), validates them exactly as the C++ API does (a bad argument raises
``zerojit.InvalidArgument``, a ``ValueError``, naming the kernel and the argument), and launches
on the tensors' device and PyTorch's current stream of that device (or ``stream=``, a
``torch.cuda.Stream`` or a raw ``CUstream`` handle). Outputs are allocated where vLLM's function
allocates them, and returned.

A call whose compile key was not warmed up compiles at run time: a monitor event (an error in
monitor mode ``error``) and always an error while the stream captures a CUDA graph.

The same functions run the CPU reference on host tensors: see ``zerojit.reference``.
"""

import operator
import sys

from . import _core, _errors
from ._tensors import empty, is_torch_tensor, shape_of, torch_module

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
# The compressor kernels are written for the DSv4 main-attention head (spec sections 3-7).
_HEAD_DIM = 512
_ROPE_HEAD_DIM = 64
_QUANT_BLOCK = 64
_TOKEN_STRIDE = 576
_SCALE_DIM = 8

_fast = _core.fast
_cpu = _core.reference


def _eager(anchor):
    """Whether a call on ``anchor`` takes the fast launch path. Under torch.compile (Dynamo
    folds ``is_dynamo_compiling`` to True) and for tensor subclasses such as FakeTensor, the
    call goes through the torch custom op instead (``torch.ops.zerojit``, zerojit.torch_ops),
    which tracing understands. Replaced by zerojit.torch_ops when it registers the ops."""
    return True


# One float32 [1] tensor of ones per device: vLLM's default per-tensor scale of a float8 cache.
_unit_scales = {}


def _unit_scale(k_cache):
    """The default ``fp8_scale`` for a float8_e4m3fn cache, made once per device (the C++ launch
    path calls this when ``fp8_scale`` is None)."""
    device = k_cache.device
    scale = _unit_scales.get(device)
    if scale is None:
        torch = torch_module()
        if torch.cuda.is_current_stream_capturing():
            raise _errors.InvalidArgument(
                "dsv4.compressor: argument 'fp8_scale': is None while a CUDA graph is being "
                "captured; pass fp8_scale, or make one call before capturing",
                "dsv4.compressor",
                "fp8_scale",
            )
        scale = torch.ones(1, dtype=torch.float32, device=device)
        _unit_scales[device] = scale
    return scale


def _torch_ops():
    return sys.modules["torch"].ops.zerojit


def _integer(value, kernel, argument):
    """``value`` as an int, taken as the C++ paths take integers (python/src/arguments.hpp):
    anything with ``__index__`` (int, numpy integers). A float, a string or None is refused
    naming the argument, where ``int()`` would truncate 1.9 and parse "1"."""
    try:
        return operator.index(value)
    except TypeError:
        raise _errors.InvalidArgument(
            f"{kernel}: argument '{argument}': must be an integer, got {type(value).__name__}",
            kernel,
            argument,
        ) from None


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
        _cpu.indexer_q_fp8(*args, index_weights_out)
    elif _eager(index_q):
        _fast.indexer_q_fp8(*args, index_weights_out, stream, pdl)
    else:
        _torch_ops().indexer_q_fp8(*args, index_weights_out, bool(pdl))


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
        _cpu.indexer_q_mxfp4(*args, index_q_scale, index_weights_out)
    elif _eager(index_q):
        _fast.indexer_q_mxfp4(*args, index_q_scale, index_weights_out, stream, pdl)
    else:
        _torch_ops().indexer_q_mxfp4(*args, index_q_scale, index_weights_out, bool(pdl))


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
    if not _reference and _eager(index_q):
        # The outputs are allocated in C++ (the tensors' framework's allocator).
        scale = float(index_weights_softmax_scale) * float(index_weights_head_scale)
        args = (positions, index_q, index_q_cos_sin_cache, index_weights, scale)
        if not use_fp4:
            return _fast.indexer_q_fp8(*args, None, None, stream)
        q_packed, q_scale, weights_out = _fast.indexer_q_mxfp4(*args, None, None, None, stream)
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
    if _reference:
        _cpu.dequant_gather(out, k_cache, seq_lens, gather_lens, block_table, block_size, offset)
    elif _eager(out):
        _fast.dequant_gather(
            out, k_cache, seq_lens, gather_lens, block_table, block_size, offset, stream, pdl
        )
    else:
        _check_block_size(k_cache, block_size, "dsv4.dequant_gather")
        _torch_ops().dequant_gather(
            out,
            k_cache,
            seq_lens,
            gather_lens,
            block_table,
            _integer(offset, "dsv4.dequant_gather", "offset"),
            bool(pdl),
        )


def _check_block_size(k_cache, block_size, kernel):
    """Under tracing the block size is checked here (the custom op's schema omits it)."""
    if block_size is not None and _integer(block_size, kernel, "block_size") != k_cache.shape[1]:
        raise _errors.InvalidArgument(
            f"{kernel}: argument 'block_size': must equal k_cache.shape[1] = "
            f"{k_cache.shape[1]}, got {block_size}",
            kernel,
            "block_size",
        )


# --- Compressors (spec sections 3-7) ----------------------------------------------------------


def fused_kv_compress_norm_rope_insert_sparse_attn(
    state_cache,
    token_to_req_indices,
    positions,
    slot_mapping,
    block_table,
    block_size,
    rms_norm_weight,
    rms_norm_eps,
    cos_sin_cache,
    k_cache,
    kv_slot_mapping,
    kv_cache_block_size=None,
    kv_block_stride=None,
    *,
    fp8_scale=None,
    store_full_kv=None,
    store_full_fp8=None,
    stream=None,
    pdl=False,
    _reference=False,
):
    """C4 (ratio 4): for each boundary token, softmax-pool its 8 overlapping state rows,
    RMSNorm, RoPE the last 64 dims and store one row into ``k_cache`` at
    ``kv_slot_mapping[t]``.

    The cache's dtype picks the layout, as in vLLM: uint8 = fp8_ds_mla pages (448 E4M3 + 64 BF16
    + scale bytes), bfloat16 = full BF16 rows, float8_e4m3fn = full per-tensor-scaled rows
    (``fp8_scale``, default 1). ``block_size``, ``kv_cache_block_size``, ``kv_block_stride``,
    ``store_full_kv`` and ``store_full_fp8`` are optional and, when given, must agree with the
    tensors. ``pdl``: launch with programmatic dependent launch. Writes ``k_cache`` in place;
    returns None.
    """
    args = (
        state_cache,
        token_to_req_indices,
        positions,
        slot_mapping,
        block_table,
        block_size,
        rms_norm_weight,
        rms_norm_eps,
        cos_sin_cache,
        k_cache,
        kv_slot_mapping,
        kv_cache_block_size,
        kv_block_stride,
    )
    if _reference:
        return _cpu.c4_store(
            *args, _default_fp8_scale(k_cache, fp8_scale), store_full_kv, store_full_fp8
        )
    if _eager(state_cache):
        _fast.c4_store(*args, fp8_scale, store_full_kv, store_full_fp8, stream, pdl)
    else:
        _torch_ops().c4_store(
            state_cache,
            token_to_req_indices,
            positions,
            slot_mapping,
            block_table,
            rms_norm_weight,
            float(rms_norm_eps),
            cos_sin_cache,
            k_cache,
            kv_slot_mapping,
            _default_fp8_scale(k_cache, fp8_scale),
            bool(pdl),
        )
    return None


def sparse_attn_compress_c128(
    state_cache,
    token_to_req_indices,
    positions,
    slot_mapping,
    block_table,
    block_size,
    compressed_kv=None,
    *,
    stream=None,
    _reference=False,
):
    """C128 stage 1: softmax-pools the 128 state rows of each boundary token into a float32
    row of ``compressed_kv`` ``[T, 512]`` (allocated when None; rows of other tokens are left
    unwritten). Returns ``compressed_kv``.
    """
    args = (state_cache, token_to_req_indices, positions, slot_mapping, block_table, block_size)
    if not _reference and _eager(state_cache):
        return _fast.c128_compress(*args, compressed_kv, stream)
    if compressed_kv is None:
        (tokens,) = shape_of(slot_mapping, "dsv4.c128_compress", "slot_mapping", 1)
        compressed_kv = empty(state_cache, (tokens, _HEAD_DIM), "f32")
    if _reference:
        return compressed_kv, _cpu.c128_compress(*args, compressed_kv)
    _torch_ops().c128_compress(*args[:5], compressed_kv)
    return compressed_kv


def sparse_attn_norm_rope_store(
    compressed_kv,
    positions,
    slot_mapping,
    rms_norm_weight,
    rms_norm_eps,
    cos_sin_cache,
    k_cache,
    kv_slot_mapping,
    kv_cache_block_size=None,
    kv_block_stride=None,
    *,
    fp8_scale=None,
    store_full_kv=None,
    store_full_fp8=None,
    stream=None,
    _reference=False,
):
    """C128 stage 2: RMSNorm + RoPE of each boundary token's ``compressed_kv`` row, stored into
    ``k_cache`` (fp8_ds_mla pages or full rows, picked by its dtype as for C4). Writes
    ``k_cache`` in place; returns None.
    """
    args = (
        compressed_kv,
        positions,
        slot_mapping,
        rms_norm_weight,
        rms_norm_eps,
        cos_sin_cache,
        k_cache,
        kv_slot_mapping,
        kv_cache_block_size,
        kv_block_stride,
    )
    if _reference:
        return _cpu.c128_store(
            *args, _default_fp8_scale(k_cache, fp8_scale), store_full_kv, store_full_fp8
        )
    if _eager(compressed_kv):
        _fast.c128_store(*args, fp8_scale, store_full_kv, store_full_fp8, stream)
    else:
        _torch_ops().c128_store(
            compressed_kv,
            positions,
            slot_mapping,
            rms_norm_weight,
            float(rms_norm_eps),
            cos_sin_cache,
            k_cache,
            kv_slot_mapping,
            _default_fp8_scale(k_cache, fp8_scale),
        )
    return None


def split_kv_compress_norm_rope_insert_sparse_attn(
    state_cache,
    token_to_req_indices,
    positions,
    slot_mapping,
    block_table,
    block_size,
    compressed_kv,
    rms_norm_weight,
    rms_norm_eps,
    cos_sin_cache,
    k_cache,
    kv_slot_mapping,
    kv_cache_block_size=None,
    kv_block_stride=None,
    *,
    fp8_scale=None,
    store_full_kv=None,
    store_full_fp8=None,
    stream=None,
    pdl=False,
    _reference=False,
):
    """C128 (ratio 128): ``sparse_attn_compress_c128`` into ``compressed_kv`` (allocated when
    None), then ``sparse_attn_norm_rope_store`` into ``k_cache``. ``pdl``: launch both with
    programmatic dependent launch (the launch path; the traced path launches without). Returns
    None.
    """
    if not _reference and _eager(state_cache):
        # Both launches in one call.
        _fast.c128_split(
            state_cache,
            token_to_req_indices,
            positions,
            slot_mapping,
            block_table,
            block_size,
            compressed_kv,
            rms_norm_weight,
            rms_norm_eps,
            cos_sin_cache,
            k_cache,
            kv_slot_mapping,
            kv_cache_block_size,
            kv_block_stride,
            fp8_scale,
            store_full_kv,
            store_full_fp8,
            stream,
            pdl,
        )
        return None
    compressed = sparse_attn_compress_c128(
        state_cache,
        token_to_req_indices,
        positions,
        slot_mapping,
        block_table,
        block_size,
        compressed_kv,
        stream=stream,
        _reference=_reference,
    )
    if _reference:
        compressed = compressed[0]
    return sparse_attn_norm_rope_store(
        compressed,
        positions,
        slot_mapping,
        rms_norm_weight,
        rms_norm_eps,
        cos_sin_cache,
        k_cache,
        kv_slot_mapping,
        kv_cache_block_size,
        kv_block_stride,
        fp8_scale=fp8_scale,
        store_full_kv=store_full_kv,
        store_full_fp8=store_full_fp8,
        stream=stream,
        _reference=_reference,
    )


def _default_fp8_scale(k_cache, fp8_scale):
    """vLLM's compressor passes ones(1) when a float8 cache has no per-tensor scale (the
    reference and traced paths; the launch path does this in C++)."""
    if fp8_scale is not None:
        return fp8_scale
    torch = torch_module()
    if torch is not None and isinstance(k_cache, torch.Tensor):
        if k_cache.dtype == torch.float8_e4m3fn:
            return torch.ones(1, dtype=torch.float32, device=k_cache.device)
    return None


def _check_equal(name, value, supported, kernel="dsv4.compressor"):
    if value is not None and not isinstance(supported, bool):
        value = _integer(value, kernel, name)  # 512.0 is not the integer 512
    if value is not None and value != supported:
        raise _errors.InvalidArgument(
            f"{kernel}: argument '{name}': must be {supported!r} (the DSv4 compressor kernels "
            f"are built for it), got {value!r}",
            kernel,
            name,
        )


def compress_norm_rope_store(
    state_cache,
    num_actual,
    token_to_req_indices,
    positions,
    slot_mapping,
    block_table,
    block_size,
    state_width,
    cos_sin_cache,
    kv_cache,
    k_cache_metadata,
    pdl_kwargs=None,
    head_dim=_HEAD_DIM,
    rope_head_dim=_ROPE_HEAD_DIM,
    compress_ratio=4,
    overlap=None,
    use_fp4_cache=False,
    rms_norm_weight=None,
    rms_norm_eps=1e-6,
    quant_block=_QUANT_BLOCK,
    token_stride=_TOKEN_STRIDE,
    scale_dim=_SCALE_DIM,
    store_full_kv=False,
    store_full_fp8=False,
    fp8_scale=None,
    *,
    stream=None,
    _reference=False,
):
    """The compressor entry point (vLLM's ``compress_norm_rope_store_cutedsl``, same
    arguments): ratio 4 runs the fused C4 kernel; ratio 128 allocates ``compressed_kv``
    ``[num_actual, head_dim]`` and runs C128 compress then the C128 store. Writes ``kv_cache``
    in place; returns None.

    ``k_cache_metadata`` is an object with a ``slot_mapping`` attribute (the compressed-cache
    slots), or that tensor itself. ``pdl_kwargs`` is vLLM's launch options for the Triton path:
    ``{"launch_pdl": True}`` launches the kernels with programmatic dependent launch (each waits
    for the kernel before it in the stream before it reads what that kernel writes; docs/DESIGN.md,
    "Programmatic dependent launch"), anything else without. The shape arguments must be the DSv4
    values the kernels are built for.
    """
    if pdl_kwargs is not None and not hasattr(pdl_kwargs, "get"):
        raise _errors.InvalidArgument(
            "dsv4.compressor: argument 'pdl_kwargs': must be None or a dict such as "
            f"{{'launch_pdl': True}}, got {type(pdl_kwargs).__name__}",
            "dsv4.compressor",
            "pdl_kwargs",
        )
    pdl = bool((pdl_kwargs or {}).get("launch_pdl", False))
    if rms_norm_weight is None:
        raise _errors.InvalidArgument(
            "dsv4.compressor: argument 'rms_norm_weight': is required",
            "dsv4.compressor",
            "rms_norm_weight",
        )
    compress_ratio = _integer(compress_ratio, "dsv4.compressor", "compress_ratio")
    if compress_ratio not in (4, 128):
        raise _errors.InvalidArgument(
            f"dsv4.compressor: argument 'compress_ratio': no compressor for ratio "
            f"{compress_ratio} (DSv4 layers use 4 or 128)",
            "dsv4.compressor",
            "compress_ratio",
        )
    if use_fp4_cache:
        raise _errors.InvalidArgument(
            "dsv4.compressor: argument 'use_fp4_cache': the FP4 cache layout has no zerojit kernel",
            "dsv4.compressor",
            "use_fp4_cache",
        )
    _check_equal("head_dim", head_dim, _HEAD_DIM)
    _check_equal("rope_head_dim", rope_head_dim, _ROPE_HEAD_DIM)
    _check_equal("quant_block", quant_block, _QUANT_BLOCK)
    _check_equal("token_stride", token_stride, _TOKEN_STRIDE)
    _check_equal("scale_dim", scale_dim, _SCALE_DIM)
    _check_equal("overlap", overlap, compress_ratio == 4)
    _check_equal("state_width", state_width, _HEAD_DIM * (2 if compress_ratio == 4 else 1))
    kv_slot_mapping = getattr(k_cache_metadata, "slot_mapping", k_cache_metadata)
    if getattr(positions, "shape", None) is not None and _numel(positions) == 0:
        return [] if _reference else None
    # store_full_kv=False is vLLM's default even for full caches (the caller derives it from
    # the cache dtype), so only an explicit True is checked against the cache.
    full_kv = True if store_full_kv else None
    full_fp8 = True if store_full_fp8 else None
    if compress_ratio == 4:
        return fused_kv_compress_norm_rope_insert_sparse_attn(
            state_cache,
            token_to_req_indices,
            positions,
            slot_mapping,
            block_table,
            block_size,
            rms_norm_weight,
            rms_norm_eps,
            cos_sin_cache,
            kv_cache,
            kv_slot_mapping,
            fp8_scale=fp8_scale,
            store_full_kv=full_kv,
            store_full_fp8=full_fp8,
            stream=stream,
            pdl=pdl,
            _reference=_reference,
        )
    num_actual = _integer(num_actual, "dsv4.compressor", "num_actual")
    compressed_kv = empty(state_cache, (num_actual, _HEAD_DIM), "f32")
    return split_kv_compress_norm_rope_insert_sparse_attn(
        state_cache,
        token_to_req_indices,
        positions,
        slot_mapping,
        block_table,
        block_size,
        compressed_kv,
        rms_norm_weight,
        rms_norm_eps,
        cos_sin_cache,
        kv_cache,
        kv_slot_mapping,
        fp8_scale=fp8_scale,
        store_full_kv=full_kv,
        store_full_fp8=full_fp8,
        stream=stream,
        pdl=pdl,
        _reference=_reference,
    )


def _numel(tensor):
    count = 1
    for extent in tensor.shape:
        count *= int(extent)
    return count


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
    if not _reference and _eager(logits):
        return _fast.dcp_pack(
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
        _cpu.dcp_pack(
            logits, topk_indices, packed, dcp_rank, dcp_world_size, cp_interleave, row_starts
        )
    else:
        _torch_ops().dcp_pack(
            logits,
            topk_indices,
            packed,
            _integer(dcp_rank, kernel, "dcp_rank"),
            _integer(dcp_world_size, kernel, "dcp_world_size"),
            _integer(cp_interleave, kernel, "cp_interleave"),
            row_starts,
            bool(pdl),
        )
    return packed
