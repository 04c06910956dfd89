"""CPU tests of the Python kernel API (zerojit.Kernel): keys, dispatch, programs and their
identity against a C++ kernel's, spaces (the C++ primitives), dead axes and the bound,
warmup through the shared registry (compile-only, NVRTC needed), WarmupError, the engine
hooks (logging, monitor, progress, vLLM modes), the NVRTC wheel finder, `python -m zerojit`
and the extension's stubs. Needs neither a GPU nor PyTorch.
"""

import ast
import dataclasses
import importlib.util
import os
import signal
import subprocess
import sys
import tempfile
import threading
import unittest

os.environ.setdefault("ZEROJIT_CACHE_DIR", tempfile.mkdtemp(prefix="zerojit-kernels-test-"))
os.environ.pop("ZEROJIT_MONITOR", None)

import pytorch_nvrtc  # noqa: E402,F401  (before zerojit)
import zerojit  # noqa: E402
from zerojit import DType, Launch, Program, Space, TensorDesc  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
KERNELS = os.path.join(REPO, "kernels")
sys.path.insert(0, os.path.join(REPO, "examples", "python"))
import user_kernel  # noqa: E402

needs_nvrtc = unittest.skipUnless(zerojit.nvrtc_available(), "NVRTC is not available")


@dataclasses.dataclass(frozen=True)
class ScaleAddKey:
    dtype: DType
    vector_width: int


class ScaleAddTwin(zerojit.Kernel):
    """examples.scale_add (kernels/examples/scale_add) written in Python: same name, source,
    key and options, so its identity must be the C++ kernel's."""

    name = "examples.scale_add"
    Key = ScaleAddKey
    params = (("x", "tensor"),)

    def dispatch(self, x):
        return ScaleAddKey(x.dtype, 4 if x.shape[0] % 4 == 0 else 1)

    def program(self, key):
        return Program.from_file(
            os.path.join(KERNELS, "examples/scale_add/scale_add.cu"),
            "zj::examples::scale_add_kernel",
            root=KERNELS,
        )


@dataclasses.dataclass(frozen=True)
class MacroKey:
    block: int
    fast: bool
    op: str
    dtype: DType


class MacroKernel(zerojit.Kernel):
    name = "test.macros"
    Key = MacroKey
    params = (("n", "i64"), ("x", "tensor"))

    def dispatch(self, x):
        return MacroKey(128, x.alignment >= 16, "plus", x.dtype)

    def program(self, key):
        return Program(
            source='extern "C" __global__ void k(float* x, long long n) {}',
            function="k",
            key_as="macros",
            macro_prefix="T_",
            options=("-lineinfo",),
        )


@dataclasses.dataclass(frozen=True)
class TwoNamesKey:
    a: str
    b: str


class TwoNamesKernel(zerojit.Kernel):
    name = "test.two_names"
    Key = TwoNamesKey
    params = (("x", "tensor"),)

    def dispatch(self, x):
        return TwoNamesKey("x", "y")

    def program(self, key):
        return Program(
            source='extern "C" __global__ void k(float* x) {}', function="k", key_as="macros"
        )


@dataclasses.dataclass(frozen=True)
class BrokenKey:
    variant: int


class BrokenKernel(zerojit.Kernel):
    """Variant 1 does not compile."""

    name = "test.broken"
    Key = BrokenKey
    params = (("x", "tensor"),)

    def dispatch(self, x):
        return BrokenKey(x.shape[0] % 2)

    def program(self, key):
        body = "x[0] = 1.0f;" if key.variant == 0 else "this is not C++;"
        return Program(
            source=f"template <int V> __global__ void k(float* x) {{ {body} }}", function="k"
        )

    def warmup_space(self):
        return Space(lambda p: (TensorDesc.contiguous(DType.f32, (p["n"],)),)).range("n", 2, 3)


class KeyTest(unittest.TestCase):
    def test_key_values_the_core_cannot_hold_are_named(self):
        kernel = TwoNamesKernel()
        with self.assertRaisesRegex(zerojit.InvalidArgument, "key field 'a'.*valid Unicode"):
            kernel.slot(TwoNamesKey("\ud800", "y"))
        macros = MacroKernel()
        with self.assertRaisesRegex(zerojit.InvalidArgument, "key field 'block'.*64 bits"):
            macros.slot(MacroKey(2**64, True, "plus", DType.f32))

    def test_string_fields_that_print_alike_are_different_keys(self):
        # a="x, b=y", b="z" and a="x", b="y, b=z" print the same text; their slots, macros and
        # identities must still be their own.
        kernel = TwoNamesKernel()
        first, second = TwoNamesKey("x, b=y", "z"), TwoNamesKey("x", "y, b=z")
        self.assertEqual(kernel.key_text(first), kernel.key_text(second))
        self.assertNotEqual(kernel.slot(first), kernel.slot(second))
        _, _, first_options, _ = kernel._core.program(kernel.slot(first))
        _, _, second_options, _ = kernel._core.program(kernel.slot(second))
        self.assertIn("-DZJ_B=z", first_options)
        self.assertIn("-DZJ_B=y, b=z", second_options)
        self.assertNotEqual(kernel.identity(first), kernel.identity(second))

    def test_key_text_and_rendering_are_the_cores(self):
        kernel = user_kernel.Axpby()
        key = user_kernel.AxpbyKey(DType.bf16, 8)
        self.assertEqual(kernel.key_text(key), "dtype=bf16, vector_width=8")
        source, name_expression, options, text = kernel._core.program(kernel.slot(key))
        self.assertEqual(source, "user/axpby.cu")
        self.assertEqual(name_expression, "user::axpby_kernel<zj::bf16_t, 8>")
        self.assertEqual(text, "dtype=bf16, vector_width=8")
        self.assertEqual(kernel.slot(key), kernel.slot(user_kernel.AxpbyKey(DType.bf16, 8)))

    def test_macros_render_every_field_kind(self):
        kernel = MacroKernel()
        key = kernel.dispatch(TensorDesc.contiguous(DType.f16, (8,), alignment=16))
        _, name_expression, options, text = kernel._core.program(kernel.slot(key))
        self.assertEqual(name_expression, "k")
        self.assertEqual(
            options,
            ["-DT_BLOCK=128", "-DT_FAST=true", "-DT_OP=plus", "-DT_DTYPE=zj::f16_t", "-lineinfo"],
        )
        self.assertEqual(text, "block=128, fast=true, op=plus, dtype=f16")

    def test_dispatch_from_descriptors(self):
        kernel = user_kernel.Axpby()
        aligned = TensorDesc.contiguous(DType.f32, (1024,), alignment=256)
        unaligned = TensorDesc.contiguous(DType.f32, (1024,), alignment=4)
        self.assertEqual(kernel.dispatch(aligned, aligned, aligned).vector_width, 4)
        self.assertEqual(kernel.dispatch(aligned, unaligned, aligned).vector_width, 1)
        odd = TensorDesc.contiguous(DType.f16, (1023,))
        self.assertEqual(kernel.dispatch(odd, odd, odd), user_kernel.AxpbyKey(DType.f16, 1))
        with self.assertRaises(zerojit.InvalidArgument) as raised:
            kernel.dispatch(aligned, odd, aligned)
        self.assertEqual((raised.exception.kernel, raised.exception.argument), ("user.axpby", "y"))

    def test_contiguity_as_the_cpp_check(self):
        self.assertTrue(TensorDesc(DType.f32, (4, 1, 3), (3, 99, 1)).is_contiguous())
        self.assertFalse(TensorDesc(DType.f32, (4, 3), (1, 4)).is_contiguous())
        self.assertEqual(TensorDesc.contiguous("bf16", (2, 3, 4)).strides, (12, 4, 1))

    def test_dtype_enum_is_the_cores(self):
        self.assertEqual([d.value for d in DType], zerojit._core.dtype_names())
        self.assertIs(DType.of("bf16"), DType.bf16)
        with self.assertRaisesRegex(ValueError, "'float' is not a zerojit dtype"):
            DType.of("float")

    def test_bad_key_types_name_the_kernel_and_field(self):
        @dataclasses.dataclass(frozen=True)
        class FloatKey:
            scale: float

        class FloatKernel(zerojit.Kernel):
            name = "test.float_key"
            Key = FloatKey
            params = (("x", "tensor"),)

        with self.assertRaises(zerojit.InvalidArgument) as raised:
            FloatKernel()
        self.assertIn("key field 'scale'", str(raised.exception))
        self.assertEqual(raised.exception.argument, "scale")

        kernel = user_kernel.Axpby()
        with self.assertRaisesRegex(zerojit.InvalidArgument, "field 'vector_width' must be int"):
            kernel.slot(user_kernel.AxpbyKey(DType.f32, "4"))
        with self.assertRaisesRegex(zerojit.InvalidArgument, "not AxpbyKey"):
            kernel.slot(ScaleAddKey(DType.f32, 4))

    def test_bad_kernel_declarations(self):
        class NoParams(zerojit.Kernel):
            name = "test.no_tensor"
            Key = BrokenKey
            params = (("n", "i64"),)

        with self.assertRaisesRegex(zerojit.Error, "test.no_tensor.*no tensor"):
            NoParams()

        class BadParam(zerojit.Kernel):
            name = "test.bad_param"
            Key = BrokenKey
            params = (("x", "float"),)

        with self.assertRaisesRegex(zerojit.InvalidArgument, "test.bad_param.*'x', 'float'"):
            BadParam()

        user_kernel.Axpby()  # holds the name

        class Taken(zerojit.Kernel):
            name = "user.axpby"
            Key = BrokenKey
            params = (("x", "tensor"),)

        with self.assertRaisesRegex(zerojit.InvalidArgument, "the name is taken by Axpby"):
            Taken()

    def test_program_errors_name_kernel_and_key(self):
        class Missing(zerojit.Kernel):
            name = "test.missing_header"
            Key = BrokenKey
            params = (("x", "tensor"),)

            def program(self, key):
                return Program(source='#include "nowhere.cuh"\n', function="k")

        with self.assertRaisesRegex(zerojit.Error, r"test.missing_header.*nowhere\.cuh"):
            Missing().slot(BrokenKey(0))


@needs_nvrtc
class IdentityTest(unittest.TestCase):
    def test_identity_equals_the_cpp_kernels(self):
        twin = ScaleAddTwin()
        for dtype, width in ((DType.f32, 4), (DType.f64, 1)):
            with self.subTest(dtype=dtype, width=width):
                self.assertEqual(
                    twin.identity(ScaleAddKey(dtype, width), "sm_90a"),
                    zerojit._core.scale_add_identity(dtype.value, width, "sm_90a"),
                )
        self.assertNotEqual(
            twin.identity(ScaleAddKey(DType.f32, 4), "sm_90a"),
            zerojit._core.scale_add_identity("f32", 1, "sm_90a"),
        )
        self.assertNotEqual(
            twin.identity(ScaleAddKey(DType.f32, 4), "sm_100a"),
            zerojit._core.scale_add_identity("f32", 4, "sm_90a"),
        )


class SpaceTest(unittest.TestCase):
    def test_axes_in_odometer_order(self):
        space = Space().choices("a", ["x", "y"]).range("b", 1, 5, 2)
        self.assertEqual(space.points(), [{"a": a, "b": b} for a in "xy" for b in (1, 3, 5)])

    def test_advance_covers_last(self):
        points = Space().advance("n", 1, 100).points()
        self.assertEqual([p["n"] for p in points], [1, 2, 4, 8, 16, 32, 64, 100])
        with self.assertRaisesRegex(
            zerojit.Error, "advance from 3 gave 3, which does not increase"
        ):
            Space().advance("n", 3, 10, lambda v: v)

    def test_zip_and_filter(self):
        space = (
            Space()
            .zip(("block", "gather"), [(16, True), (64, False)])
            .choices("d", [1, 2])
            .filter("small", lambda p: p["block"] * p["d"] < 100)
        )
        self.assertEqual(
            space.points(),
            [
                {"block": 16, "gather": True, "d": 1},
                {"block": 16, "gather": True, "d": 2},
                {"block": 64, "gather": False, "d": 1},
            ],
        )
        with self.assertRaisesRegex(zerojit.Error, r"block\+gather: row 1 .* must hold 2"):
            Space().zip(("block", "gather"), [(1, 2), (3,)])
        with self.assertRaisesRegex(zerojit.Error, "axis 'd' is defined twice"):
            Space().choices("d", [1]).range("d", 1, 2)

    def test_expand_dedups_and_reports_dead_axes(self):
        space = (
            Space()
            .choices("dtype", ["f32", "bf16"])
            .range("batch", 1, 4)
            .advance("n", 1, 64)
            .filter("drop", lambda p: p["batch"] != 2)
        )
        expansion = space.expand(lambda p: (p["dtype"], p["n"] % 4 == 0))
        self.assertEqual(
            expansion.keys, [("f32", False), ("f32", True), ("bf16", False), ("bf16", True)]
        )
        self.assertEqual(expansion.dead_axes, ["batch"])
        self.assertEqual((expansion.points, expansion.filtered_out), (2 * 4 * 7, 2 * 7))

    def test_bound(self):
        with self.assertRaisesRegex(zerojit.Error, "axis 'n' from 0 to 99 has more than 10"):
            Space().bound(10).range("n", 0, 99)
        space = Space().bound(10).range("a", 1, 4).range("b", 1, 4)
        with self.assertRaisesRegex(zerojit.Error, r"a\(4\) x b\(4\) has more than 10 points"):
            space.points()
        # An iterator that never ends is read up to the bound and refused, not read forever.
        import itertools

        with self.assertRaisesRegex(zerojit.Error, "axis 'n' has more than 10 values"):
            Space().bound(10).choices("n", itertools.count())

    def test_dispatch_rejection_names_the_point_and_kernel(self):
        kernel = user_kernel.Axpby()
        space = Space(lambda p: [TensorDesc.contiguous(p["dtype"], (8,))] * 3).choices(
            "dtype", [DType.f32, DType.f64]
        )
        with self.assertRaisesRegex(
            zerojit.Error, r"user.axpby: .*point \{dtype=f64\} was rejected by dispatch"
        ):
            kernel.expand(space)

    def test_an_interrupt_in_dispatch_is_raised_as_itself(self):
        # Before: expand reported Ctrl-C in a dispatch as "point {n=1} was rejected by
        # dispatch" (a zerojit.Error), so an engine's KeyboardInterrupt handling never saw it.
        space = Space().choices("n", [1, 2, 3])

        def interrupted(arguments):
            raise KeyboardInterrupt

        def exits(arguments):
            raise SystemExit(3)

        def rejects(arguments):
            raise ZeroDivisionError("no key for this point")

        with self.assertRaises(KeyboardInterrupt):
            space.expand(interrupted)
        with self.assertRaises(SystemExit):
            space.expand(exits)
        # An ordinary exception is still the space's error, naming the point, with the cause.
        with self.assertRaisesRegex(zerojit.Error, r"point \{n=1\} was rejected") as raised:
            space.expand(rejects)
        self.assertIsInstance(raised.exception.__cause__, ZeroDivisionError)

    def test_the_examples_space(self):
        expansion = user_kernel.Axpby().expand()
        self.assertEqual(len(expansion.keys), 4)
        self.assertEqual(expansion.dead_axes, [])
        self.assertEqual(expansion.points, 2 * 21 * 2)


@needs_nvrtc
class WarmupTest(unittest.TestCase):
    def setUp(self):
        zerojit.clear_registrations()
        zerojit.monitor.disarm()
        zerojit.monitor.set_mode("off")

    tearDown = setUp

    def test_compile_only_warmup_and_manifest(self):
        zerojit.register(user_kernel.Axpby)
        zerojit.register(user_kernel.Axpby())  # the same registration: kept once
        self.assertEqual(len(zerojit.registrations()), 1)
        manifest = zerojit.kernel_manifest()
        self.assertEqual(
            [e["text"] for e in manifest["entries"]],
            [
                "dtype=bf16, vector_width=1",
                "dtype=bf16, vector_width=8",
                "dtype=f32, vector_width=1",
                "dtype=f32, vector_width=4",
            ],
        )
        done = []
        lock = threading.Lock()

        def on_key(kernel, key, origin, seconds, error, finished, total):
            with lock:
                done.append((kernel, key, origin, finished, total))

        report = zerojit.warmup_kernels(compile_only=True, jobs=2, monitor="warn", on_key=on_key)
        self.assertTrue(report["ok"])
        self.assertEqual(report["totals"]["keys"], 4)
        self.assertTrue(report["monitor_armed"])
        self.assertEqual(sorted(d[3] for d in done), [1, 2, 3, 4])
        self.assertEqual({d[4] for d in done}, {4})
        self.assertEqual({d[1] for d in done}, {e["text"] for e in manifest["entries"]})

    def test_failed_warmup_raises_naming_keys_and_does_not_arm(self):
        zerojit.register(BrokenKernel)
        with self.assertRaises(zerojit.WarmupError) as raised:
            zerojit.warmup_kernels(compile_only=True, jobs=2, monitor="error")
        error = raised.exception
        self.assertIn("test.broken [variant=1]", str(error))
        self.assertEqual([f["key"] for f in error.failed], ["variant=1"])
        self.assertFalse(zerojit.monitor.armed())
        report = zerojit.warmup_kernels(compile_only=True, raise_on_failure=False, monitor="warn")
        self.assertEqual(report["totals"]["failed"], 1)
        self.assertFalse(report["monitor_armed"])

    def test_python_and_cpp_kernels_share_one_pool(self):
        zerojit.register(user_kernel.Axpby)
        report = zerojit.warmup(compile_only=True, jobs=2, arch="sm_90a", cache_dir=None)
        kernels = [k["kernel"] for k in report["kernels"]]
        self.assertIn("user.axpby", kernels)
        self.assertTrue(any(k.startswith("dsv4.") for k in kernels))
        self.assertEqual(report["totals"]["keys"], len(zerojit.manifest()) + 4)

    def test_warming_an_unregistered_kernel_is_an_error(self):
        with self.assertRaisesRegex(ValueError, "kernel user.axpby is not registered"):
            zerojit.warmup_kernels([user_kernel.Axpby], compile_only=True)

    def test_kernel_compile_origin(self):
        kernel = user_kernel.Axpby()
        key = user_kernel.AxpbyKey(DType.f32, 4)
        kernel.compile(key)
        self.assertEqual(kernel.compile(key), "memory")


@dataclasses.dataclass(frozen=True)
class VariantKey:
    variant: int


def many_keys_kernel(kernel_name, key_count):
    """A kernel with `key_count` small keys: a warmup that takes seconds, to interrupt."""

    class ManyKeys(zerojit.Kernel):
        name = kernel_name
        Key = VariantKey
        params = (("x", "tensor"),)

        def dispatch(self, x):
            return VariantKey(x.shape[0])

        def program(self, key):
            return Program(
                source="template <int V> __global__ void k(float* x) { x[0] = V; }", function="k"
            )

        def warmup_space(self):
            return Space(lambda p: (TensorDesc.contiguous(DType.f32, (p["n"],)),)).range(
                "n", 1, key_count
            )

    return ManyKeys


@needs_nvrtc
class WarmupInterruptTest(unittest.TestCase):
    """Ctrl-C during a warmup. Before: the warmup ran without the GIL to its end (minutes for a
    large manifest) before the KeyboardInterrupt surfaced, and one raised in the progress
    callback was reported as unraisable and lost."""

    def setUp(self):
        zerojit.clear_registrations()
        zerojit.monitor.disarm()
        zerojit.monitor.set_mode("off")

    tearDown = setUp

    def test_an_interrupt_from_the_progress_callback_stops_the_warmup(self):
        zerojit.register(many_keys_kernel("test.interrupted_by_callback", 40))
        finished = []

        def on_key(kernel, key, origin, seconds, error, done, total):
            finished.append(key)
            raise KeyboardInterrupt

        with self.assertRaises(KeyboardInterrupt):
            zerojit.warmup_kernels(compile_only=True, jobs=1, monitor="error", on_key=on_key)
        self.assertEqual(len(finished), 1)  # no key started after it
        self.assertFalse(zerojit.monitor.armed())
        # Nothing was left half done: the next warmup has the first key and compiles the rest.
        report = zerojit.warmup_kernels(compile_only=True, jobs=2, monitor="warn")
        self.assertTrue(report["ok"])
        self.assertEqual(report["totals"]["keys"], 40)
        self.assertEqual(report["totals"]["from_memory"], 1)
        self.assertFalse(report["cancelled"])

    def test_ctrl_c_interrupts_a_warmup_between_keys(self):
        keys = 400
        child = subprocess.Popen(
            [
                sys.executable,
                "-c",
                (
                    "import sys, test_cpu_kernels as t, zerojit\n"
                    f"zerojit.register(t.many_keys_kernel('test.interrupted_by_signal', {keys}))\n"
                    "def on_key(kernel, key, origin, seconds, error, done, total):\n"
                    "    print(done, flush=True)\n"
                    "zerojit.warmup_kernels(compile_only=True, jobs=1, on_key=on_key)\n"
                    "print('finished', flush=True)\n"
                ),
            ],
            cwd=os.path.dirname(os.path.abspath(__file__)),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(os.environ, ZEROJIT_CACHE_DIR="off", PYTHONPATH=os.pathsep.join(sys.path)),
        )
        try:
            self.assertEqual(child.stdout.readline().strip(), "1")
            child.send_signal(signal.SIGINT)
            out, err = child.communicate(timeout=120)
        finally:
            child.kill()
            child.wait()
        self.assertNotEqual(child.returncode, 0, err)
        self.assertIn("KeyboardInterrupt", err)
        self.assertNotIn("finished", out)
        done = [int(line) for line in out.split()]
        # The key in flight when the signal came, perhaps one more; far from all of them.
        self.assertLess(max(done, default=1), 10, out)


class Planned(zerojit.Kernel):
    """A kernel whose plan the tests bend: what it returns is what `Planned.launch` says."""

    name = "test.planned"
    Key = MacroKey
    params = (("n", "i64"), ("x", "tensor"))
    launch = None

    def dispatch(self, x):
        return MacroKey(128, True, "plus", x.dtype)

    def program(self, key):
        return Program(
            source='extern "C" __global__ void k(long long n, float* x) {}',
            function="k",
            key_as="none",
        )

    def plan(self, key, n, x):
        return Planned.launch or Launch(grid=1, block=256, args=(n, x))


class LaunchErrorTest(unittest.TestCase):
    """Bad calls are refused by the one call path before anything is launched, naming the
    kernel and the argument."""

    def setUp(self):
        try:
            import numpy
        except ImportError:
            self.skipTest("numpy is not installed")
        self.host = numpy.zeros(4, numpy.float32)
        Planned.launch = None

    def test_host_tensors_are_refused_by_name(self):
        x = self.host
        with self.assertRaises(zerojit.InvalidArgument) as raised:
            user_kernel.Axpby()(x, x, x, 1.0, 1.0)
        self.assertEqual((raised.exception.kernel, raised.exception.argument), ("user.axpby", "x"))
        self.assertIn("must be a CUDA tensor", str(raised.exception))
        kernel = Planned()
        Planned.launch = Launch(grid=1, block=256, args=(x,))
        with self.assertRaisesRegex(zerojit.InvalidArgument, "tuple of 2 arguments"):
            kernel(4, x)
        Planned.launch = Launch(grid=(1, 1, 1, 1), block=256, args=(4, x))
        with self.assertRaisesRegex(zerojit.InvalidArgument, "grid.*tuple of 1 to 3"):
            kernel(4, x)
        Planned.launch = Launch(grid=1, block=256, args=("four", x))
        with self.assertRaisesRegex(zerojit.InvalidArgument, r"'n'.*got str"):
            kernel(4, x)
        Planned.launch = "not a launch"
        with self.assertRaisesRegex(zerojit.InvalidArgument, "plan.*not zerojit.Launch"):
            kernel(4, x)

    def test_a_call_passes_exactly_its_parameters(self):
        kernel = Planned()
        with self.assertRaisesRegex(zerojit.InvalidArgument, r"takes 2 arguments \(n, x\), got 1"):
            kernel(self.host)
        # A keyword that is neither stream= nor a call option: InvalidArgument naming it.
        with self.assertRaisesRegex(zerojit.InvalidArgument, "'x'.*no keyword") as caught:
            kernel(4, x=self.host)
        self.assertEqual(caught.exception.argument, "x")

    def test_unsigned_params_take_any_integer_type(self):
        # Before: a u32 / u64 parameter took only a Python int (numpy.uint32(5) was refused as
        # "must be an int"), while the signed kinds took anything with __index__.
        import numpy

        class Unsigned(zerojit.Kernel):
            name = "test.unsigned_params"
            Key = MacroKey
            params = (("n", "u32"), ("x", "tensor"))

            def dispatch(self, x):
                return MacroKey(128, True, "plus", x.dtype)

            def program(self, key):
                return Program(
                    source='extern "C" __global__ void k(unsigned n, float* x) {}',
                    function="k",
                    key_as="macros",
                    macro_prefix="T_",
                )

            def plan(self, key, n, x):
                return Launch(grid=1, block=256, args=(n, x))

        kernel = Unsigned()
        x = self.host
        for n in (5, numpy.uint32(5), numpy.int64(7), 2**32 - 1):
            # n is read, so the error is the next parameter's (a host tensor).
            with self.assertRaisesRegex(zerojit.InvalidArgument, "'x'.*must be a CUDA tensor"):
                kernel(n, x)


class HooksTest(unittest.TestCase):
    def test_log_lines_reach_python_logging_from_any_thread(self):
        with self.assertLogs("zerojit", level="INFO") as logs:
            zerojit._core.log("warning", "test", "from the main thread")
            worker = threading.Thread(
                target=zerojit._core.log, args=("info", "test", "from a worker")
            )
            worker.start()
            worker.join()
        self.assertEqual(
            logs.output,
            ["WARNING:zerojit:test: from the main thread", "INFO:zerojit:test: from a worker"],
        )
        self.assertEqual(logs.records[0].zerojit_component, "test")

    def test_vllm_monitor_modes(self):
        m = zerojit.hooks.monitor_mode_from_vllm
        self.assertEqual(
            [m(None), m("off"), m("WARN"), m("error")], ["off", "off", "warn", "error"]
        )
        with self.assertRaisesRegex(ValueError, "--jit-monitor-mode='loud'"):
            m("loud")
        zerojit.hooks.configure_from_vllm("error", jit_monitor_verbose=True)
        try:
            self.assertEqual((zerojit.monitor.mode(), zerojit.monitor.verbose()), ("error", True))
        finally:
            zerojit.hooks.configure_from_vllm("off")

    def test_nvrtc_from_the_wheel_layout(self):
        root = tempfile.mkdtemp()
        lib = os.path.join(root, "nvidia", "cu13", "lib")
        os.makedirs(lib)
        open(os.path.join(lib, "libnvrtc.so.13"), "w").close()
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([root, *sys.path]))
        env.pop("ZEROJIT_NVRTC_LIBRARY", None)
        code = "import zerojit.runtime.nvrtc as n; print(n.configure())"
        found = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        ).stdout.strip()
        self.assertEqual(found, os.path.join(lib, "libnvrtc.so.13"))
        env["ZEROJIT_NVRTC_LIBRARY"] = "/chosen/libnvrtc.so.13"
        chosen = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        ).stdout.strip()
        self.assertEqual(chosen, "/chosen/libnvrtc.so.13")

    def test_python_m_zerojit_execs_the_tool(self):
        env = dict(os.environ, ZEROJIT_TOOL="/bin/echo", PYTHONPATH=os.pathsep.join(sys.path))
        out = subprocess.run(
            [sys.executable, "-m", "zerojit", "cache", "list"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        self.assertEqual(out, "cache list\n")

    def test_stubs_cover_the_extension(self):
        stub = os.path.join(os.path.dirname(zerojit.__file__), "_core.pyi")
        with open(stub, encoding="utf-8") as handle:
            tree = ast.parse(handle.read())
        named = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
        named |= {n.target.id for n in tree.body if isinstance(n, ast.AnnAssign)}
        public = {n for n in dir(zerojit._core) if not n.startswith("_")}
        errors = {
            n
            for n in public
            if isinstance(getattr(zerojit._core, n), type)
            and issubclass(getattr(zerojit._core, n), BaseException)
        }
        self.assertEqual(public - errors - named, set())
        self.assertEqual(named - public, set())
        self.assertTrue(os.path.isfile(os.path.join(os.path.dirname(stub), "py.typed")))


@dataclasses.dataclass(frozen=True)
class ModeKey:
    dtype: DType
    neox: bool


class ModeKernel(zerojit.Kernel):
    """A kernel whose dispatch reads a scalar mode flag as well as a tensor (RoPE's
    is_neox_style): one class, two keys."""

    name = "test.scalar_mode"
    Key = ModeKey
    params = (("x", "tensor"), ("neox", "bool"))
    seen = []

    def dispatch(self, x, neox):
        ModeKernel.seen.append((x, neox))
        return ModeKey(x.dtype, bool(neox))

    def program(self, key):
        return Program(
            source='extern "C" __global__ void k(float* x, bool neox) {}',
            function="k",
            key_as="none",
        )

    def plan(self, key, x, neox):
        return Launch(grid=1, block=32, args=(x, neox))


class ScalarsAndDlpackInDispatch(unittest.TestCase):
    @unittest.skipUnless(importlib.util.find_spec("numpy"), "numpy is not installed")
    def test_dispatch_sees_a_numpy_array_as_a_descriptor_and_a_flag_as_its_value(self):
        import numpy

        x = numpy.zeros((4, 8), dtype=numpy.float32)
        kernel = ModeKernel()
        ModeKernel.seen.clear()
        for neox in (True, False, True):
            with self.assertRaises(zerojit.InvalidArgument) as caught:  # a host array
                kernel(x, neox)
            self.assertIn("CUDA", str(caught.exception))
        # Dispatch ran once per distinct (descriptor, flag): the memo is keyed by both.
        self.assertEqual([neox for _, neox in ModeKernel.seen], [True, False])
        desc = ModeKernel.seen[0][0]
        self.assertEqual((desc.dtype, desc.shape, desc.strides), (DType.f32, (4, 8), (8, 1)))
        self.assertEqual(TensorDesc.of(x), desc)
        self.assertEqual(
            {kernel.key_text(k) for k in (ModeKey(DType.f32, True), ModeKey(DType.f32, False))},
            {"dtype=f32, neox=true", "dtype=f32, neox=false"},
        )

    def test_an_object_that_is_no_tensor_is_refused_naming_what_a_tensor_is(self):
        with self.assertRaises(TypeError) as caught:
            TensorDesc.of([1, 2])
        self.assertIn("DLPack", str(caught.exception))


if __name__ == "__main__":
    unittest.main()
