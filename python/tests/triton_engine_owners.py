"""The zerojit owners of triton_engine_kernels, written as an engine moving its Triton kernels
writes them (docs/PYTHON.md, "Moving an engine's kernels: Triton"): what the engine's launcher
decided from its configuration (the compress ratio, an FP8 cache, the SM count behind a split
count) arrives as call options; the function's own annotations and constexpr defaults are not
restated; the divisibility Triton's binder would have given a call is a key field. Never
imports Triton (the functions are named as strings)."""

import dataclasses

from zerojit.triton_kernels import pointer

from zerojit import DType, Space, TensorDesc, TritonKernel, TritonProgram

HEAD_DIM = 512
NUM_SMS = 132


def cdiv(a, b):
    return -(-a // b)


@dataclasses.dataclass(frozen=True)
class CompressKey:
    dtype: DType
    fp8: bool
    ratio: int
    head_dim: int
    rows: int
    divisible: str  # the arguments compiled divisible by 16, as Triton's binder picks them


class CompressKv(TritonKernel):
    name = "engine.compress_kv"
    fn = "triton_engine_kernels:compress_kv"
    Key = CompressKey
    call_options = ("compress_ratio", ("fp8", False))

    def dispatch(self, kv_ptr, out_ptr, n_out, kv_stride, out_stride, compress_ratio, fp8):
        divisible = self.divisible_by_16(
            kv_ptr=kv_ptr, out_ptr=out_ptr, n_out=n_out, kv_stride=kv_stride, out_stride=out_stride
        )
        rows = 4 if n_out >= 1024 else 1
        return CompressKey(kv_ptr.dtype, fp8, compress_ratio, kv_ptr.shape[1], rows, divisible)

    def program(self, key):
        return TritonProgram(
            signature={
                "kv_ptr": pointer(key.dtype),
                "out_ptr": pointer(DType.e4m3 if key.fp8 else key.dtype),
                "kv_stride": "i32",
                "out_stride": "i32",
            },  # n_out: int and eps: float are the function's annotations
            constexprs={
                "RATIO": key.ratio,
                "HEAD_DIM": key.head_dim,
                "QUANT_FP8": key.fp8,
                "ROWS": key.rows,
            },
            divisible_by_16=key.divisible,
        )

    def grid(self, key, n_out):
        return (cdiv(n_out, key.rows),)

    def warmup_space(self):
        def describe(p):
            n_out = p["tokens"] // p["compress_ratio"]
            out = DType.e4m3 if p["fp8"] else DType.bf16
            return {
                "kv_ptr": TensorDesc.contiguous(DType.bf16, (p["tokens"], HEAD_DIM)),
                "out_ptr": TensorDesc.contiguous(out, (max(n_out, 1), HEAD_DIM)),
                "n_out": n_out,
                "kv_stride": HEAD_DIM,
                "out_stride": HEAD_DIM,
                "compress_ratio": p["compress_ratio"],
                "fp8": p["fp8"],
            }

        return (
            Space(describe)
            .choices("compress_ratio", [4, 128])
            .choices("fp8", [False, True])
            .choices("tokens", [1000, 8192])
        )


@dataclasses.dataclass(frozen=True)
class SplitKey:
    dtype: DType
    splits: int


class SplitSum(TritonKernel):
    name = "engine.split_sum"
    fn = "triton_engine_kernels:split_sum"
    Key = SplitKey
    call_options = {"num_sms": NUM_SMS}

    def dispatch(self, x_ptr, n, num_sms):
        return SplitKey(x_ptr.dtype, num_sms if n >= 1 << 16 else 1)

    def program(self, key):
        # scale: float and BLOCK = 1024 are the function's own.
        return TritonProgram(
            signature={"x_ptr": pointer(key.dtype), "partial_ptr": "*fp32", "n": "i32"},
            constexprs={"SPLITS": key.splits},
        )

    def grid(self, key):
        return (key.splits,)

    def warmup_space(self):
        return (
            Space(lambda p: {"x_ptr": TensorDesc.contiguous(p["dtype"], (p["n"],)), "n": p["n"]})
            .choices("dtype", [DType.f32, DType.bf16])
            .choices("n", [1000, 1 << 20])
        )


KERNELS = (CompressKv, SplitSum)


def register_all():
    import zerojit

    for kernel in KERNELS:
        zerojit.register(kernel)
