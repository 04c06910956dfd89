"""The monitor's fallback mode for Python-defined kernels, on the stub CUDA driver: a call whose
key missed launches the owner's warmed fallback at once, its key compiles in the background and
serves the calls after it lands; a fallback that would refuse its key's calls is refused by
warmup; a fallback that itself misses leaves the call to warn mode; learned misses are recorded
and warmed back (warmup_kernels(also=...)); Python CUDA, Triton and CuTeDSL owners alike.

Run by the ctest zerojit_python_stub (ZEROJIT_TESTING_CUDA_DRIVER names the stub); every test
skips, saying why, elsewhere."""

import dataclasses
import importlib.util
import os
import sys
import tempfile
import unittest
import warnings

TESTS = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, TESTS)

import stub_support as stub  # noqa: E402
import zerojit  # noqa: E402
from zerojit import DType, Geometry, Program, Space, TensorDesc  # noqa: E402

NEEDS_NVRTC = unittest.skipUnless(zerojit.nvrtc_available(), "NVRTC is not available")
NEEDS_TRITON = unittest.skipUnless(
    importlib.util.find_spec("triton"), "Triton is not installed in this interpreter"
)
NEEDS_DSL = unittest.skipUnless(
    importlib.util.find_spec("cutlass") and os.environ.get("ZEROJIT_CUTE_DSL_RUNTIME") == stub.STUB,
    "needs nvidia-cutlass-dsl and the stub as the CuTeDSL runtime (ZEROJIT_CUTE_DSL_RUNTIME)",
)

# Two programs of one source: the key's (its extent a compile-time constant) and the fallback's
# (any extent), told apart by the function the stub records.
SCALE = r"""
extern "C" __global__ void scale_fixed(float* x, long long n) {
  if (static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x < ZJ_EXTENT) x[0] *= 2.0f;
}
extern "C" __global__ void scale_any(float* x, long long n) {
  if (static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x < n) x[0] *= 2.0f;
}
"""


@dataclasses.dataclass(frozen=True)
class ExtentKey:
    extent: int  # 0: any extent (the fallback)


class Scale(zerojit.Kernel):
    """Specialized on the tensor's extent, with the extent-generic key as its fallback."""

    name = "tests.fallback.scale"
    Key = ExtentKey
    params = (("x", "tensor"), ("n", "i64"))

    def dispatch(self, x):
        return ExtentKey(x.shape[0])

    def fallback(self, key):
        return ExtentKey(0)

    def program(self, key):
        function = "scale_any" if key.extent == 0 else "scale_fixed"
        return Program(source=SCALE, function=function, key_as="macros", macro_prefix="ZJ_")

    def geometry(self, key, x):
        return Geometry(grid=-(-x.shape[0] // 128), block=128)

    def warmup_space(self):
        return Space(lambda p: {"x": TensorDesc.contiguous(DType.f32, (p["n"],))}).choices(
            "n", [1024]
        )


class NarrowFallback(Scale):
    """A fallback whose geometry refuses extents above 512: it cannot serve the key's calls."""

    name = "tests.fallback.narrow"

    def fallback(self, key):
        return ExtentKey(-1) if key.extent != -1 else None

    def geometry(self, key, x):
        if key.extent == -1 and x.shape[0] > 512:
            raise zerojit.InvalidArgument(
                f"kernel {self.name}: x has {x.shape[0]} elements, more than 512", self.name, "x"
            )
        return Geometry(grid=-(-x.shape[0] // 128), block=128)


class UnwarmedFallback(Scale):
    """The space's key has no fallback, so none is warmed: another key's fallback misses."""

    name = "tests.fallback.unwarmed"

    def fallback(self, key):
        return None if key.extent == 1024 else ExtentKey(0)


class Learned(Scale):
    name = "tests.fallback.learned"


class FallbackTest(stub.StubTestCase):
    def tearDown(self):
        stub.capturing(False)
        zerojit.wait_background_compiles(60)
        zerojit.set_misses_file(None)
        super().tearDown()

    def warm(self, kernel, **options):
        zerojit.register(kernel)
        report = zerojit.warmup_kernels(
            [kernel], devices=[0], cache_dir=self.cache.name, jobs=2, arm_monitor=False, **options
        )
        self.assertTrue(report["ok"], report["summary"])
        return report

    def serve(self):
        zerojit.monitor.set_mode("fallback")
        zerojit.monitor.arm()

    def launched(self):
        return [launch["function"] for launch in stub.events("launch")]


@stub.NEEDS_STUB
@NEEDS_NVRTC
class FallbackServing(FallbackTest):
    def test_a_miss_launches_the_fallback_then_its_key_once_compiled(self):
        report = self.warm(Scale)
        self.assertEqual({k["key"] for k in report["keys"]}, {"extent=1024", "extent=0"})
        self.serve()
        x = stub.cuda_tensor((2048,))
        stub.clear()
        Scale()(x, 2048)
        self.assertEqual(self.launched(), ["scale_any"])
        self.assertEqual(stub.events("launch")[0]["grid"], [16, 1, 1])
        counters = zerojit.monitor.counters()[Scale.name]
        self.assertEqual(counters["fallback_launches"], 1)
        self.assertTrue(zerojit.wait_background_compiles(120))
        self.assertEqual(zerojit.monitor.counters()[Scale.name]["background_compiles"], 1)
        Scale()(x, 2048)
        Scale()(x, 2048)
        self.assertEqual(self.launched(), ["scale_any", "scale_fixed", "scale_fixed"])
        self.assertEqual(zerojit.monitor.counters()[Scale.name]["fallback_launches"], 1)

    def test_during_a_capture_the_fallback_serves_and_nothing_compiles(self):
        self.warm(Scale)
        self.serve()
        x = stub.cuda_tensor((3072,))
        stub.clear()
        stub.capturing(True)
        Scale()(x, 3072)
        stub.capturing(False)
        self.assertEqual(self.launched(), ["scale_any"])
        self.assertTrue(zerojit.wait_background_compiles(120))
        self.assertEqual(stub.events("module_load"), [])

    def test_a_fallback_that_would_refuse_the_keys_calls_is_refused_naming_both(self):
        zerojit.register(NarrowFallback)
        with self.assertRaises(zerojit.WarmupError) as raised:
            zerojit.warmup_kernels(
                [NarrowFallback], devices=[0], cache_dir=self.cache.name, arm_monitor=False
            )
        message = str(raised.exception)
        self.assertIn("[extent=1024]", message)
        self.assertIn("its fallback [extent=-1]", message)
        self.assertIn("more than 512", message)

    def test_a_fallback_that_itself_misses_leaves_the_call_to_warn_mode(self):
        self.warm(UnwarmedFallback)
        self.serve()
        x = stub.cuda_tensor((2048,))
        stub.clear()
        UnwarmedFallback()(x, 2048)  # compiles its own key on the calling thread, as warn does
        self.assertEqual(self.launched(), ["scale_fixed"])
        counters = zerojit.monitor.counters()[UnwarmedFallback.name]
        self.assertEqual(counters["fallback_launches"], 0)
        self.assertEqual(counters["runtime_jit"], 1)

    def test_a_recorded_miss_is_warmed_back_by_also(self):
        with tempfile.TemporaryDirectory() as folder:
            misses = os.path.join(folder, "misses.jsonl")
            zerojit.set_misses_file(misses)
            self.assertEqual(zerojit.misses_file(), misses)
            self.warm(Learned)
            self.serve()
            x = stub.cuda_tensor((4096,))
            Learned()(x, 4096)
            zerojit.set_misses_file(None)
            with open(misses) as file:
                lines = file.read().splitlines()
            self.assertEqual(len(lines), 1, lines)
            self.assertIn("tests.fallback.learned", lines[0])
            self.assertIn("extent=4096", lines[0])
            with open(misses, "a") as file:
                file.write("not a miss line\n")
                file.write(lines[0].replace("tests.fallback.learned", "tests.fallback.gone") + "\n")
            zerojit.monitor.disarm()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                report = self.warm(Learned, also=misses)
            keys = sorted(k["key"] for k in report["keys"])
            self.assertEqual(keys, ["extent=0", "extent=1024", "extent=4096"])
            said = "\n".join(str(w.message) for w in caught)
            self.assertIn("line 2", said)
            self.assertIn("tests.fallback.gone", said)


class TritonScale(zerojit.TritonKernel):
    """masked_add with its block chosen from n; the 256 block serves every other block."""

    name = "tests.fallback.triton"
    fn = "triton_test_kernels:masked_add"

    @dataclasses.dataclass(frozen=True)
    class Key:
        block: int

    def dispatch(self, n):
        return self.Key(1024 if n >= 4096 else 256 if n >= 1000 else 128)

    def fallback(self, key):
        return self.Key(256)

    def program(self, key):
        return zerojit.TritonProgram(
            signature={
                "x_ptr": "*fp32",
                "y_ptr": "*fp32",
                "out_ptr": "*fp32",
                "n": "i32",
                "alpha": "fp32",
            },
            constexprs={"BLOCK": key.block},
            options={"num_warps": 2},
        )

    def grid(self, key, n):
        return (-(-n // key.block),)

    def warmup_space(self):
        return Space(
            lambda p: {"x_ptr": TensorDesc.contiguous(DType.f32, (p["n"],)), "n": p["n"]}
        ).choices("n", [4096])


@stub.NEEDS_STUB
@NEEDS_TRITON
class TritonFallback(FallbackTest):
    def test_a_triton_miss_launches_the_fallback_then_its_key(self):
        report = self.warm(TritonScale)
        self.assertEqual({k["key"] for k in report["keys"]}, {"block=1024", "block=256"})
        self.serve()
        x, y, out = (stub.cuda_tensor((300,)) for _ in range(3))
        stub.clear()
        TritonScale()(x, y, out, 300, 1.0)
        self.assertEqual([launch["grid"] for launch in stub.events("launch")], [[2, 1, 1]])
        self.assertEqual(zerojit.monitor.counters()[TritonScale.name]["fallback_launches"], 1)
        self.assertTrue(zerojit.wait_background_compiles(300))
        TritonScale()(x, y, out, 300, 1.0)
        grids = [launch["grid"] for launch in stub.events("launch")]
        self.assertEqual(grids, [[2, 1, 1], [3, 1, 1]])


class CuteScale(zerojit.CuteKernel):
    """tiled_scale with its tile chosen from the row length; the 128 tile serves every row."""

    name = "tests.fallback.cute"
    fn = "cute_test_kernels:tiled_scale"

    @dataclasses.dataclass(frozen=True)
    class Key:
        tile: int

    def dispatch(self, mA):
        return self.Key(512 if mA.shape[1] >= 8192 else 256 if mA.shape[1] >= 1024 else 128)

    def fallback(self, key):
        return self.Key(128)

    def program(self, key):
        matrix = zerojit.CuteTensor(DType.f32, (None, None))
        return zerojit.CuteProgram(
            {"mA": matrix, "mC": matrix, "scale": "f32"}, constexprs={"TILE": key.tile}
        )

    def warmup_space(self):
        return Space(lambda p: {"mA": TensorDesc.contiguous(DType.f32, (4, p["n"]))}).choices(
            "n", [4096]
        )


@stub.NEEDS_STUB
@NEEDS_DSL
class CuteFallback(FallbackTest):
    def test_a_cutedsl_miss_runs_the_fallback_then_its_key(self):
        report = self.warm(CuteScale)
        self.assertEqual({k["key"] for k in report["keys"]}, {"tile=256", "tile=128"})
        self.serve()
        a, c = (stub.cuda_tensor((4, 10000)) for _ in range(2))
        stub.clear()
        CuteScale()(a, c, 2.0)  # tile=512: not warmed
        first = [run["function"] for run in stub.events("host_run")]
        self.assertEqual(len(first), 1, first)
        self.assertEqual(zerojit.monitor.counters()[CuteScale.name]["fallback_launches"], 1)
        self.assertTrue(zerojit.wait_background_compiles(300))
        CuteScale()(a, c, 2.0)
        runs = [run["function"] for run in stub.events("host_run")]
        self.assertEqual(len(runs), 2, runs)
        self.assertNotEqual(runs[1], runs[0], "the key's own entry serves once compiled")
        self.assertEqual(zerojit.monitor.counters()[CuteScale.name]["fallback_launches"], 1)


if __name__ == "__main__":
    unittest.main()
