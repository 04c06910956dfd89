"""The DSv4 ops derived from their kernels' declared arguments, without a GPU: one signature for
the launch path, the CPU reference and the traced op (vLLM's), the values vLLM's signatures
restate checked against the tensors on every path, the K cache's dtype picking the store, the
MXFP4 outputs sized from the query, the unit scale a float8 cache defaults to, and
compress_norm_rope_store's state_width checked against the state cache.

Run: PYTHONPATH=<build>/python python3 -m unittest discover -s python/tests -p "test_cpu*.py"
"""

import ctypes
import os
import shutil
import tempfile
import unittest

_CACHE_ROOT = tempfile.mkdtemp(prefix="zerojit-python-test-")
os.environ["ZEROJIT_CACHE_DIR"] = _CACHE_ROOT

import zerojit  # noqa: E402
from dsv4_support import refused_compressor_arguments  # noqa: E402
from fake_dlpack import KDL_BFLOAT, KDL_FLOAT, VersionedProducer  # noqa: E402
from zerojit import _core  # noqa: E402

try:
    import numpy
except ImportError:  # pragma: no cover - depends on the interpreter
    numpy = None

NEEDS_NUMPY = unittest.skipIf(
    numpy is None, "numpy is not installed for this interpreter (python3 -m pip install numpy)"
)

KDL_FLOAT8_E4M3FN = 10


def tearDownModule():
    shutil.rmtree(_CACHE_ROOT, ignore_errors=True)


def schema_names(schema):
    return [
        part.split(" ")[-1].split("=")[0] for part in schema[1 : schema.index(") -> ")].split(", ")
    ]


class SignatureTest(unittest.TestCase):
    def test_every_op_has_one_signature_on_every_path(self):
        self.assertEqual(
            set(_core.fast.SCHEMAS),
            {
                "indexer_q_fp8",
                "indexer_q_mxfp4",
                "dequant_gather",
                "c4_store",
                "c128_compress",
                "c128_store",
                "dcp_pack",
            },
        )

        def documented(function, start, end):
            text = function.__doc__
            listed = text[text.index(start) + len(start) : text.index(end, text.index(start))]
            return [argument.split("|")[0] for argument in listed.split(", ")]

        for op, schema in _core.fast.SCHEMAS.items():
            names = schema_names(schema)
            self.assertEqual(names[-1], "pdl", op)
            fast = getattr(_core.fast, op)
            self.assertEqual(documented(fast, "(fast path): (", ", stream)"), names, op)
            # The reference: the same, less the launch option.
            reference = getattr(_core.reference, op)
            self.assertEqual(documented(reference, "host tensors: (", ")"), names[:-1], op)

    def test_the_stores_take_vllms_arguments_in_vllms_order(self):
        self.assertEqual(
            schema_names(_core.fast.SCHEMAS["c4_store"]),
            [
                "state_cache",
                "token_to_req_indices",
                "positions",
                "slot_mapping",
                "block_table",
                "block_size",
                "rms_norm_weight",
                "rms_norm_eps",
                "cos_sin_cache",
                "k_cache",
                "kv_slot_mapping",
                "kv_cache_block_size",
                "kv_block_stride",
                "fp8_scale",
                "store_full_kv",
                "store_full_fp8",
                "pdl",
            ],
        )
        self.assertIn("int? block_size", _core.fast.SCHEMAS["dequant_gather"])
        self.assertIn("bool? store_full_fp8", _core.fast.SCHEMAS["c128_store"])
        self.assertIn("dsv4.c128_store or dsv4.c128_store_full", _core.fast.c128_store.__doc__)

    def test_a_wrong_count_names_the_op(self):
        with self.assertRaisesRegex(TypeError, "fast.c4_store takes 18 positional arguments"):
            _core.fast.c4_store(None)
        with self.assertRaisesRegex(TypeError, "reference.c128_store takes 13 positional"):
            _core.reference.c128_store(None)
        with self.assertRaisesRegex(TypeError, "fast.c128_split takes 19 positional"):
            _core.fast.c128_split(None)


def filled(shape, dtype, data):
    """A host tensor of `dtype` (DLPack's triple) holding `data`'s bytes, 256-byte aligned."""
    tensor = VersionedProducer(shape, dtype)
    raw = numpy.ascontiguousarray(data).tobytes()
    ctypes.memmove(tensor.data, raw, len(raw))
    return tensor


def as_bytes(tensor, count):
    return ctypes.string_at(tensor.data, count)


class C4Inputs:
    """One C4 call's host inputs: two requests, boundary tokens stored into a full-row cache."""

    def __init__(self):
        g = numpy.random.default_rng(3)
        self.state = g.standard_normal((12, 4, 2048)).astype(numpy.float32)
        self.requests = numpy.array([0] * 8 + [1] * 8, numpy.int32)
        self.positions = numpy.array(list(range(8)) + list(range(16, 24)), numpy.int64)
        self.slots = numpy.arange(16, dtype=numpy.int64)
        self.table = numpy.array([[0, 1, 2, 3, 4, 5], [6, 7, 8, 9, 10, 11]], numpy.int32)
        self.weight = numpy.ones(512, numpy.float32)
        self.cos_sin = g.random((64, 64)).astype(numpy.float32)
        self.kv_slots = numpy.where((self.positions + 1) % 4 == 0, self.slots, -1)

    def call(self, function, cache, *extra, **keywords):
        return function(
            self.state,
            self.requests,
            self.positions,
            self.slots,
            self.table,
            4,
            self.weight,
            1e-6,
            self.cos_sin,
            cache,
            self.kv_slots,
            *extra,
            **keywords,
        )


@NEEDS_NUMPY
class RestatedValuesTest(unittest.TestCase):
    def setUp(self):
        self.inputs = C4Inputs()
        self.ds_mla = numpy.zeros((4, 64, 584), numpy.uint8)

    def refused(self, call, argument, kernel, words):
        with self.assertRaises(zerojit.InvalidArgument) as raised:
            call()
        self.assertEqual(raised.exception.argument, argument)
        self.assertEqual(raised.exception.kernel, kernel)
        self.assertIn(words, str(raised.exception))

    def test_block_sizes_strides_and_flags_agree_with_the_tensors_on_both_paths(self):
        functions = (
            zerojit.fused_kv_compress_norm_rope_insert_sparse_attn,
            zerojit.reference.fused_kv_compress_norm_rope_insert_sparse_attn,
        )
        cache = self.ds_mla
        for function in functions:
            call = self.inputs.call
            self.refused(
                lambda: call(function, cache, 32),
                "kv_cache_block_size",
                "dsv4.c4_store",
                "must equal k_cache.shape[1] = 64, got 32",
            )
            self.refused(
                lambda: call(function, cache, 64, 584),
                "kv_block_stride",
                "dsv4.c4_store",
                "must equal k_cache.stride(0) = 37376, got 584",
            )
            self.refused(
                lambda: call(function, cache, store_full_kv=True),
                "store_full_kv",
                "dsv4.c4_store",
                "is True, but k_cache has dtype u8 (True means k_cache is bf16 or e4m3)",
            )
            self.refused(
                lambda: call(function, cache, store_full_fp8=numpy.True_),
                "store_full_fp8",
                "dsv4.c4_store",
                "True means k_cache is e4m3",
            )
            self.refused(
                lambda: call(function, cache, 64.0),
                "kv_cache_block_size",
                "dsv4.c4_store",
                "must be an integer",
            )

    def test_the_caches_dtype_picks_the_store_named_in_every_later_error(self):
        full = VersionedProducer((4, 16, 512), (KDL_BFLOAT, 16, 1))
        for function in (
            zerojit.fused_kv_compress_norm_rope_insert_sparse_attn,
            zerojit.reference.fused_kv_compress_norm_rope_insert_sparse_attn,
        ):
            self.refused(
                lambda: self.inputs.call(function, full, store_full_fp8=True),
                "store_full_fp8",
                "dsv4.c4_store_full",
                "is True, but k_cache has dtype bf16",
            )
            self.refused(
                lambda: self.inputs.call(function, numpy.zeros((4, 16, 512), numpy.float32)),
                "k_cache",
                "dsv4.c4_store",
                "dtype must be u8 (dsv4.c4_store), or bf16 or e4m3 (dsv4.c4_store_full), got f32",
            )

    def test_a_float8_cache_without_a_scale_is_scaled_by_one(self):
        # The reference fills fp8_scale with ones(1), as vLLM's compressor does.
        rows = numpy.full((4, 16, 512), 0x5A, numpy.uint8)
        written = []
        for scale in (None, numpy.ones(1, numpy.float32), numpy.full(1, 0.5, numpy.float32)):
            cache = filled((4, 16, 512), (KDL_FLOAT8_E4M3FN, 8, 1), rows)
            fn = zerojit.reference.fused_kv_compress_norm_rope_insert_sparse_attn
            self.inputs.call(fn, cache, fp8_scale=scale)
            written.append(as_bytes(cache, rows.size))
        self.assertEqual(written[0], written[1])
        self.assertNotEqual(written[1], written[2])
        self.assertNotEqual(written[0], rows.tobytes())

    def test_dequant_gathers_block_size_restates_the_caches(self):
        out = VersionedProducer((1, 16, 512), (KDL_BFLOAT, 16, 1))
        cache = numpy.zeros((2, 64, 584), numpy.uint8)
        for function in (
            zerojit.dequantize_and_gather_k_cache,
            zerojit.reference.dequantize_and_gather_k_cache,
        ):
            self.refused(
                lambda: function(
                    out,
                    cache,
                    numpy.ones(1, numpy.int32),
                    None,
                    numpy.zeros((1, 1), numpy.int32),
                    16,
                ),
                "block_size",
                "dsv4.dequant_gather",
                "must equal k_cache.shape[1] = 64, got 16",
            )

    def test_the_mxfp4_outputs_are_sized_from_the_query(self):
        # D = 100: D / 2 packed bytes would do, D / 32 scales would not.
        q = VersionedProducer((4, 64, 100), (KDL_BFLOAT, 16, 1))
        weights = VersionedProducer((4, 64), (KDL_BFLOAT, 16, 1))
        self.refused(
            lambda: zerojit.fused_indexer_q_rope_quant(
                numpy.zeros(4, numpy.int64),
                q,
                numpy.zeros((64, 64), numpy.float32),
                weights,
                1.0,
                1.0,
                use_fp4=True,
            ),
            "q",
            "dsv4.indexer_q_mxfp4",
            "size of dim 2 must be a multiple of 32 (q_scale holds it divided by 32)",
        )

    def test_state_width_restates_the_state_cache(self):
        state = VersionedProducer((2, 8, 512), (KDL_FLOAT, 32, 1))
        self.refused(
            lambda: zerojit.compress_norm_rope_store(
                *refused_compressor_arguments(state, numpy.zeros(1, numpy.int64)),
                compress_ratio=128,
                rms_norm_weight=VersionedProducer((512,)),
            ),
            "state_cache",
            "dsv4.compressor",
            "its last dimension must be 2 * state_width = 1024",
        )


@NEEDS_NUMPY
class C128SplitTest(unittest.TestCase):
    def test_the_split_checks_the_stores_arguments_naming_the_store(self):
        inputs = C4Inputs()
        state = numpy.zeros((4, 8, 1024), numpy.float32)
        cache = numpy.zeros((4, 2, 584), numpy.uint8)
        with self.assertRaises(zerojit.InvalidArgument) as raised:
            zerojit.split_kv_compress_norm_rope_insert_sparse_attn(
                state,
                inputs.requests,
                inputs.positions,
                inputs.slots,
                numpy.zeros((2, 4), numpy.int32),
                8,
                None,
                inputs.weight,
                1e-6,
                inputs.cos_sin,
                cache,
                inputs.kv_slots,
                3,
            )
        self.assertEqual(raised.exception.kernel, "dsv4.c128_store")
        self.assertEqual(raised.exception.argument, "kv_cache_block_size")


if __name__ == "__main__":
    unittest.main()
