"""zerojit: JIT-compiled CUDA kernels with a warmup contract, from Python.

Every kernel specialization a model and serving configuration can ask for is compiled by
``warmup()`` before serving; afterwards the monitor (``zerojit.monitor``) reports or refuses any
compile, and a compile requested during CUDA-graph capture always raises ``RuntimeJitError``.

The DeepSeek-V4 attention-side kernels take tensors through DLPack (``torch.Tensor`` or anything
with ``__dlpack__``) and keep the argument names of vLLM's implementation; see ``zerojit.dsv4``.
Their CPU references are in ``zerojit.reference``, the disk cache operations in
``zerojit.cache``.
"""

from . import _environment, _nvrtc

_nvrtc.configure()  # before the core first loads NVRTC

from ._errors import (
    CompileError,
    ConfigError,
    CudaError,
    Error,
    InvalidArgument,
    LaunchError,
    RuntimeJitError,
    UnavailableError,
    WarmupError,
)
from . import _core
from . import cache, dsv4, monitor, reference
from ._warmup import (
    clear_registrations,
    config,
    default_config,
    kernel_manifest,
    manifest,
    register,
    registrations,
    warmup,
    warmup_kernels,
)
from . import hooks
from .kernels import DType, Geometry, Kernel, Launch, Program, TensorDesc
from .triton_kernels import SUPPORTED_TRITON, TritonKernel, TritonProgram
from .cute_kernels import CuteKernel, CuteProgram, CuteTensor
from .spaces import Space, next_power_of_two
from .torch_kernels import torch_op
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

    if _environment.flag("ZEROJIT_NO_TORCH", False) or importlib.util.find_spec("torch") is None:
        return None
    from . import torch_ops

    return torch_ops


torch_ops = _register_torch_ops()

if _environment.flag("ZEROJIT_PYTHON_LOGGING", True):
    hooks.install_logging()

from . import _cute_guard, _triton_guard

_triton_guard.install_when_imported()
_cute_guard.install_when_imported()


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
    "WarmupError",
    "DType",
    "Geometry",
    "Kernel",
    "Launch",
    "Program",
    "Space",
    "TensorDesc",
    "SUPPORTED_TRITON",
    "TritonKernel",
    "TritonProgram",
    "CuteKernel",
    "CuteProgram",
    "CuteTensor",
    "cache",
    "clear_registrations",
    "hooks",
    "kernel_manifest",
    "next_power_of_two",
    "register",
    "registrations",
    "torch_op",
    "warmup_kernels",
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
