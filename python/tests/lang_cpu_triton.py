"""Triton kernels on zerojit without a GPU: exact manifests, compile-only warmups for sm_90a and
sm_100a, identities, single flight across processes, a pack served where Triton cannot be
imported, the checks of a call against its specialization, the JIT monitor and the Triton
guard, and the tool over Python modules.

Needs Triton (python/tests/requirements.txt, in the environment scripts/setup.sh makes); every
test skips, saying so, where it cannot be imported. Warmups run in subprocesses, each with its
own cache directory, so that no test sees another's compiles."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import unittest

import zerojit

TESTS = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, TESTS)

import lang_support  # noqa: E402
import triton_test_owners as owners  # noqa: E402
from fake_dlpack import KDL_CUDA, KDL_FLOAT, KDL_INT, VersionedProducer  # noqa: E402
from lang_support import NEEDS_TRITON  # noqa: E402

MANIFEST = {
    "tests.triton.masked_add": [
        {"dtype": d, "block": b, "num_warps": w}
        for d in ("f32", "f16", "bf16")
        for b, w in ((256, 2), (1024, 4))
    ],
    "tests.triton.row_sum": [
        {"dtype": d, "block_cols": b, "aligned_rows": a}
        for d in ("f32", "bf16")
        for b, a in ((64, True), (128, False), (128, True), (256, True), (512, True), (1024, False))
    ],
    "tests.triton.matmul_tile": [
        {"dtype": d, "block_m": m, "block_n": m, "block_k": 32, "num_warps": w, "num_stages": s}
        for d in ("f16", "bf16")
        for m, w, s in ((64, 4, 2), (128, 8, 3))
    ],
    "tests.triton.int_widths": [{"base": w} for w in ("i32", "i64", "u64")],
    "tests.triton.pdl_scale": [{"block": 512}],
}
KEYS = sum(len(keys) for keys in MANIFEST.values())


def run_python(code, env=None, timeout=900):
    return lang_support.run_python("triton_test_owners", code, env, timeout)


def warmup_code(cache, arch, jobs=2, prelude=""):
    return lang_support.warmup_code("triton", cache, arch, jobs, prelude)


@NEEDS_TRITON
class Manifests(unittest.TestCase):
    def test_the_manifest_is_exactly_the_keys_dispatch_gives_over_the_spaces(self):
        by_kernel, manifest = lang_support.manifest_keys(owners.register_all)
        self.assertEqual(by_kernel, MANIFEST)
        self.assertEqual(manifest["dead_axes"], [])

    def test_a_call_takes_the_runtime_parameters_in_order(self):
        self.assertEqual(
            owners.MaskedAdd().runtime_params, ("x_ptr", "y_ptr", "out_ptr", "n", "alpha")
        )
        self.assertEqual(
            owners.MatmulTile().runtime_params,
            (
                "a_ptr",
                "b_ptr",
                "c_ptr",
                "M",
                "N",
                "K",
                "stride_am",
                "stride_ak",
                "stride_bk",
                "stride_bn",
                "stride_cm",
            ),
        )


@NEEDS_TRITON
class Identities(unittest.TestCase):
    """A Triton entry's identity is the source the kernel runs (its own, its helpers', across
    modules), never where that source sits in its file."""

    KERNEL = """
import triton
import triton.language as tl
from .helpers import twice, SCALE

@triton.jit
def unrelated(x_ptr):
    pass

@triton.jit
def scaled(x_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(x_ptr + offsets, twice(tl.load(x_ptr + offsets, mask=mask)) * SCALE, mask=mask)
"""
    HELPERS = """
import triton

SCALE = 3.0

@triton.jit
def twice(x):
    return x + x
"""
    IDENTITY = """
import dataclasses
@dataclasses.dataclass(frozen=True)
class Key:
    block: int
class Scaled(zerojit.TritonKernel):
    name, fn, Key = "ident.scaled", "idpkg.kernels:scaled", Key
    def dispatch(self): return Key(256)
    def program(self, key):
        return zerojit.TritonProgram({"x_ptr": "*fp32", "n": "i32"}, {"BLOCK": key.block})
    def grid(self, key, n): return (1,)
print(json.dumps([Scaled().identity(Key(256), arch) for arch in ("sm_90a", "sm_100a")]))
"""

    def identity(self, kernel, helpers):
        with tempfile.TemporaryDirectory() as root:
            package = os.path.join(root, "idpkg")
            os.mkdir(package)
            for name, text in (
                ("__init__.py", ""),
                ("kernels.py", kernel),
                ("helpers.py", helpers),
            ):
                with open(os.path.join(package, name), "w") as handle:
                    handle.write(text)
            return run_python(
                self.IDENTITY,
                env={
                    "PYTHONPATH": os.pathsep.join([root, TESTS, os.environ.get("PYTHONPATH", "")])
                },
            )

    def test_line_numbers_and_unused_code_leave_it_alone_the_helpers_source_does_not(self):
        base = self.identity(self.KERNEL, self.HELPERS)
        self.assertNotEqual(base[0], base[1])  # the arch (and its ptxas) is part of it
        moved = self.KERNEL.replace(
            "@triton.jit\ndef scaled", "\n\n# moved down\n\n@triton.jit\ndef scaled"
        )
        self.assertEqual(self.identity(moved, self.HELPERS), base)
        unrelated = self.KERNEL.replace("    pass", "    tl.store(x_ptr, 1.0)")
        self.assertEqual(self.identity(unrelated, self.HELPERS), base)
        self.assertEqual(self.identity(self.KERNEL, "\n\n" + self.HELPERS), base)
        self.assertNotEqual(
            self.identity(self.KERNEL, self.HELPERS.replace("x + x", "2 * x")), base
        )
        self.assertNotEqual(self.identity(self.KERNEL, self.HELPERS.replace("3.0", "4.0")), base)


@NEEDS_TRITON
class CompileOnlyWarmup(unittest.TestCase):
    def test_every_key_compiles_for_sm90a_and_sm100a_then_serves_from_disk(self):
        with tempfile.TemporaryDirectory() as cache:
            for arch in ("sm_90a", "sm_100a"):
                cold = run_python(warmup_code(cache, arch))
                self.assertEqual(cold["totals"]["keys"], KEYS, arch)
                self.assertEqual(cold["totals"]["failed"], 0, arch)
                self.assertEqual(cold["totals"]["compiled"], KEYS, arch)
                self.assertEqual(cold["compiles"], KEYS, arch)
                warm = run_python(warmup_code(cache, arch))
                self.assertEqual(warm["totals"]["from_disk"], KEYS, arch)
                self.assertEqual(warm["compiles"], 0, arch)
                # Serving from disk never imports Triton (the owners name their functions).
                self.assertFalse(warm["compiler_imported"], arch)
            entries = run_python(f"""
                print(json.dumps(zerojit.cache.ls({cache!r})))
            """)
            languages = {(e["arch"], e["language"]) for e in entries}
            self.assertEqual(languages, {("sm_90a", "triton"), ("sm_100a", "triton")})
            self.assertEqual(len(entries), 2 * KEYS)
            self.assertTrue(all(e["compiler"].startswith("triton-3.6") for e in entries))

    def test_eight_processes_on_a_cold_cache_compile_each_key_once(self):
        with tempfile.TemporaryDirectory() as cache:
            environment = lang_support.environment()
            code = "import json, sys, zerojit, triton_test_owners as owners\n" + warmup_code(
                cache, "sm_90a", jobs=1
            )
            processes = [
                subprocess.Popen(
                    [sys.executable, "-c", code],
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                    env=environment,
                )
                for _ in range(8)
            ]
            results = []
            for process in processes:
                out, err = process.communicate(timeout=1500)
                self.assertEqual(process.returncode, 0, err)
                results.append(json.loads(out.strip().splitlines()[-1]))
            for result in results:
                self.assertEqual(result["totals"]["failed"], 0)
                self.assertEqual(result["totals"]["keys"], KEYS)
            self.assertEqual(sum(r["compiles"] for r in results), KEYS)


@NEEDS_TRITON
class ServingWithoutTriton(unittest.TestCase):
    # As if Triton were not installed: `import triton` fails, find_spec gives None.
    BLOCK_TRITON = """
sys.modules["triton"] = None
"""

    def test_a_pack_built_here_serves_a_process_where_triton_cannot_be_imported(self):
        with tempfile.TemporaryDirectory() as pack:
            built = run_python(warmup_code(pack, "sm_90a"))
            self.assertEqual(built["totals"]["compiled"], KEYS)
            # The serving process: no Triton, the pack read-only under another root.
            with tempfile.TemporaryDirectory() as root:
                served = run_python(
                    warmup_code(root, "sm_90a", prelude=self.BLOCK_TRITON),
                    env={"ZEROJIT_CACHE_READONLY_DIRS": pack},
                )
            self.assertEqual(served["totals"]["failed"], 0)
            self.assertEqual(served["totals"]["from_disk"], KEYS)
            self.assertEqual(served["compiles"], 0)
            self.assertFalse(served["compiler_imported"])

    def test_without_triton_and_without_a_pack_the_key_fails_naming_triton(self):
        with tempfile.TemporaryDirectory() as root:
            result = run_python(
                self.BLOCK_TRITON
                + f"""
zerojit.register(owners.PdlScale)
report = zerojit.warmup_kernels(cache_dir={root!r}, compile_only=True, raise_on_failure=False)
print(json.dumps(report["keys"]))
""",
                env={"ZEROJIT_CACHE_READONLY_DIRS": ""},
            )
        self.assertEqual(len(result), 1)
        self.assertIn("Triton", result[0]["error"])


@NEEDS_TRITON
@unittest.skipIf(
    shutil.which("redis-server") is None,
    "redis-server is not installed (scripts/setup.sh installs it)",
)
class RedisTier(unittest.TestCase):
    def test_a_second_host_takes_the_triton_entries_from_redis_and_compiles_nothing(self):
        with lang_support.redis_server() as port:
            remote = {"ZEROJIT_REMOTE_CACHE": f"redis://127.0.0.1:{port}/0"}
            with tempfile.TemporaryDirectory() as first, tempfile.TemporaryDirectory() as second:
                built = run_python(warmup_code(first, "sm_90a"), env=remote)
                self.assertEqual(built["compiles"], KEYS)
                fetched = run_python(warmup_code(second, "sm_90a"), env=remote)
        self.assertEqual(fetched["totals"]["failed"], 0)
        self.assertEqual(fetched["compiles"], 0)
        self.assertEqual(fetched["totals"]["from_disk"], KEYS)


def owner(
    name,
    program=None,
    dispatch=None,
    grid=None,
    fn="triton_test_kernels:masked_add",
    key=owners.AddKey,
):
    """A masked_add owner with one part replaced (each test's class is its own kernel)."""
    base = owners.MaskedAdd
    attributes = {"name": name, "fn": fn, "Key": key}
    if program is not None:
        attributes["program"] = lambda self, k: program(k)
    if dispatch is not None:
        attributes["dispatch"] = dispatch
    if grid is not None:
        attributes["grid"] = grid
    return type(name.replace(".", "_"), (base,), attributes)


KEY = owners.AddKey(zerojit.DType.f32, 256, 2)
SIGNATURE = {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "alpha": "fp32"}


@NEEDS_TRITON
class BadPrograms(unittest.TestCase):
    """Every mistake in a program is an InvalidArgument naming the kernel, key and field, raised
    where the key is interned (dispatch's caller), before anything compiles."""

    def refused(self, name, program, field, words):
        kernel = owner(name, program)()
        with self.assertRaises(zerojit.InvalidArgument) as caught:
            kernel.slot(KEY)
        message = str(caught.exception)
        self.assertIn(name, message)
        self.assertIn("dtype=f32, block=256, num_warps=2", message)
        self.assertEqual(caught.exception.argument, field)
        for word in words:
            self.assertIn(word, message)

    def test_a_constexpr_without_a_value(self):
        self.refused(
            "bad.no_constexpr",
            lambda k: zerojit.TritonProgram(SIGNATURE),
            "BLOCK",
            ["tl.constexpr", "BLOCK"],
        )

    def test_a_runtime_parameter_without_a_type(self):
        signature = {k: v for k, v in SIGNATURE.items() if k != "alpha"}
        self.refused(
            "bad.no_type",
            lambda k: zerojit.TritonProgram(signature, {"BLOCK": 256}),
            "alpha",
            ["alpha", "signature"],
        )

    def test_a_parameter_the_function_lacks(self):
        self.refused(
            "bad.unknown",
            lambda k: zerojit.TritonProgram({**SIGNATURE, "beta": "fp32"}, {"BLOCK": 256}),
            "beta",
            ["beta", "no parameter"],
        )

    def test_a_type_zerojit_cannot_launch(self):
        self.refused(
            "bad.type",
            lambda k: zerojit.TritonProgram({**SIGNATURE, "n": "int"}, {"BLOCK": 256}),
            "n",
            ["'int'"],
        )

    def test_an_unknown_option_and_an_option_out_of_range(self):
        self.refused(
            "bad.option",
            lambda k: zerojit.TritonProgram(SIGNATURE, {"BLOCK": 256}, {"num_wraps": 4}),
            "num_wraps",
            ["num_wraps"],
        )
        self.refused(
            "bad.warps",
            lambda k: zerojit.TritonProgram(SIGNATURE, {"BLOCK": 256}, {"num_warps": 3}),
            "num_warps",
            ["num_warps=3"],
        )

    def test_divisibility_of_a_float(self):
        self.refused(
            "bad.divisible",
            lambda k: zerojit.TritonProgram(SIGNATURE, {"BLOCK": 256}, divisible_by_16=("alpha",)),
            "alpha",
            ["divisible_by_16"],
        )

    def test_a_runtime_constant_that_is_not_an_integer_or_none(self):
        signature = {k: v for k, v in SIGNATURE.items() if k != "alpha"}
        self.refused(
            "bad.constant",
            lambda k: zerojit.TritonProgram(signature, {"BLOCK": 256, "alpha": 0.5}),
            "alpha",
            ["None or an integer"],
        )

    def test_owner_definitions_are_checked_when_the_kernel_is_made(self):
        with self.assertRaises(zerojit.InvalidArgument) as caught:
            owner("bad.dispatch", dispatch=lambda self, z: KEY)()
        self.assertIn("'z'", str(caught.exception))
        with self.assertRaises(zerojit.InvalidArgument) as caught:
            owner("bad.fn", fn="triton_test_kernels.masked_add")()
        self.assertEqual(caught.exception.argument, "fn")
        with self.assertRaises(zerojit.InvalidArgument) as caught:
            owner("bad.missing", fn="triton_test_kernels:no_such_function")()
        self.assertIn("no_such_function", str(caught.exception))


def fake(shape, dtype=(KDL_FLOAT, 32, 1), offset=0):
    """A CUDA-device DLPack producer over host memory (never dereferenced: every test here ends
    before a launch), `offset` bytes past a 256-byte boundary."""
    tensor = VersionedProducer(shape, dtype, device=(KDL_CUDA, 0))
    tensor.data += offset
    return tensor


@NEEDS_TRITON
class CallChecks(unittest.TestCase):
    """A call is checked against its key's specialization before anything is compiled, loaded
    or launched; a call that needs another specialization is a monitor event naming the class
    and is refused."""

    @classmethod
    def setUpClass(cls):
        cls.cache = tempfile.TemporaryDirectory()
        zerojit.monitor.set_mode("off")
        zerojit.clear_registrations()
        for kernel in (owners.MaskedAdd, owners.IntWidths, owners.MatmulTile):
            zerojit.register(kernel)
        zerojit.warmup_kernels(
            cache_dir=cls.cache.name, compile_only=True, jobs=2, arm_monitor=False
        )
        zerojit.clear_registrations()

    @classmethod
    def tearDownClass(cls):
        zerojit.monitor.disarm()
        zerojit.monitor.set_mode("off")
        cls.cache.cleanup()

    def refused(self, kernel, call, argument, words):
        misses = zerojit.monitor.counters()[kernel.name]["misses"]
        lang_support.assert_invalid_argument(self, kernel, call, argument, words)
        self.assertEqual(zerojit.monitor.counters()[kernel.name]["misses"], misses + 1)

    def test_an_unaligned_pointer_is_refused_naming_the_class(self):
        kernel = owners.MaskedAdd()
        x, y, out = fake((1000,)), fake((1000,), offset=4), fake((1000,))
        self.refused(kernel, lambda: kernel(x, y, out, 1000, 2.0), "y_ptr", ["16-byte aligned"])

    def test_another_dtype_is_another_specialization(self):
        kernel = owners.MaskedAdd()
        x, y, out = fake((1000,)), fake((1000,), (KDL_INT, 32, 1)), fake((1000,))
        self.refused(kernel, lambda: kernel(x, y, out, 1000, 2.0), "y_ptr", ["i32", "*fp32"])

    def test_an_integer_past_its_width_and_one_not_divisible_by_16(self):
        kernel = owners.IntWidths()
        out = fake((64,), (KDL_INT, 64, 1))
        self.refused(kernel, lambda: kernel(out, 7, 2**31, 0, 64), "step", ["does not fit i32"])
        self.refused(kernel, lambda: kernel(out, 7, 1, 0, 17), "n16", ["not a multiple of 16"])

    def test_a_parameter_compiled_as_the_constant_one_takes_only_one(self):
        kernel = owners.MatmulTile()
        a, b, c = fake((16, 64), (2, 16, 1)), fake((64, 64), (2, 16, 1)), fake((16, 64))
        self.refused(
            kernel,
            lambda: kernel(a, b, c, 16, 64, 64, 64, 2, 64, 1, 64),
            "stride_ak",
            ["is 2", "constant 1"],
        )

    def test_a_call_with_the_wrong_number_of_arguments_names_them(self):
        with self.assertRaises(zerojit.InvalidArgument) as caught:
            owners.MaskedAdd()(fake((8,)), 8)
        self.assertIn("x_ptr, y_ptr, out_ptr, n, alpha", str(caught.exception))

    def test_in_error_mode_a_specialization_miss_is_a_runtime_jit_error(self):
        kernel = owners.MaskedAdd()
        x, y, out = fake((1000,)), fake((1000,), offset=8), fake((1000,))
        zerojit.monitor.set_mode("error")
        zerojit.monitor.arm()
        try:
            with self.assertRaises(zerojit.RuntimeJitError) as caught:
                kernel(x, y, out, 1000, 2.0)
            self.assertIn("y_ptr", str(caught.exception))
            self.assertIn("specialization", str(caught.exception))
        finally:
            zerojit.monitor.disarm()
            zerojit.monitor.set_mode("off")

    def test_in_error_mode_an_unwarmed_key_is_refused_before_it_compiles(self):
        # (A launch's miss needs a driver to get that far: lang_gpu_triton covers the call.)
        kernel = owners.RowSum()  # not warmed in this process
        compiles = zerojit.monitor.counters()[kernel.name]["compiles"]
        zerojit.monitor.set_mode("error")
        zerojit.monitor.arm()
        try:
            with self.assertRaises(zerojit.RuntimeJitError) as caught:
                kernel.compile(owners.RowKey(zerojit.DType.f32, 128, False))
            self.assertIn("tests.triton.row_sum", str(caught.exception))
            self.assertIn("block_cols=128", str(caught.exception))
        finally:
            zerojit.monitor.disarm()
            zerojit.monitor.set_mode("off")
        self.assertEqual(zerojit.monitor.counters()[kernel.name]["compiles"], compiles)

    @unittest.skipIf(zerojit.driver_available(), "a CUDA driver is installed here")
    def test_a_valid_call_passes_every_check_and_stops_only_for_want_of_a_driver(self):
        kernel = owners.MaskedAdd()
        x, y, out = fake((1000,)), fake((1000,)), fake((1000,))
        before = zerojit.monitor.counters()[kernel.name]
        with self.assertRaises(zerojit.UnavailableError):
            kernel(x, y, out, 1000, 2.0)
        after = zerojit.monitor.counters()[kernel.name]
        self.assertEqual(after["compiles"], before["compiles"])
        self.assertEqual(after["misses"], before["misses"])


# A direct triton.compile of a kernel zerojit does not own: the guard tests' compile_foreign().
FOREIGN_COMPILE = """
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
import triton_test_kernels as kernels

def compile_foreign():
    source = ASTSource(kernels.row_sum, {"x_ptr": "*fp32", "out_ptr": "*fp32", "cols": "i32",
                                         "row_stride": "i32", "BLOCK_COLS": "constexpr"},
                       {"BLOCK_COLS": 64})
    return triton.compile(source, target=GPUTarget("cuda", 90, 32))
"""


@NEEDS_TRITON
class Guard(unittest.TestCase):
    """Triton compiles of kernels zerojit does not own, seen by the monitor once armed."""

    def test_a_direct_triton_compile_is_refused_in_error_mode_and_counted(self):
        result = run_python(
            lang_support.guard_code(
                FOREIGN_COMPILE,
                "triton_guard",
                "triton.foreign",
            ),
            env={"TRITON_ALWAYS_COMPILE": "1"},
        )
        lang_support.assert_guard_refused(self, result, "row_sum")

    def test_the_guard_is_installed_when_a_lookup_comes_before_the_import(self):
        # zerojit's own warmup looks Triton up (find_spec, to read its version) without
        # importing it; the import that follows must still install the guard.
        result = lang_support.run_python(
            None,
            lang_support.guard_code(
                textwrap.dedent(
                    """
                import importlib.util
                assert importlib.util.find_spec("triton") is not None
                zerojit.triton_kernels.triton_version("sm_90a")
                assert "triton" not in sys.modules
                """
                )
                + FOREIGN_COMPILE,
                "triton_guard",
                "triton.foreign",
            ),
            env={"TRITON_ALWAYS_COMPILE": "1"},
            timeout=900,
        )
        lang_support.assert_guard_refused(self, result, "row_sum")

    def test_the_guard_is_installed_when_triton_is_imported_after_zerojit(self):
        result = run_python("""
            import triton
            print(json.dumps(triton.knobs.runtime.jit_cache_hook is not None))
        """)
        self.assertTrue(result)


@NEEDS_TRITON
class Tool(unittest.TestCase):
    """`python -m zerojit ... --module M`: the tool over the kernels a module registers."""

    def tool(self, *arguments, env=None):
        return subprocess.run(
            [sys.executable, "-m", "zerojit", *arguments],
            capture_output=True,
            text=True,
            timeout=900,
            env=lang_support.environment(env),
        )

    def test_keys_and_a_compile_only_pack_for_sm100a(self):
        keys = self.tool("keys", "--module", "triton_registered", "--json")
        self.assertEqual(keys.returncode, 0, keys.stderr)
        listed = json.loads(keys.stdout)
        self.assertEqual(len(listed["result"]["keys"]), KEYS)
        with tempfile.TemporaryDirectory() as pack:
            warmup_args = (
                "warmup",
                "--module",
                "triton_registered",
                "--compile-only",
                "--arch",
                "sm_100a",
                "--cache-dir",
                pack,
            )
            warmup = self.tool(*warmup_args, "--jobs", "2", "--json")
            self.assertEqual(warmup.returncode, 0, warmup.stderr)
            report = json.loads(warmup.stdout)["result"]
            self.assertEqual(report["totals"]["compiled"], KEYS)
            again = self.tool(*warmup_args, "--json")
            self.assertEqual(json.loads(again.stdout)["result"]["totals"]["from_disk"], KEYS)

    def test_a_module_that_cannot_be_imported_is_a_usage_error(self):
        done = self.tool("keys", "--module", "no_such_module_here")
        self.assertEqual(done.returncode, 2, done.stderr)
        self.assertIn("no_such_module_here", done.stderr)


if __name__ == "__main__":
    unittest.main()
