"""The DSv4 compressor functions (spec sections 3-7), re-exported by zerojit.dsv4, whose
docstring says how they take tensors, streams and ``pdl``."""

from zerojit.dsv4 import launch as _launch
from zerojit.runtime import errors as _errors
from zerojit.runtime.tensors import empty, shape_of, torch_module

# The compressor kernels are written for the DSv4 main-attention head (spec sections 3-7).
_HEAD_DIM = 512
_ROPE_HEAD_DIM = 64
_QUANT_BLOCK = 64
_TOKEN_STRIDE = 576
_SCALE_DIM = 8

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
        return _launch.cpu.c4_store(*args, fp8_scale, store_full_kv, store_full_fp8)
    if _launch.eager(state_cache):
        _launch.fast.c4_store(*args, fp8_scale, store_full_kv, store_full_fp8, pdl, stream)
    else:
        kernel = "dsv4.c4_store"
        _launch.torch_ops().c4_store(
            state_cache,
            token_to_req_indices,
            positions,
            slot_mapping,
            block_table,
            _launch.optional_integer(block_size, kernel, "block_size"),
            rms_norm_weight,
            float(rms_norm_eps),
            cos_sin_cache,
            k_cache,
            kv_slot_mapping,
            *_traced_cache_geometry(kv_cache_block_size, kv_block_stride, kernel),
            _default_fp8_scale(k_cache, fp8_scale),
            store_full_kv,
            store_full_fp8,
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
    if not _reference and _launch.eager(state_cache):
        return _launch.fast.c128_compress(*args, compressed_kv, False, stream)
    kernel = "dsv4.c128_compress"
    if compressed_kv is None:
        (tokens,) = shape_of(slot_mapping, kernel, "slot_mapping", 1)
        compressed_kv = empty(state_cache, (tokens, _HEAD_DIM), "f32")
    if _reference:
        return compressed_kv, _launch.cpu.c128_compress(*args, compressed_kv)
    block_size = _launch.optional_integer(block_size, kernel, "block_size")
    _launch.torch_ops().c128_compress(*args[:5], block_size, compressed_kv)
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
        return _launch.cpu.c128_store(*args, fp8_scale, store_full_kv, store_full_fp8)
    if _launch.eager(compressed_kv):
        _launch.fast.c128_store(*args, fp8_scale, store_full_kv, store_full_fp8, False, stream)
    else:
        _launch.torch_ops().c128_store(
            compressed_kv,
            positions,
            slot_mapping,
            rms_norm_weight,
            float(rms_norm_eps),
            cos_sin_cache,
            k_cache,
            kv_slot_mapping,
            *_traced_cache_geometry(kv_cache_block_size, kv_block_stride, "dsv4.c128_store"),
            _default_fp8_scale(k_cache, fp8_scale),
            store_full_kv,
            store_full_fp8,
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
    if not _reference and _launch.eager(state_cache):
        # Both launches in one call.
        _launch.fast.c128_split(
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
            pdl,
            stream,
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


def _traced_cache_geometry(kv_cache_block_size, kv_block_stride, kernel):
    """The K cache geometry vLLM restates, as the traced op takes it (ints or None, refused by
    name otherwise); the op checks it against the cache when it runs."""
    return (
        _launch.optional_integer(kv_cache_block_size, kernel, "kv_cache_block_size"),
        _launch.optional_integer(kv_block_stride, kernel, "kv_block_stride"),
    )


def _default_fp8_scale(k_cache, fp8_scale):
    """vLLM's compressor passes ones(1) when a float8 cache has no per-tensor scale: put in the
    traced graph here (the launch path and the references default it in C++, the declaration's
    unit_scale_when)."""
    if fp8_scale is not None:
        return fp8_scale
    torch = torch_module()
    if torch is not None and isinstance(k_cache, torch.Tensor):
        if k_cache.dtype == torch.float8_e4m3fn:
            return torch.ones(1, dtype=torch.float32, device=k_cache.device)
    return None


def _check_equal(name, value, supported, kernel="dsv4.compressor"):
    if value is not None and not isinstance(supported, bool):
        value = _launch.integer(value, kernel, name)  # 512.0 is not the integer 512
    if value is not None and value != supported:
        raise _errors.InvalidArgument(
            f"{kernel}: argument '{name}': must be {supported!r} (the DSv4 compressor kernels "
            f"are built for it), got {value!r}",
            kernel,
            name,
        )


def _check_state_width(state_cache, state_width):
    """``state_width`` restates the state cache: a state row holds kv then score, each
    ``state_width`` wide. Checked once ``state_width`` is known to be the kernels' (so the cache
    is what disagrees), here rather than by the kernel: also when traced."""
    shape = getattr(state_cache, "shape", None)
    if shape is not None and len(shape) > 0 and int(shape[-1]) != 2 * int(state_width):
        raise _errors.InvalidArgument(
            f"dsv4.compressor: argument 'state_cache': its last dimension must be "
            f"2 * state_width = {2 * int(state_width)} (a state row is kv then score), got "
            f"{tuple(int(extent) for extent in shape)}",
            "dsv4.compressor",
            "state_cache",
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
    for the kernel before it in the stream before it reads what that kernel writes, and the
    step's metadata must be complete before the step's first launch with PDL; docs/DESIGN.md,
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
    compress_ratio = _launch.integer(compress_ratio, "dsv4.compressor", "compress_ratio")
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
    _check_state_width(state_cache, state_width)
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
    num_actual = _launch.integer(num_actual, "dsv4.compressor", "num_actual")
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
