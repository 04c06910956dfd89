"""What a Python kernel's owner gets wrong stays its own, and what it gets right stays right:
one owner's broken program() or space is a failed key of the warmup, not a failed warmup;
calls and warmup bind dispatch's arguments the same way (by name), and a dispatch naming no
parameter is refused when the kernel is made; the dispatch memo keeps 1, 1.0, True and
numpy.int64(1) apart, and a scalar of another type is refused naming kernel and argument."""

import dataclasses
import importlib.util
import os
import sys
import unittest

TESTS = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, TESTS)

import pytorch_nvrtc  # noqa: E402,F401  (before zerojit)
import zerojit  # noqa: E402
from zerojit import DType, Geometry, Program, Space, TensorDesc  # noqa: E402

needs_nvrtc = unittest.skipUnless(zerojit.nvrtc_available(), "NVRTC is not available")
needs_numpy = unittest.skipUnless(importlib.util.find_spec("numpy"), "numpy is not installed")

SOURCE = 'extern "C" __global__ void k(float* x) {}'


@dataclasses.dataclass(frozen=True)
class VariantKey:
    variant: int


class HalfBroken(zerojit.Kernel):
    """Key 0 builds; key 1's program() raises, as an owner's mistake would."""

    name = "test.reliability.half_broken"
    Key = VariantKey
    params = (("x", "tensor"),)

    def dispatch(self, x):
        return VariantKey(x.shape[0] % 2)

    def program(self, key):
        if key.variant == 1:
            raise ValueError("no program for variant 1")
        return Program(source=SOURCE, function="k", key_as="none")

    def warmup_space(self):
        return Space(lambda p: {"x": TensorDesc.contiguous(DType.f32, (p["n"],))}).range("n", 2, 3)


class BrokenSpace(zerojit.Kernel):
    """Its dispatch fails at every point of its space."""

    name = "test.reliability.broken_space"
    Key = VariantKey
    params = (("x", "tensor"),)

    def dispatch(self, x):
        raise RuntimeError("this dispatch is broken")

    def program(self, key):
        return Program(source=SOURCE, function="k", key_as="none")

    def warmup_space(self):
        return Space(lambda p: {"x": TensorDesc.contiguous(DType.f32, (4,))}).choices("n", [4])


@needs_nvrtc
class OneBadOwner(unittest.TestCase):
    def setUp(self):
        zerojit.clear_registrations()
        zerojit.register(HalfBroken)
        zerojit.register(BrokenSpace)

    def tearDown(self):
        zerojit.clear_registrations()

    def warmup(self, **options):
        return zerojit.warmup_kernels(
            compile_only=True, arch="sm_90a", jobs=1, cache_dir="off", **options
        )

    def test_a_broken_program_is_one_failed_key_and_the_others_warm(self):
        report = self.warmup(raise_on_failure=False)
        by_key = {(k["kernel"], k["key"]): k for k in report["keys"]}
        good = by_key[(HalfBroken.name, "variant=0")]
        self.assertEqual(good["origin"], "compiled")
        bad = by_key[(HalfBroken.name, "variant=1")]
        self.assertEqual(bad["origin"], "failed")
        for words in (HalfBroken.name, "variant=1", "sm_90a", "program()", "variant 1"):
            self.assertIn(words, bad["error"])
        space = by_key[(BrokenSpace.name, "warmup space")]
        self.assertIn("this dispatch is broken", space["error"])
        self.assertEqual(report["totals"]["failed"], 2)
        self.assertFalse(report["monitor_armed"])

    def test_raising_names_every_failed_key(self):
        with self.assertRaises(zerojit.WarmupError) as raised:
            self.warmup()
        failed = {(f["kernel"], f["key"]) for f in raised.exception.failed}
        self.assertEqual(
            failed, {(HalfBroken.name, "variant=1"), (BrokenSpace.name, "warmup space")}
        )


@dataclasses.dataclass(frozen=True)
class PairKey:
    x: str
    y: str


class Reordered(zerojit.Kernel):
    """dispatch names its arguments in another order than params."""

    name = "test.reliability.reordered"
    Key = PairKey
    params = (("x", "tensor"), ("y", "tensor"))
    seen = []

    def dispatch(self, y, x):
        Reordered.seen.append((x.dtype, y.dtype))
        return PairKey(x.dtype.value, y.dtype.value)

    def program(self, key):
        return Program(source='extern "C" __global__ void k(float* x, short* y) {}', function="k")

    def geometry(self, key, x):
        return Geometry(1, 32)

    def warmup_space(self):
        return Space(
            lambda p: {
                "x": TensorDesc.contiguous(DType.f32, (4,)),
                "y": TensorDesc.contiguous(DType.f16, (4,)),
            }
        ).choices("n", [4])


class Binding(unittest.TestCase):
    @needs_numpy
    def test_a_call_asks_for_the_key_warmup_warms_whatever_dispatchs_parameter_order(self):
        import numpy

        kernel = Reordered()
        warmed = [kernel.key_text(key) for key in kernel.expand().keys]
        self.assertEqual(warmed, ["x=f32, y=f16"])
        Reordered.seen.clear()
        x, y = numpy.zeros(4, numpy.float32), numpy.zeros(4, numpy.float16)
        with self.assertRaisesRegex(zerojit.InvalidArgument, "CUDA"):  # host arrays: no launch
            kernel(x, y)
        self.assertEqual(Reordered.seen, [(DType.f32, DType.f16)])  # the key warmup warmed

    def test_a_dispatch_naming_no_parameter_is_refused_when_the_kernel_is_made(self):
        class Stray(zerojit.Kernel):
            name = "test.reliability.stray"
            Key = PairKey
            params = (("x", "tensor"),)

            def dispatch(self, z):
                return PairKey("a", "b")

        with self.assertRaises(zerojit.InvalidArgument) as raised:
            Stray()
        self.assertEqual(raised.exception.argument, "dispatch")
        self.assertIn("'z'", str(raised.exception))
        self.assertIn("no entry of params (x)", str(raised.exception))


@dataclasses.dataclass(frozen=True)
class ModeKey:
    mode: int


class Typed(zerojit.Kernel):
    """dispatch checks the type of a scalar: an int mode, not a float."""

    name = "test.reliability.typed"
    Key = ModeKey
    params = (("x", "tensor"), ("mode", "i64"))
    seen = []

    def dispatch(self, x, mode):
        Typed.seen.append(type(mode).__name__)
        if isinstance(mode, float):
            raise zerojit.InvalidArgument(f"{self.name}: mode must be an int", self.name, "mode")
        return ModeKey(int(mode))

    def program(self, key):
        return Program(
            source='extern "C" __global__ void k(float* x, long long m) {}', function="k"
        )

    def geometry(self, key):
        return Geometry(1, 32)


@needs_numpy
class TypedMemo(unittest.TestCase):
    def test_equal_scalars_of_other_types_each_reach_dispatch(self):
        import numpy

        kernel = Typed()
        Typed.seen.clear()
        x = numpy.zeros(4, numpy.float32)
        for mode in (1, True, numpy.int64(1), 1):
            with self.assertRaisesRegex(zerojit.InvalidArgument, "CUDA"):
                kernel(x, mode)
        # The float is dispatch's to refuse, whatever was called before it.
        with self.assertRaisesRegex(zerojit.InvalidArgument, "mode must be an int"):
            kernel(x, 1.0)
        self.assertEqual(Typed.seen, ["int", "bool", "int64", "float"])

    def test_a_scalar_of_another_type_is_refused_naming_kernel_and_argument(self):
        kernel = Typed()
        import numpy

        with self.assertRaises(zerojit.InvalidArgument) as raised:
            kernel(numpy.zeros(4, numpy.float32), "one")
        self.assertEqual((raised.exception.kernel, raised.exception.argument), (Typed.name, "mode"))
        self.assertIn("got str", str(raised.exception))


if __name__ == "__main__":
    unittest.main()
