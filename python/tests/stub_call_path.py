"""The one call path of every Python-defined kernel, whole, on the stub CUDA driver: a warmup that
loads on a device, then calls that launch. For each language (a CUDA C++ zerojit.Kernel, a
Triton kernel, a CuTeDSL kernel) the launch the stub records carries exactly the bytes the
compiled kernel's parameters take (their sizes read from the cubin itself), in its launch form;
misses are refused before anything is launched where the monitor or a capture says so.

Run by the ctest zerojit_python_stub (ZEROJIT_TESTING_CUDA_DRIVER and ZEROJIT_CUTE_DSL_RUNTIME
name the stub); every test skips, saying why, elsewhere."""

import dataclasses
import importlib.util
import os
import struct
import sys
import unittest

TESTS = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, TESTS)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(TESTS)), "examples", "python"))

import stub_support as stub  # noqa: E402
import zerojit  # noqa: E402
from zerojit import DType, Geometry, Program, Space, TensorDesc  # noqa: E402

NEEDS_NVRTC = unittest.skipUnless(zerojit.nvrtc_available(), "NVRTC is not available")
NEEDS_TRITON = unittest.skipUnless(
    importlib.util.find_spec("triton"), "Triton is not installed in this interpreter"
)
NEEDS_DSL = unittest.skipUnless(
    importlib.util.find_spec("cutlass"), "nvidia-cutlass-dsl is not installed in this interpreter"
)

AXPBY = r"""
extern "C" __global__ void axpby(const float* x, const float* y, float* out, float alpha,
                                 float beta, long long n) {
  const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = alpha * x[i] + beta * y[i];
}
"""


@dataclasses.dataclass(frozen=True)
class BlockKey:
    block: int


class StubAxpby(zerojit.Kernel):
    """The fast path: a pure geometry, the call's arguments packed by `params`."""

    name = "tests.stub.axpby"
    Key = BlockKey
    params = (
        ("x", "tensor"),
        ("y", "tensor"),
        ("out", "tensor"),
        ("alpha", "f32"),
        ("beta", "f32"),
        ("n", "i64"),
    )
    dispatched = 0

    def dispatch(self, x):
        StubAxpby.dispatched += 1
        return BlockKey(256 if x.shape[0] >= 1024 else 128)

    def program(self, key):
        return Program(source=AXPBY, function="axpby", key_as="none")

    def geometry(self, key, n):
        return Geometry(grid=-(-n // key.block), block=key.block)

    def warmup_space(self):
        return Space(lambda p: {"x": TensorDesc.contiguous(DType.f32, (p["n"],))}).choices(
            "n", [1000, 4096]
        )


def f32(value):
    return struct.pack("<f", value).hex()


def pointer(tensor):
    return stub.little_endian(tensor.data, 8)


class StubTest(stub.StubTestCase):
    def warm(self, *kernels):
        for kernel in kernels:
            zerojit.register(kernel)
        report = zerojit.warmup_kernels(
            list(kernels), devices=[0], cache_dir=self.cache.name, jobs=2, arm_monitor=False
        )
        self.assertTrue(report["ok"], report["summary"])
        return report

    def one_launch(self):
        launches = stub.events("launch")
        self.assertEqual(len(launches), 1, launches)
        return launches[0]


@stub.NEEDS_STUB
@NEEDS_NVRTC
class CudaKernels(StubTest):
    def test_a_geometry_kernel_launches_its_params_as_the_cubin_takes_them(self):
        self.warm(StubAxpby)
        self.assertEqual(len(stub.events("module_load")), 2)  # both keys, on device 0
        x, y, out = (stub.cuda_tensor((1000,)) for _ in range(3))
        stub.clear()
        StubAxpby.dispatched = 0
        for _ in range(3):
            StubAxpby()(x, y, out, 2.0, -0.5, 1000)
        launches = stub.events("launch")
        self.assertEqual(len(launches), 3)
        self.assertEqual(StubAxpby.dispatched, 1, "the memo answers the repeated calls")
        launch = launches[0]
        self.assertEqual(launch["function"], "axpby")
        self.assertEqual((launch["grid"], launch["block"]), ([8, 1, 1], [128, 1, 1]))
        expected = [pointer(x), pointer(y), pointer(out), f32(2.0), f32(-0.5)]
        self.assertEqual(launch["params"], expected + [stub.little_endian(1000, 8)])
        self.assertEqual(zerojit.monitor.counters()[StubAxpby.name]["hits"], 3)

    def test_a_planned_kernel_launches_and_returns_its_result(self):
        import user_kernel

        self.warm(user_kernel.Axpby)
        x, y, out = (stub.cuda_tensor((4096,)) for _ in range(3))
        stub.clear()
        result = user_kernel.Axpby()(x, y, out, 2.0, 3.0)
        self.assertIs(result, out)
        launch = self.one_launch()
        self.assertEqual(launch["params"][:3], [pointer(x), pointer(y), pointer(out)])
        self.assertEqual(launch["params"][3:], [f32(2.0), f32(3.0), stub.little_endian(4096, 8)])

    def test_a_value_past_its_parameters_width_is_refused_before_a_launch(self):
        self.warm(StubAxpby)
        x = stub.cuda_tensor((1000,))
        stub.clear()
        self.warm(StubFill)
        stub.clear()
        with self.assertRaisesRegex(zerojit.InvalidArgument, r"'n'.*\[0, 4294967295\].*range"):
            StubFill()(x, 2**32)
        with self.assertRaisesRegex(zerojit.InvalidArgument, r"'n'.*\[0, 4294967295\].*range"):
            StubFill()(x, -1)
        with self.assertRaisesRegex(zerojit.InvalidArgument, r"'alpha'.*a number, got a tensor"):
            StubAxpby()(x, x, x, x, 1.0, 1000)
        self.assertEqual(stub.events("launch"), [])

    def test_a_miss_in_error_mode_or_during_a_capture_compiles_and_launches_nothing(self):
        self.warm(StubAxpby)
        unwarmed = stub.cuda_tensor((512,))  # StubNarrow's: never warmed
        stub.clear()
        zerojit.monitor.set_mode("error")
        zerojit.monitor.arm()
        with self.assertRaises(zerojit.RuntimeJitError):
            StubNarrow()(unwarmed, unwarmed, unwarmed, 1.0, 1.0, 512)
        zerojit.monitor.set_mode("warn")
        stub.capturing(True)
        with self.assertRaisesRegex(zerojit.RuntimeJitError, "captur"):
            StubNarrow()(unwarmed, unwarmed, unwarmed, 1.0, 1.0, 512)
        self.assertEqual(stub.events("launch"), [])
        self.assertEqual(stub.events("module_load"), [])


class StubFill(zerojit.Kernel):
    """An unsigned 32-bit parameter, the geometry independent of it."""

    name = "tests.stub.fill"
    Key = BlockKey
    params = (("x", "tensor"), ("n", "u32"))

    def dispatch(self, x):
        return BlockKey(128)

    def program(self, key):
        return Program(
            source='extern "C" __global__ void fill(float* x, unsigned n) {}',
            function="fill",
            key_as="none",
        )

    def geometry(self, key):
        return Geometry(grid=1, block=key.block)

    def warmup_space(self):
        return Space(lambda p: {"x": TensorDesc.contiguous(DType.f32, (8,))}).choices("n", [8])


class StubNarrow(StubAxpby):
    """Another kernel of the same program, never warmed."""

    name = "tests.stub.narrow"


@stub.NEEDS_STUB
@NEEDS_TRITON
class TritonKernels(StubTest):
    def test_a_triton_call_packs_as_tritons_launcher_and_takes_the_record(self):
        import triton_test_owners as owners

        self.warm(owners.MaskedAdd)
        x, y, out = (stub.cuda_tensor((1000,)) for _ in range(3))
        stub.clear()
        owners.MaskedAdd()(x, y, out, 1000, 0.25)
        launch = self.one_launch()
        # The runtime parameters, then Triton's two scratch pointers (null).
        expected = [pointer(x), pointer(y), pointer(out), stub.little_endian(1000, 4), f32(0.25)]
        self.assertEqual(launch["params"], expected + ["00" * 8, "00" * 8])
        self.assertEqual(launch["grid"], [4, 1, 1])  # 1000 / a block of 256
        self.assertEqual(launch["block"], [64, 1, 1])  # num_warps 2, from the launch record

    def test_a_call_outside_the_specialization_is_refused_naming_the_class(self):
        import triton_test_owners as owners

        self.warm(owners.MaskedAdd)
        x = stub.cuda_tensor((1000,))
        stub.clear()
        with self.assertRaisesRegex(zerojit.InvalidArgument, "'n'.*does not fit i32"):
            owners.MaskedAdd()(x, x, x, 2**40, 0.25)
        self.assertEqual(stub.events("launch"), [])


@stub.NEEDS_STUB
@NEEDS_DSL
class CuteKernels(StubTest):
    def test_a_cutedsl_call_runs_the_exported_host_entry(self):
        import cute_test_owners as owners

        self.warm(owners.ScaledAdd)
        self.assertEqual(len(stub.events("host_load")), 2)  # f32 and bf16
        a, b, c = (stub.cuda_tensor((1024,)) for _ in range(3))
        stub.clear()
        owners.ScaledAdd()(a, b, c, 0.5)
        runs = stub.events("host_run")
        self.assertEqual(len(runs), 1)
        # A struct per tensor, the scalar, the stream, the return code.
        self.assertEqual(runs[0]["arguments"], 6)
        with self.assertRaisesRegex(zerojit.InvalidArgument, "mA.*extent 1023.*multiple of 4"):
            owners.ScaledAdd()(*(stub.cuda_tensor((1023,)) for _ in range(3)), 0.5)
        self.assertEqual(len(stub.events("host_run")), 1)


if __name__ == "__main__":
    unittest.main()
