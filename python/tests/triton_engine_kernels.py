"""Two Triton kernels as an engine writes them (the shapes of DeepSeek-V4's compressor and of a
split reduction), launched by the engine's own Python launcher (triton_engine_launch), which
picks their constexprs from its configuration. Their zerojit owners are triton_engine_owners;
neither of those modules imports this one (compile workers import it by name)."""

import triton
import triton.language as tl


@triton.jit
def compress_kv(
    kv_ptr,
    out_ptr,
    n_out: int,
    kv_stride,
    out_stride,
    eps: float,
    RATIO: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    QUANT_FP8: tl.constexpr = False,
    ROWS: tl.constexpr = 1,
):
    # Output row r is the RMS-normalized mean of input rows [r * RATIO, (r + 1) * RATIO).
    cols = tl.arange(0, HEAD_DIM)
    for i in range(ROWS):
        row = tl.program_id(0) * ROWS + i
        if row < n_out:
            acc = tl.zeros((HEAD_DIM,), dtype=tl.float32)
            for j in range(RATIO):
                acc += tl.load(kv_ptr + (row * RATIO + j) * kv_stride + cols).to(tl.float32)
            mean = acc / RATIO
            y = mean / tl.sqrt(tl.sum(mean * mean, axis=0) / HEAD_DIM + eps)
            if QUANT_FP8:
                tl.store(out_ptr + row * out_stride + cols, y.to(tl.float8e4nv))
            else:
                tl.store(out_ptr + row * out_stride + cols, y.to(out_ptr.dtype.element_ty))


@triton.jit
def split_sum(
    x_ptr, partial_ptr, n, scale: float = 1.0, SPLITS: tl.constexpr = 1, BLOCK: tl.constexpr = 1024
):
    # partial[s] = scale * the sum of x over the blocks s, s + SPLITS, s + 2 SPLITS, ...
    split = tl.program_id(0)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(split * BLOCK, n, SPLITS * BLOCK):
        offsets = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + offsets, mask=offsets < n, other=0.0).to(tl.float32)
    tl.store(partial_ptr + split, tl.sum(acc, axis=0) * scale)
