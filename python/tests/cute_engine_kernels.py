"""Two CuTeDSL kernels written the way serving engines write theirs (configured classes whose
`@cute.jit` __call__ is the entry, an optional tensor, a padded paged cache with a dynamic page
stride, one symbol for the extent several tensors share, the DSL's own types as configuration),
for the tests of zerojit's CuTeDSL owners (cute_engine_owners.py, which never imports this
module: compile workers import it by name). Compiled, not run, on the CPU: their arithmetic is
only what makes the code real.

    PagedGather    the last G positions of each request gathered from a paged byte cache
                   (pages padded: a page's stride is larger than its rows) into rows of
                   `dtype`, scaled; G = gather_lens[r] when given, else seq_lens[r]
    IndexerLogits  per token and head, the dot product of a quantized query row with the
                   token's key, times the head's weight; FP8 queries, or byte queries with a
                   per-row UE8M0 scale exponent (the MXFP4 indexer's layout, without the
                   unpacking)
"""

from typing import Optional

import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute


class PagedGather:
    def __init__(self, dtype, head_dim, block_size, num_threads=128):
        self.dtype = dtype
        self.head_dim = head_dim
        self.block_size = block_size
        self.num_threads = num_threads

    @cute.jit
    def __call__(
        self,
        mOut: cute.Tensor,  # (num_reqs, rows, head_dim) of self.dtype
        mCache: cute.Tensor,  # (num_pages, block_size, row_bytes) u8, pages padded
        mBlockTable: cute.Tensor,  # (num_reqs, max_blocks) i32
        mSeqLens: cute.Tensor,  # (num_reqs,) i32
        mGatherLens: Optional[cute.Tensor],  # (num_reqs,) i32, or None: G = L
        scale: cutlass.Float32,
        stream: cuda.CUstream,
    ):
        num_reqs = cute.size(mOut, mode=[0])
        rows = cute.size(mOut, mode=[1])
        self.kernel(mOut, mCache, mBlockTable, mSeqLens, mGatherLens, scale).launch(
            grid=[num_reqs, rows, 1], block=[self.num_threads, 1, 1], stream=stream
        )

    @cute.kernel
    def kernel(
        self,
        gOut: cute.Tensor,
        gCache: cute.Tensor,
        gBlockTable: cute.Tensor,
        gSeqLens: cute.Tensor,
        gGatherLens: Optional[cute.Tensor],
        scale: cutlass.Float32,
    ):
        tidx, _, _ = cute.arch.thread_idx()
        request, row, _ = cute.arch.block_idx()
        length = gSeqLens[request]
        count = length
        if cutlass.const_expr(gGatherLens is not None):
            count = cutlass.min(gGatherLens[request], length)
        if row < count:
            position = length - count + row
            page = gBlockTable[request, position // self.block_size]
            slot = position % self.block_size
            for d in range(tidx, self.head_dim, self.num_threads):
                value = gCache[page, slot, d].to(cutlass.Float32) * scale
                gOut[request, row, d] = value.to(self.dtype)


class IndexerLogits:
    def __init__(self, q_dtype, heads, head_dim, acc_dtype=cutlass.Float32):
        self.q_dtype = q_dtype
        self.heads = heads
        self.head_dim = head_dim
        self.acc_dtype = acc_dtype

    @cute.jit
    def __call__(
        self,
        mQ: cute.Tensor,  # (num_tokens, heads, head_dim) of q_dtype
        mQScale: Optional[cute.Tensor],  # (num_tokens, heads) u8 UE8M0 exponents, or None
        mK: cute.Tensor,  # (num_tokens, head_dim) f32
        mWeights: cute.Tensor,  # (num_tokens, heads) f32
        mLogits: cute.Tensor,  # (num_tokens, heads) f32
        stream: cuda.CUstream,
    ):
        num_tokens = cute.size(mQ, mode=[0])
        self.kernel(mQ, mQScale, mK, mWeights, mLogits).launch(
            grid=[num_tokens, 1, 1], block=[self.heads, 1, 1], stream=stream
        )

    @cute.kernel
    def kernel(
        self,
        gQ: cute.Tensor,
        gQScale: Optional[cute.Tensor],
        gK: cute.Tensor,
        gWeights: cute.Tensor,
        gLogits: cute.Tensor,
    ):
        head, _, _ = cute.arch.thread_idx()
        token, _, _ = cute.arch.block_idx()
        total = self.acc_dtype(0.0)
        for d in range(self.head_dim):
            total = total + gQ[token, head, d].to(self.acc_dtype) * gK[token, d].to(self.acc_dtype)
        if cutlass.const_expr(gQScale is not None):
            exponent = gQScale[token, head].to(self.acc_dtype) - self.acc_dtype(127.0)
            total = total * cute.math.exp2(exponent)
        gLogits[token, head] = (total * gWeights[token, head].to(self.acc_dtype)).to(
            gLogits.element_type
        )
