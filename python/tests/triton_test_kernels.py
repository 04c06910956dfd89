"""The Triton functions of the tests' five zerojit Triton kernels (their owners are in
triton_test_owners, which never imports this module: compile workers import it by name, and a
process that serves the warmed kernels needs no Triton)."""

import triton
import triton.language as tl

# --- masked elementwise -----------------------------------------------------------------------


@triton.jit
def masked_add(x_ptr, y_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y * alpha, mask=mask)


# --- row reduction with a constexpr block ----------------------------------------------------


@triton.jit
def row_sum(x_ptr, out_ptr, cols, row_stride, BLOCK_COLS: tl.constexpr):
    row = tl.program_id(0)
    offsets = tl.arange(0, BLOCK_COLS)
    x = tl.load(x_ptr + row * row_stride + offsets, mask=offsets < cols, other=0.0)
    tl.store(out_ptr + row, tl.sum(x.to(tl.float32), axis=0))


# --- a tl.dot tile, num_warps and num_stages in the key --------------------------------------


@triton.jit
def matmul_tile(
    a_ptr,
    b_ptr,
    c_ptr,
    M,
    N,
    K,
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    stride_cm,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = tl.load(
            a_ptr + rm[:, None] * stride_am + (k + rk)[None, :] * stride_ak,
            mask=(rm[:, None] < M) & ((k + rk)[None, :] < K),
            other=0.0,
        )
        b = tl.load(
            b_ptr + (k + rk)[:, None] * stride_bk + rn[None, :] * stride_bn,
            mask=((k + rk)[:, None] < K) & (rn[None, :] < N),
            other=0.0,
        )
        acc = tl.dot(a, b, acc)
    tl.store(
        c_ptr + rm[:, None] * stride_cm + rn[None, :],
        acc,
        mask=(rm[:, None] < M) & (rn[None, :] < N),
    )


# --- an integer in each width class ---------------------------------------------------------


@triton.jit
def int_widths(out_ptr, base, step, salt, n16, BLOCK: tl.constexpr):
    # out[i] = (base + i * step) ^ salt, for i < n16 (a multiple of 16), in 64 bits.
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    values = (base + offsets.to(tl.int64) * step) ^ salt
    tl.store(out_ptr + offsets, values, mask=offsets < n16)


# --- programmatic dependent launch ----------------------------------------------------------


@triton.jit
def pdl_scale(x_ptr, out_ptr, n, scale, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    # Wait for the previous kernel in the stream before reading what it wrote, then let the
    # next one start its own prologue.
    tl.extra.cuda.gdc_wait()
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.extra.cuda.gdc_launch_dependents()
    tl.store(out_ptr + offsets, x * scale, mask=mask)
