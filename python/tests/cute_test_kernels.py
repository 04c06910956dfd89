"""The CuTeDSL functions of the tests' three zerojit CuTeDSL kernels (their owners are in
cute_test_owners, which never imports the DSL: compile workers import this module by name)."""

import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute

# --- elementwise ----------------------------------------------------------------------------


@cute.kernel
def _scaled_add_kernel(gA: cute.Tensor, gB: cute.Tensor, gC: cute.Tensor, alpha: cutlass.Float32):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    bdim, _, _ = cute.arch.block_dim()
    i = bidx * bdim + tidx
    if i < cute.size(gA):
        value = gA[i].to(cutlass.Float32) + gB[i].to(cutlass.Float32) * alpha
        gC[i] = value.to(gC.element_type)


@cute.jit
def scaled_add(
    mA: cute.Tensor, mB: cute.Tensor, mC: cute.Tensor, alpha: cutlass.Float32, stream: cuda.CUstream
):
    n = cute.size(mA)
    _scaled_add_kernel(mA, mB, mC, alpha).launch(
        grid=[(n + 255) // 256, 1, 1], block=[256, 1, 1], stream=stream
    )


# --- a row reduction ------------------------------------------------------------------------


@cute.kernel
def _row_sum_kernel(gX: cute.Tensor, gOut: cute.Tensor, COLS: cutlass.Constexpr):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    bdim, _, _ = cute.arch.block_dim()
    row = bidx * bdim + tidx
    if row < cute.size(gX, mode=[0]):
        total = cutlass.Float32(0.0)
        for j in range(COLS):
            total = total + gX[row, j].to(cutlass.Float32)
        gOut[row] = total


@cute.jit
def row_sum(mX: cute.Tensor, mOut: cute.Tensor, stream: cuda.CUstream, COLS: cutlass.Constexpr):
    rows = cute.size(mX, mode=[0])
    _row_sum_kernel(mX, mOut, COLS).launch(
        grid=[(rows + 127) // 128, 1, 1], block=[128, 1, 1], stream=stream
    )


# --- a constexpr tile over dynamic extents --------------------------------------------------


@cute.kernel
def _tiled_scale_kernel(
    gA: cute.Tensor, gC: cute.Tensor, scale: cutlass.Float32, TILE: cutlass.Constexpr
):
    tidx, _, _ = cute.arch.thread_idx()
    row, tile, _ = cute.arch.block_idx()
    column = tile * TILE + tidx
    if column < cute.size(gA, mode=[1]):
        gC[row, column] = gA[row, column] * scale


@cute.jit
def tiled_scale(
    mA: cute.Tensor,
    mC: cute.Tensor,
    scale: cutlass.Float32,
    stream: cuda.CUstream,
    TILE: cutlass.Constexpr,
):
    rows = cute.size(mA, mode=[0])
    columns = cute.size(mA, mode=[1])
    _tiled_scale_kernel(mA, mC, scale, TILE).launch(
        grid=[rows, (columns + TILE - 1) // TILE, 1], block=[TILE, 1, 1], stream=stream
    )
