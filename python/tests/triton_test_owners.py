"""Five Triton kernels on zerojit, as an engine would write them; the Triton functions are in
triton_test_kernels, named as strings so that this module (and a process serving the warmed
kernels from a pack) never imports Triton. The tests import this module.

    masked_add     masked elementwise, a float scalar, dtype and block in the key
    row_sum        a row reduction, its constexpr block the next power of two of the row
    matmul_tile    a tl.dot tile, num_warps / num_stages in the key, a unit stride compiled as
                   the constant 1 (Triton's "== 1" class)
    int_widths     an integer in each width class (i32, i64, u64), chosen by dispatch from the
                   value, and a divisible-by-16 integer
    pdl_scale      built and launched for programmatic dependent launch (launch_pdl)
"""

import dataclasses

import zerojit
from zerojit import DType, Space, TritonKernel, TritonProgram

TRITON_TYPES = {DType.f32: "fp32", DType.f16: "fp16", DType.bf16: "bf16"}
ROW_BLOCKS = (64, 128, 256, 512, 1024)


def cdiv(a, b):
    return -(-a // b)


def next_power_of_two(value):
    return 1 << max(0, value - 1).bit_length()


# --- masked elementwise -----------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class AddKey:
    dtype: DType
    block: int
    num_warps: int


class MaskedAdd(TritonKernel):
    name = "tests.triton.masked_add"
    fn = "triton_test_kernels:masked_add"
    Key = AddKey

    def dispatch(self, x_ptr, n):
        block = 1024 if n >= 4096 else 256
        return AddKey(x_ptr.dtype, block, 4 if block == 1024 else 2)

    def program(self, key):
        pointer = "*" + TRITON_TYPES[key.dtype]
        return TritonProgram(
            signature={
                "x_ptr": pointer,
                "y_ptr": pointer,
                "out_ptr": pointer,
                "n": "i32",
                "alpha": "fp32",
            },
            constexprs={"BLOCK": key.block},
            options={"num_warps": key.num_warps},
        )

    def grid(self, key, n):
        return (cdiv(n, key.block),)

    def warmup_space(self):
        return (
            Space(
                lambda p: {
                    "x_ptr": zerojit.TensorDesc.contiguous(p["dtype"], (p["n"],)),
                    "n": p["n"],
                }
            )
            .choices("dtype", [DType.f32, DType.f16, DType.bf16])
            .choices("n", [1000, 1 << 20])
        )


# --- row reduction with a constexpr block ----------------------------------------------------


@dataclasses.dataclass(frozen=True)
class RowKey:
    dtype: DType
    block_cols: int
    # Whether the row length and stride are multiples of 16, compiled as Triton's divisibility
    # attribute: Triton's own launcher specializes on it (vector loads, and so the order of the
    # row's sum), so a key that names it compiles exactly what Triton would for the call.
    aligned_rows: bool


class RowSum(TritonKernel):
    name = "tests.triton.row_sum"
    fn = "triton_test_kernels:row_sum"
    Key = RowKey

    def dispatch(self, x_ptr, cols, row_stride):
        block = max(next_power_of_two(cols), ROW_BLOCKS[0])
        if block > ROW_BLOCKS[-1]:
            raise zerojit.InvalidArgument(
                f"kernel {self.name}: rows of {cols} columns are longer than {ROW_BLOCKS[-1]}",
                self.name,
                "cols",
            )
        return RowKey(x_ptr.dtype, block, cols % 16 == 0 and row_stride % 16 == 0)

    def program(self, key):
        return TritonProgram(
            signature={
                "x_ptr": "*" + TRITON_TYPES[key.dtype],
                "out_ptr": "*fp32",
                "cols": "i32",
                "row_stride": "i32",
            },
            constexprs={"BLOCK_COLS": key.block_cols},
            divisible_by_16=("x_ptr", "out_ptr")
            + (("cols", "row_stride") if key.aligned_rows else ()),
            options={"num_warps": 4 if key.block_cols >= 512 else 1},
        )

    def grid(self, key, x_ptr):
        return (x_ptr.shape[0],)

    def warmup_space(self):
        return (
            Space(
                lambda p: {
                    "x_ptr": zerojit.TensorDesc.contiguous(p["dtype"], (8, p["cols"])),
                    "cols": p["cols"],
                    "row_stride": p["cols"],
                }
            )
            .choices("dtype", [DType.f32, DType.bf16])
            .choices("cols", [64, 100, 128, 256, 512, 1000])
        )


# --- a tl.dot tile, num_warps and num_stages in the key --------------------------------------


@dataclasses.dataclass(frozen=True)
class TileKey:
    dtype: DType
    block_m: int
    block_n: int
    block_k: int
    num_warps: int
    num_stages: int


class MatmulTile(TritonKernel):
    name = "tests.triton.matmul_tile"
    fn = "triton_test_kernels:matmul_tile"
    Key = TileKey

    def dispatch(self, a_ptr, M):
        if M <= 64:
            return TileKey(a_ptr.dtype, 64, 64, 32, 4, 2)
        return TileKey(a_ptr.dtype, 128, 128, 32, 8, 3)

    def program(self, key):
        pointer = "*" + TRITON_TYPES[key.dtype]
        return TritonProgram(
            signature={
                "a_ptr": pointer,
                "b_ptr": pointer,
                "c_ptr": "*fp32",
                "M": "i32",
                "N": "i32",
                "K": "i32",
                "stride_am": "i32",
                "stride_bk": "i32",
                "stride_bn": "i32",
                "stride_cm": "i32",
            },
            # The unit stride is compiled as the constant 1 (and checked at every call).
            constexprs={
                "stride_ak": 1,
                "BLOCK_M": key.block_m,
                "BLOCK_N": key.block_n,
                "BLOCK_K": key.block_k,
            },
            options={"num_warps": key.num_warps, "num_stages": key.num_stages},
        )

    def grid(self, key, M, N):
        return (cdiv(M, key.block_m), cdiv(N, key.block_n))

    def warmup_space(self):
        return (
            Space(
                lambda p: {
                    "a_ptr": zerojit.TensorDesc.contiguous(p["dtype"], (p["M"], 64)),
                    "M": p["M"],
                }
            )
            .choices("dtype", [DType.f16, DType.bf16])
            .choices("M", [16, 512])
        )


# --- an integer in each width class ---------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class WidthKey:
    base: str  # the width class of `base`: "i32", "i64" or "u64"


def width_class(value):
    """Triton's own rule: i32 if it fits, else i64, else u64."""
    if -(2**31) <= value < 2**31:
        return "i32"
    return "i64" if value < 2**63 else "u64"


class IntWidths(TritonKernel):
    name = "tests.triton.int_widths"
    fn = "triton_test_kernels:int_widths"
    Key = WidthKey

    def dispatch(self, base):
        return WidthKey(width_class(base))

    def program(self, key):
        return TritonProgram(
            signature={
                "out_ptr": "*i64",
                "base": key.base,
                "step": "i32",
                "salt": "i64",
                "n16": "i32",
            },
            constexprs={"BLOCK": 256},
            divisible_by_16=("out_ptr", "n16"),
            options={"num_warps": 2},
        )

    def grid(self, key, n16):
        return (cdiv(n16, 256),)

    def warmup_space(self):
        return Space().choices("base", [7, 2**40, 2**63 + 5])


# --- programmatic dependent launch ----------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class PdlKey:
    block: int


class PdlScale(TritonKernel):
    name = "tests.triton.pdl_scale"
    fn = "triton_test_kernels:pdl_scale"
    Key = PdlKey

    def dispatch(self):
        return PdlKey(512)

    def program(self, key):
        return TritonProgram(
            signature={"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "scale": "fp32"},
            constexprs={"BLOCK": key.block},
            options={"num_warps": 4, "launch_pdl": True},
        )

    def grid(self, key, n):
        return (cdiv(n, key.block),)

    def warmup_space(self):
        return Space()


KERNELS = (MaskedAdd, RowSum, MatmulTile, IntWidths, PdlScale)


def register_all():
    for kernel in KERNELS:
        zerojit.register(kernel)
