"""zerojit: JIT-compiled CUDA kernels with a warmup contract, from Python.

Every kernel specialization a model and serving configuration can ask for is compiled by
``warmup()`` before serving; afterwards the monitor (``zerojit.monitor``) reports or refuses any
compile, and a compile requested during CUDA-graph capture always raises ``RuntimeJitError``.

The DeepSeek-V4 attention-side kernels take tensors through DLPack (``torch.Tensor`` or anything
with ``__dlpack__``) and keep the argument names of vLLM's implementation; see ``zerojit.dsv4``.
Their CPU references are in ``zerojit.reference``, the disk cache operations in
``zerojit.cache``.
"""

from ._errors import (
    CompileError,
    ConfigError,
    CudaError,
    Error,
    InvalidArgument,
    LaunchError,
    RuntimeJitError,
    UnavailableError,
)
from . import _core
from . import cache, dsv4, monitor, reference
from ._warmup import config, default_config, manifest, warmup
from .dsv4 import (
    compress_norm_rope_store,
    dequantize_and_gather_k_cache,
    fused_indexer_q_rope_quant,
    fused_indexer_q_rope_quant_fp8,
    fused_indexer_q_rope_quant_mxfp4,
    fused_kv_compress_norm_rope_insert_sparse_attn,
    pack_dcp_topk_candidates,
    sparse_attn_compress_c128,
    sparse_attn_norm_rope_store,
    split_kv_compress_norm_rope_insert_sparse_attn,
)

__version__ = "0.1.0"


def _register_torch_ops():
    """torch.ops.zerojit.*, when PyTorch can be imported (zerojit.torch_ops)."""
    import importlib.util
    import os

    if os.environ.get("ZEROJIT_NO_TORCH") == "1" or importlib.util.find_spec("torch") is None:
        return None
    from . import torch_ops

    return torch_ops


torch_ops = _register_torch_ops()


def driver_available():
    """Whether the CUDA driver could be loaded (never raises)."""
    return _core.driver_available()


def device_count():
    """Visible CUDA devices; 0 without a driver or a device."""
    return _core.device_count()


def nvrtc_available():
    """Whether NVRTC can be loaded, which compiling (warmup) needs."""
    return _core.nvrtc_available()


__all__ = [
    "CompileError",
    "ConfigError",
    "CudaError",
    "Error",
    "InvalidArgument",
    "LaunchError",
    "RuntimeJitError",
    "UnavailableError",
    "cache",
    "config",
    "default_config",
    "device_count",
    "driver_available",
    "dsv4",
    "manifest",
    "monitor",
    "nvrtc_available",
    "reference",
    "warmup",
    *dsv4.__all__,
]
