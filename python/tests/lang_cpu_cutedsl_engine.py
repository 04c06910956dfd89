"""CuTeDSL kernels written the way engines write theirs, on zerojit without a GPU
(cute_engine_kernels.py, cute_engine_owners.py): class-based entries built in the worker,
optional tensors, padded strided paged caches, shared symbolic extents and the DSL's own types
as configuration compile for sm_90a and are served from the cache to another process; what
the compiled code assumes of a call is checked; every mistake in a program is named. The calls
themselves run to the exported entry in lang_stub_cutedsl.py, on the stub driver.

Needs nvidia-cutlass-dsl (python/tests/requirements.txt); every test skips, saying so, where it
cannot be imported."""

import json
import tempfile
import unittest

import cute_engine_owners as owners
import cute_test_owners
import lang_support
import zerojit
from fake_dlpack import KDL_BFLOAT, KDL_CUDA, KDL_INT, KDL_UINT, VersionedProducer
from lang_cpu_cutedsl import NEEDS_DSL
from zerojit import CuteProgram, CuteSym, CuteTensor, DType

MANIFEST = {
    "tests.cute_engine.paged_gather": [
        {"dtype": d, "block_size": 2, "has_gather_lens": g}
        for d in ("bf16", "f16")
        for g in (False, True)
    ],
    "tests.cute_engine.indexer_logits": [
        {"quant": q, "heads": h} for q in ("fp8", "mxfp4") for h in (32, 64)
    ],
}
KEYS = sum(len(keys) for keys in MANIFEST.values())
BF16, U8, I32 = (KDL_BFLOAT, 16, 1), (KDL_UINT, 8, 1), (KDL_INT, 32, 1)
GATHER_KEY = owners.GatherKey(DType.bf16, 2, True)


def cuda(shape, dtype, strides=None):
    return VersionedProducer(shape, dtype, device=(KDL_CUDA, 0), strides=strides)


def gather_call(reqs=3, rows=5, page_stride=owners.PAGE_BYTES, lens=True, seq_reqs=None):
    """PagedGather's arguments for `reqs` requests, pages `page_stride` bytes apart."""
    return (
        cuda((reqs, rows, owners.HEAD_DIM), BF16),
        cuda((16, owners.BLOCK, owners.ROW_BYTES), U8, (page_stride, owners.ROW_BYTES, 1)),
        cuda((reqs, 8), I32),
        cuda((seq_reqs or reqs,), I32),
        cuda((reqs,), I32) if lens else None,
        0.5,
    )


def refused(test, call, argument, words):
    with test.assertRaises(zerojit.InvalidArgument) as caught:
        call()
    test.assertEqual(caught.exception.argument, argument)
    for word in words:
        test.assertIn(word, str(caught.exception))
    return str(caught.exception)


@NEEDS_DSL
class Warmup(unittest.TestCase):
    def test_the_manifest_is_every_key_dispatch_gives(self):
        by_kernel, _ = lang_support.manifest_keys(owners.register_all)
        self.assertEqual(by_kernel, MANIFEST)

    def test_compiled_in_workers_then_served_with_no_compile_and_no_dsl(self):
        with tempfile.TemporaryDirectory() as cache:
            code = lang_support.warmup_code("cutlass", cache, "sm_90a", 2)
            cold = lang_support.run_python("cute_engine_owners", code)
            self.assertEqual(cold["totals"]["failed"], 0, cold["keys"])
            self.assertEqual(cold["compiles"], KEYS)
            warm = lang_support.run_python("cute_engine_owners", code)
            self.assertEqual((warm["totals"]["from_disk"], warm["compiles"]), (KEYS, 0))
            self.assertFalse(warm["compiler_imported"])


# Every key compiled by warmup's workers (no in-process JIT engine; the zygote made one) and by
# cute.compile in this process (with its engine, as an engine calls it), then exported: the
# objects must be the same bytes.
SAME_OBJECTS = """
import glob, os, tempfile
os.environ["CUTE_DSL_ARCH"] = "sm_90a"
import cutlass, cutlass.cute as cute
from cutlass.cute import runtime
from zerojit.languages import compile_worker
from zerojit.languages.cutedsl import compile as cute_compile
cache, out = tempfile.mkdtemp(), tempfile.mkdtemp()
owners.register_all()
zerojit.warmup_kernels(cache_dir=cache, compile_only=True, arch="sm_90a", jobs=2)
stored = [open(f, "rb").read() for f in glob.glob(os.path.join(cache, "entries", "*"))]
same = []
for cls in owners.KERNELS:
    kernel = cls()
    for key in kernel.expand().keys:
        text = ", ".join(f"{f}={getattr(key, f)}" for f, _ in kernel._fields)
        request, _ = zerojit.cute_kernels._specialize(kernel.name, text, kernel._source,
                                                      kernel.program(key))
        request = dict(json.loads(request), module=kernel._source.module,
                       qualname=kernel._source.qualname)
        fn = cute_compile._entry(request, compile_worker.Worker, cutlass)
        fakes = cute_compile._cute_fakes(request, cutlass, cute, runtime)
        compiled = cute.compile(fn, *fakes, options="--gpu-arch sm_90a")
        compiled.export_to_c(out, "entry", function_prefix=request["prefix"])
        image = open(os.path.join(out, "entry.o"), "rb").read()
        same.append(any(image in entry for entry in stored))
print(json.dumps(same))
"""


# The identity of PagedGather's key in a fresh process, its program's init given as the owner
# writes it (a zerojit DType) or as the DSL's own type (what an engine's code holds).
IDENTITY = """
import cutlass
kernel = owners.PagedGather()
key = owners.GatherKey(zerojit.DType.bf16, 2, True)
if SPELLING == "dsl":
    base = kernel.program
    def program(key):
        made = base(key)
        return zerojit.CuteProgram(made.arguments, init=dict(made.init, dtype=cutlass.BFloat16))
    kernel.program = program
print(json.dumps(kernel._core.identity(kernel.slot(key), "sm_90a")))
"""


@NEEDS_DSL
class Objects(unittest.TestCase):
    def test_the_workers_objects_are_the_processs_byte_for_byte(self):
        self.assertEqual(lang_support.run_python("cute_engine_owners", SAME_OBJECTS), [True] * KEYS)


@NEEDS_DSL
class Identity(unittest.TestCase):
    def test_a_dtype_and_the_dsls_type_are_one_identity_in_every_process(self):
        identities = {
            lang_support.run_python("cute_engine_owners", f"SPELLING = {s!r}\n" + IDENTITY)
            for s in ("dtype", "dsl", "dtype")
        }
        self.assertEqual(len(identities), 1)

    def test_the_request_names_what_the_worker_builds(self):
        kernel = owners.PagedGather()
        request, spec = zerojit.cute_kernels._specialize(
            kernel.name, "k", kernel._source, kernel.program(GATHER_KEY)
        )
        request = json.loads(request)
        self.assertEqual(
            request["init"], {"block_size": 2, "dtype": {"cutlass": "BFloat16"}, "head_dim": 512}
        )
        self.assertEqual(request["symbols"], [{"divisibility": 1, "name": "num_reqs", "width": 32}])
        cache = request["arguments"]["mCache"]
        self.assertEqual((cache["stride"], cache["stride_div"]), ([-1, 584, 1], [32, 1, 1]))
        out = request["arguments"]["mOut"]  # the engines' helper: strides divisible, extents not
        self.assertEqual((out["shape_div"], out["stride_div"]), ([1, 1, 1], [8, 8, 1]))
        self.assertEqual((out["shape_sym"], out["assumed_align"]), ([0, -1, -1], 16))
        self.assertEqual([p for p, _ in request["params"]][0], "mOut")  # self is the object's
        self.assertEqual([e["kind"] for e in spec][4], "tensor")
        absent = kernel.program(owners.GatherKey(DType.bf16, 2, False))
        request, _ = zerojit.cute_kernels._specialize(kernel.name, "k", kernel._source, absent)
        self.assertEqual(json.loads(request)["arguments"]["mGatherLens"], {"kind": "none"})


def header_of(request, wide=(), args_more=0):
    """The structs and argument list an export of `request` declares (as c_header_arguments
    gives them), with the tensors in `wide` declaring 64-bit extents instead."""
    parts, count = [], 1
    for name, spec in request["arguments"].items():
        count += spec["kind"] != "none"
        if spec["kind"] != "tensor":
            continue
        shapes = sum(1 for extent in spec["shape"] if extent < 0)
        width = 64 if name in wide else 8 * spec["shape_bytes"]
        fields = f"int{width}_t dynamic_shapes[{shapes}];" if shapes else ""
        if spec["dynamic_strides"]:
            fields += f" int64_t dynamic_strides[{len(spec['dynamic_strides'])}];"
        parts.append(f"typedef struct {{ void *data; {fields} }} dummy_Tensor_{name}_t;")
    count += sum(1 for _, kind in request["params"] if kind == "stream")
    return "\n".join(parts + [f"void *args[{count + args_more}]"])


class HeaderCheck(unittest.TestCase):
    """The worker's check of every export against the layout the packer fills (no DSL needed):
    an export that differs is a compile error, never a wrong call."""

    def test_an_export_that_differs_is_refused(self):
        from zerojit.languages.cutedsl import compile as cute_compile

        class Refused(Exception):
            pass

        kernel = owners.PagedGather()
        for has_lens in (False, True):
            program = kernel.program(owners.GatherKey(DType.bf16, 2, has_lens))
            request, _ = zerojit.cute_kernels._specialize(kernel.name, "k", kernel._source, program)
            request = json.loads(request)
            cute_compile._check_header(header_of(request), request, Refused)
            with self.assertRaisesRegex(Refused, "struct of 'mCache'"):
                cute_compile._check_header(header_of(request, wide=("mCache",)), request, Refused)
            with self.assertRaisesRegex(Refused, "arguments where zerojit passes"):
                cute_compile._check_header(header_of(request, args_more=1), request, Refused)


@NEEDS_DSL
class ProgramChecks(unittest.TestCase):
    """A program's mistakes are named before anything compiles: kernel, key and argument."""

    def refused_program(self, name, program, field, words, base=owners.PagedGather, key=GATHER_KEY):
        attributes = {"name": name, "program": lambda self, key: program}
        kernel = type(name.replace(".", "_"), (base,), attributes)()
        refused(self, lambda: kernel.slot(key), field, [name] + words)

    def arguments(self, **changes):
        base = dict(owners.PagedGather().program(GATHER_KEY).arguments)
        base.update(changes)
        return base

    def program(self, **changes):
        return CuteProgram(self.arguments(**changes), init={"dtype": DType.bf16})

    def test_symbols(self):
        other = CuteTensor(DType.i32, (CuteSym("num_reqs", divisibility=4),), assumed_align=4)
        self.refused_program(
            "bad.engine.symbol",
            self.program(mSeqLens=other),
            "mSeqLens",
            ["num_reqs", "divisibility"],
        )
        narrow = CuteTensor(DType.i32, (None, None), stride=(CuteSym("s", width=32), 1))
        self.refused_program(
            "bad.engine.stride_width", self.program(mBlockTable=narrow), "mBlockTable", ["64-bit"]
        )
        mixed = CuteTensor(DType.i32, (CuteSym("wide", width=64), None), assumed_align=4)
        self.refused_program(
            "bad.engine.widths", self.program(mBlockTable=mixed), "mBlockTable", ["widths [32, 64]"]
        )

    def test_strides(self):
        both = CuteTensor(DType.i32, (None,), stride_order=(0,), stride=(1,))
        self.refused_program(
            "bad.engine.both", self.program(mSeqLens=both), "mSeqLens", ["not both"]
        )
        negative = CuteTensor(DType.i32, (None, 8), stride=(-8, 1))
        self.refused_program(
            "bad.engine.negative", self.program(mBlockTable=negative), "mBlockTable", [">= 0"]
        )
        short = CuteTensor(DType.i32, (None, 8), stride=(None,))
        self.refused_program(
            "bad.engine.short", self.program(mBlockTable=short), "mBlockTable", ["1 strides"]
        )

    def test_constants_and_init(self):
        self.refused_program(
            "bad.engine.init_value",
            CuteProgram(self.arguments(), init={"dtype": object()}),
            "init",
            ["dtype", "a type of the DSL"],
        )
        vector = CuteTensor(DType.f32, (None,))
        self.refused_program(
            "bad.engine.init_on_function",
            CuteProgram({"mA": vector, "mB": vector, "mC": vector, "alpha": "f32"}, init={}),
            "init",
            ["is a function", "dtype=f32"],
            base=cute_test_owners.ScaledAdd,
            key=cute_test_owners.AddKey(DType.f32),
        )
        with self.assertRaises(zerojit.InvalidArgument) as caught:
            type(
                "NoMethod",
                (owners.PagedGather,),
                {"name": "bad.engine.no_method", "fn": "cute_engine_kernels:PagedGather.run"},
            )()
        self.assertIn("class 'PagedGather' with a method 'run'", str(caught.exception))

    def test_a_dtype_constexpr_is_the_dsls_type(self):
        self.assertEqual(
            zerojit.cute_kernels._program.encode_constant((DType.e4m3, 128, None)),
            [{"cutlass": "Float8E4M3FN"}, 128, None],
        )
        with self.assertRaises(ValueError):
            zerojit.cute_kernels._program.encode_constant(float("nan"))


@NEEDS_DSL
class CallChecks(unittest.TestCase):
    """What the compiled code assumes and cannot check, checked at every call before anything
    runs (on the stub driver, lang_stub_cutedsl.py runs the valid ones to the entry)."""

    @unittest.skipIf(zerojit.driver_available(), "a CUDA driver is installed here")
    def test_a_padded_strided_cache_and_any_batch_pass_every_check(self):
        kernel = owners.PagedGather()
        for reqs in (1, 3, 7):  # extents the engines' helper would have tied to divisibility 8
            with self.assertRaises(zerojit.UnavailableError):  # only the driver is missing
                kernel(*gather_call(reqs=reqs))

    def test_refusals_name_the_argument(self):
        kernel = owners.PagedGather()
        refused(self, lambda: kernel(*gather_call(page_stride=1730)), "mCache", ["multiple of 32"])
        refused(self, lambda: kernel(*gather_call(seq_reqs=4)), "mSeqLens", ["'num_reqs' is 3"])
        bad_rows = cuda((16, 2, owners.ROW_BYTES), U8, (owners.PAGE_BYTES, 600, 1))
        call = list(gather_call())
        call[1] = bad_rows
        refused(self, lambda: kernel(*call), "mCache", ["static at 584"])


if __name__ == "__main__":
    unittest.main()
