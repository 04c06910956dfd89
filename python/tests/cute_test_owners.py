"""Three CuTeDSL kernels on zerojit, as an engine would write them; the @cute.jit functions are in
cute_test_kernels, named as strings so that this module (and a process serving the warmed
kernels from a pack) never imports the DSL. The tests import this module.

    scaled_add     elementwise over one dynamic extent (a multiple of 4), a float scalar
    row_sum        a row reduction: the row length a static extent and a Constexpr
    tiled_scale    a Constexpr tile over two dynamic extents
"""

import dataclasses

import zerojit
from zerojit import CuteKernel, CuteProgram, CuteTensor, DType, Space


@dataclasses.dataclass(frozen=True)
class AddKey:
    dtype: DType


class ScaledAdd(CuteKernel):
    name = "tests.cute.scaled_add"
    fn = "cute_test_kernels:scaled_add"
    Key = AddKey

    def dispatch(self, mA):
        return AddKey(mA.dtype)

    def program(self, key):
        vector = CuteTensor(key.dtype, (None,), divisibility=4)
        return CuteProgram({"mA": vector, "mB": vector, "mC": vector, "alpha": "f32"})

    def warmup_space(self):
        return Space(lambda p: {"mA": zerojit.TensorDesc.contiguous(p["dtype"], (1024,))}).choices(
            "dtype", [DType.f32, DType.bf16]
        )


@dataclasses.dataclass(frozen=True)
class RowKey:
    dtype: DType
    cols: int


class RowSum(CuteKernel):
    name = "tests.cute.row_sum"
    fn = "cute_test_kernels:row_sum"
    Key = RowKey

    def dispatch(self, mX):
        return RowKey(mX.dtype, mX.shape[1])

    def program(self, key):
        return CuteProgram(
            {"mX": CuteTensor(key.dtype, (None, key.cols)), "mOut": CuteTensor(DType.f32, (None,))},
            constexprs={"COLS": key.cols},
        )

    def warmup_space(self):
        return (
            Space(lambda p: {"mX": zerojit.TensorDesc.contiguous(p["dtype"], (8, p["cols"]))})
            .choices("dtype", [DType.bf16])
            .choices("cols", [64, 128])
        )


@dataclasses.dataclass(frozen=True)
class TileKey:
    tile: int


class TiledScale(CuteKernel):
    name = "tests.cute.tiled_scale"
    fn = "cute_test_kernels:tiled_scale"
    Key = TileKey

    def dispatch(self, mA):
        return TileKey(256 if mA.shape[1] >= 1024 else 128)

    def program(self, key):
        matrix = CuteTensor(DType.f32, (None, None))
        return CuteProgram(
            {"mA": matrix, "mC": matrix, "scale": "f32"}, constexprs={"TILE": key.tile}
        )

    def warmup_space(self):
        return Space(
            lambda p: {"mA": zerojit.TensorDesc.contiguous(DType.f32, (4, p["n"]))}
        ).choices("n", [100, 4096])


KERNELS = (ScaledAdd, RowSum, TiledScale)


def register_all():
    for kernel in KERNELS:
        zerojit.register(kernel)
