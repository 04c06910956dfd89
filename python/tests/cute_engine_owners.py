"""The zerojit owners of cute_engine_kernels' two engine-style CuTeDSL kernels (this module never
imports the DSL). Each entry is the kernel class's own `@cute.jit` __call__, built in the
compile worker from the program's `init`; the optional tensor is a key field (None compiled
absent); `num_reqs` / `num_tokens` are one symbol for the extent several tensors share.

    PagedGather     4 keys: dtype (bf16, f16) x has_gather_lens
    IndexerLogits   4 keys: quant (fp8, mxfp4) x heads (32, 64)
"""

import dataclasses

import zerojit
from zerojit import CuteKernel, CuteProgram, CuteSym, CuteTensor, DType, Space, TensorDesc

HEAD_DIM, ROW_BYTES, BLOCK, PAGE_BYTES = 512, 584, 2, 1728  # a page: 2 rows of 584 B, padded

# --- PagedGather -------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class GatherKey:
    dtype: DType
    block_size: int
    has_gather_lens: bool


class PagedGather(CuteKernel):
    name = "tests.cute_engine.paged_gather"
    fn = "cute_engine_kernels:PagedGather.__call__"
    Key = GatherKey

    def dispatch(self, mOut, mCache, mGatherLens):
        return GatherKey(mOut.dtype, mCache.shape[1], mGatherLens is not None)

    def program(self, key):
        reqs = CuteSym("num_reqs")  # one extent of mOut, mBlockTable, mSeqLens, mGatherLens
        lens = CuteTensor(DType.i32, (reqs,), assumed_align=4)
        pages = (CuteSym(divisibility=32), ROW_BYTES, 1)  # a padded page: a dynamic stride
        return CuteProgram(
            {
                "mOut": CuteTensor.strided(key.dtype, (reqs, None, HEAD_DIM), divisibility=8),
                "mCache": CuteTensor(
                    DType.u8, (None, key.block_size, ROW_BYTES), stride=pages, assumed_align=32
                ),
                "mBlockTable": CuteTensor.strided(DType.i32, (reqs, None)),
                "mSeqLens": lens,
                "mGatherLens": lens if key.has_gather_lens else None,
                "scale": "f32",
            },
            init={"dtype": key.dtype, "head_dim": HEAD_DIM, "block_size": key.block_size},
        )

    def warmup_space(self):
        return (
            Space(
                lambda p: {
                    "mOut": TensorDesc.contiguous(p["dtype"], (4, 64, HEAD_DIM)),
                    "mCache": TensorDesc(
                        DType.u8, (16, BLOCK, ROW_BYTES), (PAGE_BYTES, ROW_BYTES, 1)
                    ),
                    "mGatherLens": TensorDesc.contiguous(DType.i32, (4,)) if p["lens"] else None,
                }
            )
            .choices("dtype", [DType.bf16, DType.f16])
            .choices("lens", [False, True])
        )


# --- IndexerLogits -----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class IndexerKey:
    quant: str  # "fp8" or "mxfp4"
    heads: int


class IndexerLogits(CuteKernel):
    name = "tests.cute_engine.indexer_logits"
    fn = "cute_engine_kernels:IndexerLogits.__call__"
    Key = IndexerKey

    def dispatch(self, mQ):
        return IndexerKey("fp8" if mQ.dtype == DType.e4m3 else "mxfp4", mQ.shape[1])

    def program(self, key):
        tokens, fp8 = CuteSym("num_tokens"), key.quant == "fp8"
        rows = CuteTensor(DType.f32, (tokens, key.heads))
        q_dtype = DType.e4m3 if fp8 else DType.u8
        scales = None if fp8 else CuteTensor(DType.u8, (tokens, key.heads), assumed_align=1)
        return CuteProgram(
            {
                "mQ": CuteTensor.strided(q_dtype, (tokens, key.heads, 128), divisibility=16),
                "mQScale": scales,
                "mK": CuteTensor(DType.f32, (tokens, 128)),
                "mWeights": rows,
                "mLogits": rows,
            },
            init={"q_dtype": q_dtype, "heads": key.heads, "head_dim": 128},
        )

    def warmup_space(self):
        return (
            Space(lambda p: {"mQ": TensorDesc.contiguous(p["dtype"], (8, p["heads"], 128))})
            .choices("dtype", [DType.e4m3, DType.u8])
            .choices("heads", [32, 64])
        )


KERNELS = (PagedGather, IndexerLogits)


def register_all():
    for kernel in KERNELS:
        zerojit.register(kernel)
