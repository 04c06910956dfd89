"""The engine's side of triton_engine_kernels: its configuration, the launchers that pick each
call's meta-parameters from it, and (registered at import, for `python -m zerojit ... --module
triton_engine_launch`) the kernels' warmup and the battery of serving calls `run` checks.

A launcher is the engine's own code, kept as it was but for its last line: where it called
`kernel[grid](..., RATIO=..., QUANT_FP8=...)` it calls the zerojit kernel with the values it
decided as call options (`compress_ratio=...`); the owner's dispatch turns them into the key."""

import dataclasses
import random

import triton_engine_owners as owners
import zerojit
from zerojit import DType, TensorDesc


@dataclasses.dataclass(frozen=True)
class CompressorConfig:
    compress_ratio: int  # 4 (C4 layers) or 128 (C128 layers)
    fp8_cache: bool = False
    eps: float = 1e-6


# The layers of a small model: one C4 and one C128 compressor, the cache in bf16 or FP8.
LAYERS = (
    CompressorConfig(4),
    CompressorConfig(128),
    CompressorConfig(4, fp8_cache=True),
    CompressorConfig(128, fp8_cache=True),
)


def compress_call(kv, out, num_tokens, config):
    """The arguments and call options of one compress launch: the decode prefix
    kv[:num_tokens] compressed into out. `kv` is a torch tensor, or (for a battery without a
    GPU) a TensorDesc of the prefix already."""
    prefix = kv[:num_tokens] if hasattr(kv, "stride") else kv
    kv_stride, out_stride = (_row_stride(t) for t in (prefix, out))
    n_out = num_tokens // config.compress_ratio
    args = (prefix, out, n_out, kv_stride, out_stride, config.eps)
    return args, {"compress_ratio": config.compress_ratio, "fp8": config.fp8_cache}


def _row_stride(tensor):
    return tensor.stride(0) if hasattr(tensor, "stride") else TensorDesc.of(tensor).strides[0]


def compress(kv, out, num_tokens, config):
    args, options = compress_call(kv, out, num_tokens, config)
    owners.CompressKv()(*args, **options)


def split_sum(x, partial, num_sms, scale=1.0):
    owners.SplitSum()(x, partial, x.shape[0], scale, num_sms=num_sms)


def _tensor(step, dtype, shape):
    """What a battery step passes: a TensorDesc through dispatch alone, else a tensor on the
    step's device (PyTorch's, or, on the tests' stub driver, a DLPack producer over host
    memory that the stub never reads)."""
    if not step.launching:
        return TensorDesc.contiguous(dtype, shape)
    try:
        import torch

        if torch.cuda.is_available():
            names = {DType.bf16: torch.bfloat16, DType.f32: torch.float32}
            names[DType.e4m3] = torch.float8_e4m3fn
            return torch.empty(shape, dtype=names[dtype], device=f"cuda:{step.device}")
    except ImportError:
        pass
    from fake_dlpack import KDL_BFLOAT, KDL_CUDA, KDL_FLOAT, VersionedProducer

    code = {DType.bf16: (KDL_BFLOAT, 16, 1), DType.f32: (KDL_FLOAT, 32, 1)}
    code[DType.e4m3] = (10, 8, 1)  # kDLFloat8_e4m3fn
    return VersionedProducer(shape, code[dtype], device=(KDL_CUDA, step.device))


def serving_step(step):
    """One step of serving: a prefill or decode batch through every layer's compressor, and
    the split reduction over the batch."""
    rng = random.Random(step.seed)
    tokens = rng.choice((1000, 8192))
    for config in LAYERS:
        kv = _tensor(step, DType.bf16, (tokens, owners.HEAD_DIM))
        n_out = max(tokens // config.compress_ratio, 1)
        out = _tensor(
            step, DType.e4m3 if config.fp8_cache else DType.bf16, (n_out, owners.HEAD_DIM)
        )
        args, options = compress_call(kv, out, tokens, config)
        step.call(owners.CompressKv, *args, **options)
    n = rng.choice((1000, 1 << 20))
    x = _tensor(step, DType.f32, (n,))
    step.call(owners.SplitSum, x, _tensor(step, DType.f32, (owners.NUM_SMS,)), n)


owners.register_all()
zerojit.register_battery(serving_step)
