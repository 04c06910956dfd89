"""zerojit: JIT-compiled CUDA kernels with a warmup contract, from Python.

Every kernel specialization a model and serving configuration can ask for is compiled by
``warmup()`` before serving; afterwards the monitor (``zerojit.monitor``) reports or refuses any
compile, and a compile requested during CUDA-graph capture always raises ``RuntimeJitError``.

The DeepSeek-V4 attention-side kernels take tensors through DLPack (``torch.Tensor`` or anything
with ``__dlpack__``) and keep the argument names of vLLM's implementation; see ``zerojit.dsv4``.
Their CPU references are in ``zerojit.reference``, the disk cache operations in
``zerojit.cache``.

The package is laid out as the system is: ``runtime/`` (errors, types, warmup), ``languages/``
(the table of kernel languages, one folder each: CUDA C++, Triton, CuTeDSL), ``dsv4/`` (the
DeepSeek-V4 family), ``pytorch/`` (the torch custom ops) and ``tool/`` (``python -m zerojit``).
The public modules keep their names: ``zerojit.kernels``, ``zerojit.triton_kernels``,
``zerojit.cute_kernels``, ``zerojit.reference``, ``zerojit.torch_ops``, ``zerojit.torch_kernels``.
"""

import sys as _sys


from zerojit.runtime import environment as _environment
from zerojit.runtime import nvrtc as _nvrtc

_nvrtc.configure()  # before the core first loads NVRTC

from zerojit.runtime.errors import (
    CompileError,
    ConfigError,
    CudaError,
    Error,
    InvalidArgument,
    LaunchError,
    RankAgreementError,
    RankRuntimeJitError,
    RuntimeJitError,
    UnavailableError,
    WarmupError,
)
from zerojit import _core
from zerojit import cache
from zerojit import dsv4
from zerojit import monitor
from zerojit.metrics import PrometheusCollector, metrics_text
from zerojit.dsv4 import reference
from zerojit.runtime.warmup import (
    clear_registrations,
    config,
    default_config,
    kernel_manifest,
    key_of,
    manifest,
    misses_file,
    register,
    registrations,
    set_misses_file,
    wait_background_compiles,
    warmup,
    warmup_kernels,
)
from zerojit import hooks
from zerojit.runtime.ranks import RankGroup
from zerojit.runtime.stores import FileStore, RedisStore
from zerojit.languages.cuda.owner import DType, Geometry, Kernel, Launch, Program, TensorDesc
from zerojit.languages.triton.owner import SUPPORTED_TRITON, TritonKernel, TritonProgram
from zerojit.languages.cutedsl.owner import CuteKernel, CuteProgram, CuteSym, CuteTensor
from zerojit.spaces import Space, next_power_of_two
from zerojit.tool.battery import register_battery
from zerojit.pytorch.kernels import torch_op
from zerojit.dsv4 import (
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
    """torch.ops.zerojit.*, when PyTorch can be imported (zerojit.pytorch.ops)."""
    import importlib.util

    if _environment.flag("ZEROJIT_NO_TORCH", False) or importlib.util.find_spec("torch") is None:
        return None
    from zerojit.pytorch import ops as torch_ops

    return torch_ops


torch_ops = _register_torch_ops()

if _environment.flag("ZEROJIT_PYTHON_LOGGING", True):
    hooks.install_logging()

# The public names of the language and integration modules (their files live in the folders).
from zerojit.languages.cuda import owner as kernels
from zerojit.languages.triton import owner as triton_kernels
from zerojit.languages.cutedsl import owner as cute_kernels
from zerojit.pytorch import kernels as torch_kernels

for _name, _module in (
    ("kernels", kernels),
    ("triton_kernels", triton_kernels),
    ("cute_kernels", cute_kernels),
    ("reference", reference),
    ("torch_kernels", torch_kernels),
    ("torch_ops", torch_ops),
):
    if _module is not None:
        _sys.modules[f"{__name__}.{_name}"] = _module


def _install_guards():
    """Each language's guard over compiles of kernels zerojit does not own (the table)."""
    import importlib

    from zerojit import languages

    for language in languages.LANGUAGES:
        if language.guard is not None:
            importlib.import_module(language.guard).install_when_imported()


_install_guards()


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
    "RankAgreementError",
    "RankRuntimeJitError",
    "RuntimeJitError",
    "UnavailableError",
    "WarmupError",
    "DType",
    "Geometry",
    "Kernel",
    "Launch",
    "Program",
    "FileStore",
    "RedisStore",
    "RankGroup",
    "Space",
    "TensorDesc",
    "SUPPORTED_TRITON",
    "TritonKernel",
    "TritonProgram",
    "CuteKernel",
    "CuteProgram",
    "CuteSym",
    "CuteTensor",
    "cache",
    "clear_registrations",
    "hooks",
    "kernel_manifest",
    "key_of",
    "next_power_of_two",
    "register",
    "register_battery",
    "registrations",
    "torch_op",
    "warmup_kernels",
    "set_misses_file",
    "misses_file",
    "wait_background_compiles",
    "config",
    "default_config",
    "device_count",
    "driver_available",
    "dsv4",
    "manifest",
    "metrics_text",
    "monitor",
    "nvrtc_available",
    "PrometheusCollector",
    "reference",
    "warmup",
    *dsv4.__all__,
]
