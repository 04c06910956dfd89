"""Triton kernels as an engine writes them, moved to zerojit, without a GPU: the kernels of
triton_engine_kernels called through the engine's launcher (triton_engine_launch), which picks
their meta-parameters from its configuration and passes them as call options; programs that
leave the function's annotations and constexpr defaults to it; divisibility as Triton's binder
gives it; spaces that describe what grid reads; manifest keys back as Key objects; launches on
the stub CUDA driver with their parameter bytes; `python -m zerojit` over the module (keys,
warmup, run on the stub driver and through dispatch alone) and over the built-in families.

Needs Triton (python/tests/requirements.txt); every test skips, saying so, where it cannot be
imported, and the stub-driver tests where the stub library was not built."""

import dataclasses
import json
import os
import struct
import subprocess
import sys
import tempfile
import unittest

import zerojit

TESTS = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, TESTS)

from zerojit.triton_kernels import _annotation_type  # noqa: E402

import lang_support  # noqa: E402
import triton_engine_owners as owners  # noqa: E402
from fake_dlpack import KDL_BFLOAT, KDL_CUDA, KDL_FLOAT, VersionedProducer  # noqa: E402
from lang_support import NEEDS_TRITON  # noqa: E402
from zerojit import DType, TensorDesc  # noqa: E402


def stub_driver():
    """The stub CUDA driver (tests/support/stub_driver.cpp): CTest names it; a build tree has it
    next to the Python package's folder."""
    named = os.environ.get("ZEROJIT_TEST_STUB_DRIVER")
    if named:
        return named if os.path.isfile(named) else None
    package = os.path.dirname(os.path.dirname(os.path.abspath(zerojit.__file__)))
    built = os.path.join(os.path.dirname(package), "tests", "libzerojit_stub_driver.so")
    return built if os.path.isfile(built) else None


NEEDS_STUB = unittest.skipUnless(
    stub_driver() is not None,
    "the stub CUDA driver is not built (the target zerojit_stub_driver; CTest passes "
    "ZEROJIT_TEST_STUB_DRIVER)",
)

BF16, E4M3, F32 = DType.bf16, DType.e4m3, DType.f32
ALL = "kv_ptr,out_ptr,n_out,kv_stride,out_stride"
NOT_N = "kv_ptr,out_ptr,kv_stride,out_stride"
# (ratio, fp8, rows, divisible) over the space's tokens 1000 and 8192: n_out is 250 or 2048 for
# C4 (4 rows a program from 1024 on), 7 or 64 for C128.
COMPRESS = [
    (r, f, rows, d)
    for r, pairs in ((4, ((1, NOT_N), (4, ALL))), (128, ((1, NOT_N), (1, ALL))))
    for f in (False, True)
    for rows, d in pairs
]
MANIFEST = {
    "engine.compress_kv": [
        {"dtype": "bf16", "fp8": f, "ratio": r, "head_dim": 512, "rows": rows, "divisible": d}
        for r, f, rows, d in COMPRESS
    ],
    "engine.split_sum": [{"dtype": d, "splits": s} for d in ("f32", "bf16") for s in (1, 132)],
}
KEYS = sum(len(keys) for keys in MANIFEST.values())


def producer(shape, dtype):
    codes = {BF16: (KDL_BFLOAT, 16, 1), F32: (KDL_FLOAT, 32, 1), E4M3: (10, 8, 1)}
    return VersionedProducer(shape, codes[dtype], device=(KDL_CUDA, 0))


@NEEDS_TRITON
class Manifest(unittest.TestCase):
    def setUp(self):
        zerojit.clear_registrations()
        owners.register_all()
        self.addCleanup(zerojit.clear_registrations)

    def test_the_keys_follow_the_options_and_the_divisibility_triton_would_give(self):
        manifest = zerojit.kernel_manifest()
        by_kernel = {}
        for entry in manifest["entries"]:
            by_kernel.setdefault(entry["kernel"], []).append(entry["key"])
        self.assertEqual(by_kernel, MANIFEST)
        self.assertEqual(manifest["dead_axes"], [])

    def test_a_manifest_entry_gives_its_key_object_back(self):
        for entry in zerojit.kernel_manifest()["entries"]:
            key = zerojit.key_of(entry)
            kernel = zerojit.languages.owner.KernelOwner.named(entry["kernel"])
            self.assertIs(type(key), kernel.Key)
            self.assertEqual(kernel.key_text(key), entry["text"])
            self.assertIsInstance(kernel.program(key), zerojit.TritonProgram)
            self.assertEqual(kernel.key_of(entry["key"]), key)
        self.assertIs(zerojit.key_of(zerojit.kernel_manifest()["entries"][0]).dtype, BF16)

    def test_key_of_names_what_is_wrong(self):
        kernel = owners.SplitSum()
        with self.assertRaises(zerojit.InvalidArgument) as caught:
            kernel.key_of({"dtype": "f32"})
        self.assertEqual(caught.exception.argument, "splits")
        with self.assertRaises(zerojit.InvalidArgument) as caught:
            kernel.key_of({"dtype": "f32", "splits": 1, "block": 2})
        self.assertEqual(caught.exception.argument, "block")
        with self.assertRaises(zerojit.InvalidArgument) as caught:
            kernel.key_of({"kernel": "engine.compress_kv", "key": {}})
        self.assertIn("engine.compress_kv", str(caught.exception))
        with self.assertRaises(ValueError):
            zerojit.key_of({"kernel": "no.such.kernel", "key": {}})


@NEEDS_TRITON
class FunctionsOwnDeclarations(unittest.TestCase):
    """What the function says is not restated: annotated types and constexpr defaults fill the
    program exactly as if it spelled them out, and nothing changes for programs that do."""

    def request(self, kernel, program):
        return kernel._specialize("k", program)

    def test_annotations_and_defaults_make_the_request_a_spelled_out_program_makes(self):
        kernel = owners.CompressKv()
        key = owners.CompressKey(BF16, False, 4, 512, 1, NOT_N)
        short = kernel.program(key)
        spelled = dataclasses.replace(
            short,
            signature={**short.signature, "n_out": "i32", "eps": "fp32"},
            constexprs={**short.constexprs},
            divisible_by_16=NOT_N.split(","),
        )
        self.assertEqual(self.request(kernel, short), self.request(kernel, spelled))
        split = owners.SplitSum()
        program = split.program(owners.SplitKey(F32, 132))
        full = dataclasses.replace(
            program,
            signature={**program.signature, "scale": "fp32"},
            constexprs={"SPLITS": 132, "BLOCK": 1024},
        )
        self.assertEqual(self.request(split, program), self.request(split, full))
        request = json.loads(self.request(split, program)[0])
        self.assertEqual(request["constexprs"], {"BLOCK": 1024, "SPLITS": 132})

    def test_a_spelled_out_program_keeps_its_request(self):
        # The request (part of the identity) of the tests' masked_add, as before call options
        # and inference existed.
        import triton_test_owners

        kernel = triton_test_owners.MaskedAdd()
        key = triton_test_owners.AddKey(F32, 256, 2)
        request, _ = kernel._specialize("k", kernel.program(key))
        self.assertEqual(
            request,
            b'{"signature":{"x_ptr":"*fp32","y_ptr":"*fp32","out_ptr":"*fp32","n":"i32",'
            b'"alpha":"fp32","BLOCK":"constexpr"},"constexprs":{"BLOCK":256},'
            b'"divisible":["out_ptr","x_ptr","y_ptr"],"options":{"num_warps":2}}',
        )

    def test_annotations_read_as_tritons_binder_reads_them(self):
        cases = {
            "int": "i32",
            "float": "fp32",
            "bool": "u1",
            "tl.int64": "i64",
            "triton.language.bfloat16": "bf16",
            "tl.float8e4nv": "fp8e4nv",
            "'*fp32'": "*fp32",
            "'*tl.bfloat16'": "*bf16",
            "'fp16*'": "*fp16",
            "'const fp16*'": "*kfp16",
            "'int32_t'": "i32",
            "torch.Tensor": None,
            "tl.pointer_type(tl.float32)": None,
            None: None,
        }
        for text, expected in cases.items():
            self.assertEqual(_annotation_type(text), expected, text)

    def test_a_default_zerojit_cannot_read_is_named(self):
        with tempfile.TemporaryDirectory() as root:
            with open(os.path.join(root, "unread_kernels.py"), "w") as handle:
                handle.write(
                    "import triton\nimport triton.language as tl\nimport os\n"
                    "BLOCK = tl.constexpr(256)\n"
                    "@triton.jit\ndef f(x_ptr, n: int, A: tl.constexpr = BLOCK,\n"
                    "      B: tl.constexpr = len(os.sep)):\n    pass\n"
                )
            sys.path.insert(0, root)
            self.addCleanup(sys.path.remove, root)

            @dataclasses.dataclass(frozen=True)
            class UnreadKey:
                b: int

            Key = UnreadKey

            class Unread(zerojit.TritonKernel):
                name, fn = "engine.test.unread", "unread_kernels:f"
                Key = UnreadKey

                def dispatch(self):
                    return Key(0)

                def program(self, key):
                    constexprs = {"B": key.b} if key.b else {}
                    return zerojit.TritonProgram({"x_ptr": "*fp32"}, constexprs)

                def grid(self, key):
                    return (1,)

            with self.assertRaises(zerojit.InvalidArgument) as caught:
                Unread().slot(Key(0))
            self.assertEqual(caught.exception.argument, "B")
            self.assertIn("len(os.sep)", str(caught.exception))
            request = json.loads(Unread()._specialize("k", Unread().program(Key(3)))[0])
            self.assertEqual(request["constexprs"], {"A": 256, "B": 3})
            self.assertEqual(request["signature"]["n"], "i32")

    def test_divisible_by_16_is_tritons_binder_rule(self):
        kernel = owners.CompressKv()
        aligned = TensorDesc.contiguous(BF16, (64, 512))
        shifted = TensorDesc.contiguous(BF16, (64, 512), alignment=8)
        self.assertEqual(
            kernel.divisible_by_16(
                out_ptr=shifted, kv_ptr=aligned, n_out=0, kv_stride=-32, out_stride=17
            ),
            "kv_ptr,n_out,kv_stride",
        )
        self.assertEqual(kernel.divisible_by_16(n_out=True, eps=16.0), "")
        with self.assertRaises(zerojit.InvalidArgument) as caught:
            kernel.divisible_by_16(RATIO=16)
        self.assertEqual(caught.exception.argument, "RATIO")


@NEEDS_TRITON
class CallOptions(unittest.TestCase):
    """Options reach dispatch and grid by keyword, are part of the memo, and are checked."""

    def test_options_choose_the_key(self):
        kernel = owners.CompressKv()
        kv, out = TensorDesc.contiguous(BF16, (1000, 512)), TensorDesc.contiguous(BF16, (250, 512))
        args = (kv, out, 250, 512, 512, 1e-6)
        self.assertEqual(kernel.call_key(*args, compress_ratio=4).ratio, 4)
        self.assertTrue(kernel.call_key(*args, compress_ratio=128, fp8=True).fp8)
        self.assertFalse(kernel.call_key(*args, compress_ratio=4).fp8)  # its default
        self.assertEqual(
            owners.SplitSum()
            .call_key(TensorDesc.contiguous(F32, (1 << 20,)), None, 1 << 20)
            .splits,
            132,
        )

    def test_an_unknown_or_missing_option_is_refused_naming_kernel_and_keyword(self):
        kernel = owners.CompressKv()
        kv, out = producer((1000, 512), BF16), producer((250, 512), BF16)
        for call, argument, words in (
            (lambda: kernel(kv, out, 250, 512, 512, 1e-6, ratio=4), "ratio", ["compress_ratio="]),
            (lambda: kernel(kv, out, 250, 512, 512, 1e-6), "compress_ratio", ["without a default"]),
            (
                lambda: kernel(kv, out, 250, 512, 512, 1e-6, compress_ratio=(4,)),
                "compress_ratio",
                ["tuple"],
            ),
        ):
            lang_support.assert_invalid_argument(self, kernel, call, argument, words)

    def test_declarations_are_checked_when_the_kernel_is_made(self):
        def define(name, options, dispatch):
            attributes = {"name": name, "call_options": options, "dispatch": dispatch}
            return type(name.replace(".", "_"), (owners.SplitSum,), attributes)

        cases = (
            ("engine.bad.param", ("n",), "runtime parameter"),
            ("engine.bad.stream", ("stream",), "stream"),
            ("engine.bad.unread", ("num_sms", "extra"), "read by no method"),
            ("engine.bad.form", "num_sms", "sequence of names"),
        )
        for name, options, words in cases:
            with self.assertRaises(zerojit.InvalidArgument) as caught:
                define(name, options, lambda self, x_ptr, n, num_sms=0: owners.SplitKey(F32, 1))()
            self.assertIn(words, str(caught.exception), name)
            self.assertIn(name, str(caught.exception))
        with self.assertRaises(zerojit.InvalidArgument) as caught:
            define("engine.bad.name", (), lambda self, x_ptr, sms: owners.SplitKey(F32, 1))()
        self.assertIn("'sms'", str(caught.exception))
        self.assertIn("call_options", str(caught.exception))

    def test_a_space_describes_the_call_and_checks_grid_at_its_points(self):
        kernel = owners.CompressKv()
        self.assertEqual(len(kernel.expand().keys), len(MANIFEST["engine.compress_kv"]))
        with self.assertRaises(zerojit.Error) as caught:
            kernel.expand(zerojit.Space(lambda p: {"kv": 1}).choices("x", [1]))
        self.assertIn("'kv'", str(caught.exception.__cause__ or caught.exception))

        class NegativeGrid(owners.SplitSum):
            name = "engine.test.negative_grid"

            def grid(self, key, n):
                return (-n,)

        with self.assertRaises(zerojit.Error) as caught:
            NegativeGrid().expand()
        self.assertIn("grid", str(caught.exception.__cause__ or caught.exception))


def warm_pack(cache, arch="sm_90a"):
    return lang_support.run_python(
        "triton_engine_owners", lang_support.warmup_code("triton", cache, arch)
    )


STUB_CALLS = """
import triton_engine_launch as launch
from fake_dlpack import VersionedProducer, KDL_BFLOAT, KDL_CUDA, KDL_FLOAT
report = zerojit.warmup_kernels(cache_dir=CACHE, monitor="error")
def tensor(shape, code):
    return VersionedProducer(shape, code, device=(KDL_CUDA, 0))
kv, out = tensor((1000, 512), (KDL_BFLOAT, 16, 1)), tensor((250, 512), (KDL_BFLOAT, 16, 1))
launch.compress(kv, out, 1000, launch.CompressorConfig(4))
x, partial = tensor((1 << 20,), (KDL_FLOAT, 32, 1)), tensor((132,), (KDL_FLOAT, 32, 1))
launch.split_sum(x, partial, 132)
launch.split_sum(x, partial, 132, 0.5)
counters = zerojit.monitor.counters()
print(json.dumps({"totals": report["totals"], "pointers": [t.data for t in (kv, out, x, partial)],
                  "compiles": sum(counters[k.name]["compiles"] for k in owners.KERNELS),
                  "runtime_jit": sum(counters[k.name]["runtime_jit"] for k in owners.KERNELS)}))
"""


@NEEDS_TRITON
@NEEDS_STUB
class StubLaunches(unittest.TestCase):
    """The engine's launcher on the stub driver: warmup loads every key, the calls launch with
    the parameters Triton's launcher would pack, nothing compiles after warmup."""

    def test_the_launchers_calls_launch_with_their_parameter_bytes(self):
        with tempfile.TemporaryDirectory() as cache:
            self.assertEqual(warm_pack(cache)["totals"]["compiled"], KEYS)
            log = os.path.join(cache, "stub.log")
            result = lang_support.run_python(
                "triton_engine_owners",
                f"CACHE = {cache!r}\n" + STUB_CALLS,
                env={"ZEROJIT_TESTING_CUDA_DRIVER": stub_driver(), "ZEROJIT_STUB_LOG": log},
            )
            with open(log) as handle:
                events = [json.loads(line) for line in handle]
        self.assertEqual(result["totals"]["from_disk"], KEYS)
        self.assertEqual((result["compiles"], result["runtime_jit"]), (0, 0))
        self.assertEqual(sum(e["event"] == "module_load" for e in events), KEYS)
        launches = [e for e in events if e["event"] == "launch"]
        self.assertEqual([e["function"] for e in launches], ["compress_kv", *["split_sum"] * 2])
        kv, out, x, partial = result["pointers"]

        def pointer(value):
            return struct.pack("<Q", value).hex()

        scratch = [pointer(0)] * 2  # Triton's global and profile scratch pointers
        compress, whole, half = launches
        self.assertEqual(compress["grid"], [250, 1, 1])  # C4 over 1000 tokens, a row a program
        self.assertEqual(compress["block"], [128, 1, 1])  # Triton's default 4 warps
        self.assertEqual(
            compress["params"],
            [pointer(kv), pointer(out), struct.pack("<i", 250).hex()]
            + [struct.pack("<i", 512).hex()] * 2
            + [struct.pack("<f", 1e-6).hex()]
            + scratch,
        )
        self.assertEqual(whole["grid"], [132, 1, 1])  # SPLITS = num_sms for a large n
        for launch, scale in ((whole, 1.0), (half, 0.5)):  # scale left out: the default 1.0
            self.assertEqual(
                launch["params"],
                [pointer(x), pointer(partial), struct.pack("<i", 1 << 20).hex()]
                + [struct.pack("<f", scale).hex()]
                + scratch,
            )


@NEEDS_TRITON
class Tool(unittest.TestCase):
    """`python -m zerojit` in this interpreter: the Python family (--module) with `run`, and the
    built-in families, with the tool's exit codes and --json."""

    def tool(self, *arguments, env=None):
        done = subprocess.run(
            [sys.executable, "-m", "zerojit", *arguments],
            capture_output=True,
            text=True,
            timeout=900,
            env=lang_support.environment({"ZEROJIT_TOOL": "", **(env or {})}),
        )
        return done

    def document(self, done, code=0):
        self.assertEqual(done.returncode, code, done.stderr)
        document = json.loads(done.stdout)
        self.assertEqual(document["exit_code"], code)
        return document

    def test_keys_warmup_and_run_through_dispatch(self):
        keys = self.document(self.tool("keys", "--module", "triton_engine_launch", "--json"))
        self.assertEqual(len(keys["result"]["keys"]), KEYS)
        with tempfile.TemporaryDirectory() as cache:
            warm = self.tool(
                "warmup", "--module", "triton_engine_launch", "--compile-only",
                "--cache-dir", cache, "--jobs", "2", "--json",
            )  # fmt: skip
            self.assertEqual(self.document(warm)["result"]["totals"]["compiled"], KEYS)
            run = self.tool(
                "run", "--module", "triton_engine_launch", "--dispatch-only",
                "--steps", "16", "--cache-dir", cache, "--json",
            )  # fmt: skip
        result = self.document(run)["result"]
        self.assertEqual(result["mode"], "dispatch-only")
        self.assertEqual(result["calls"], 16 * 5)
        self.assertEqual(result["runtime_jit"], [])

    @NEEDS_STUB
    def test_run_on_the_stub_driver_warms_loads_and_launches_every_call(self):
        with tempfile.TemporaryDirectory() as cache:
            log = os.path.join(cache, "stub.log")
            run = self.tool(
                "run", "--module", "triton_engine_launch", "--steps", "4",
                "--cache-dir", cache, "--jobs", "2", "--json",
                env={"ZEROJIT_TESTING_CUDA_DRIVER": stub_driver(), "ZEROJIT_STUB_LOG": log},
            )  # fmt: skip
            result = self.document(run)["result"]
            with open(log) as handle:
                launches = sum(json.loads(line)["event"] == "launch" for line in handle)
        self.assertEqual(result["mode"], "gpu")
        self.assertEqual(result["warmup"]["totals"]["compiled"], KEYS)
        self.assertEqual((result["calls"], launches), (4 * 5, 4 * 5))
        self.assertEqual(result["runtime_jit_after_warmup"], 0)

    def test_a_call_outside_the_manifest_fails_run_and_no_battery_is_a_usage_error(self):
        with tempfile.TemporaryDirectory() as root:
            with open(os.path.join(root, "narrow_engine.py"), "w") as handle:
                handle.write(
                    "import zerojit, triton_engine_launch as launch, triton_engine_owners as o\n"
                    "zerojit.clear_registrations()\n"
                    "zerojit.register(o.SplitSum, zerojit.Space(lambda p: {'x_ptr': "
                    "zerojit.TensorDesc.contiguous('f32', (1000,)), 'n': 1000}))\n"
                    "zerojit.register(o.CompressKv)\n"
                )
            env = {"PYTHONPATH": os.pathsep.join([root, TESTS, os.environ.get("PYTHONPATH", "")])}
            run = self.tool(
                "run", "--module", "narrow_engine", "--dispatch-only", "--json", env=env
            )
            document = self.document(run, 1)
            self.assertIn("engine.split_sum", document["error"]["message"])
            none = self.tool("run", "--module", "triton_registered", "--dispatch-only")
            self.assertEqual(none.returncode, 2, none.stderr)
            self.assertIn("register_battery", none.stderr)

    def test_the_built_in_families_and_the_cache_run_in_process(self):
        keys = self.document(self.tool("keys", "--examples", "--json"))
        self.assertEqual(len(keys["result"]["keys"]), 5)
        with tempfile.TemporaryDirectory() as cache:
            listed = self.document(self.tool("cache", "ls", "--cache-dir", cache, "--json"))
            self.assertEqual(listed["command"], "cache ls")
        version = self.tool("--version")
        self.assertEqual(version.returncode, 0, version.stderr)


if __name__ == "__main__":
    unittest.main()
