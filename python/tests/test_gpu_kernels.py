"""GPU tests of a Python kernel (examples/python/user_kernel.py's axpby) on zerojit's core:
bit-exact against PyTorch after warmup, on an explicit stream, as a torch custom op under
torch.compile, replayed from a captured CUDA graph (a miss during capture refused), with the
monitor in error mode refusing an unwarmed key, and the example itself end to end.

Run: PYTHONPATH=<build>/python python3 -m unittest discover -v -s python/tests -p "test_gpu*.py"
"""

import os
import subprocess
import sys
import unittest

import test_gpu
from test_gpu import HAVE_CUDA, torch, zerojit

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
EXAMPLE = os.path.join(REPO, "examples", "python", "user_kernel.py")
sys.path.insert(0, os.path.dirname(EXAMPLE))
import user_kernel  # noqa: E402

requires_cuda = unittest.skipUnless(HAVE_CUDA, "needs PyTorch with a CUDA device")

if torch is not None:

    @zerojit.torch_op("zerojit_test::axpby", mutates_args=("out",))
    def axpby_op(
        x: torch.Tensor, y: torch.Tensor, out: torch.Tensor, alpha: float, beta: float
    ) -> None:
        user_kernel.Axpby()(x, y, out, alpha, beta)


def tearDownModule():
    test_gpu.tearDownModule()


def reference(x, y, alpha, beta):
    """alpha * x + beta * y as PyTorch computes it in float, rounded once to x's dtype."""
    return (alpha * x.float() + beta * y.float()).to(x.dtype)


def bits(tensor):
    return tensor.view({2: torch.int16, 4: torch.int32}[tensor.element_size()])


@requires_cuda
class PythonKernelTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.device = torch.device("cuda", torch.cuda.current_device())
        zerojit.clear_registrations()
        zerojit.register(user_kernel.Axpby)
        zerojit.monitor.set_mode("off")
        cls.report = zerojit.warmup_kernels([user_kernel.Axpby], devices=[cls.device.index], jobs=4)
        cls.kernel = user_kernel.Axpby()

    def tearDown(self):
        zerojit.monitor.disarm()
        zerojit.monitor.set_mode("off")
        zerojit.hooks.set_monitor_callback(None)

    def inputs(self, dtype, n, offset=0, seed=0):
        g = torch.Generator(device=self.device).manual_seed(seed)
        x = torch.randn(n + offset, device=self.device, dtype=dtype, generator=g)[offset:]
        y = torch.randn(n + offset, device=self.device, dtype=dtype, generator=g)[offset:]
        return x, y

    def test_warmup_loaded_every_key(self):
        self.assertTrue(self.report["ok"])
        self.assertEqual(self.report["totals"]["keys"], 4)
        self.assertEqual(self.report["devices"], [self.device.index])
        for key in zerojit.kernel_manifest([user_kernel.Axpby])["entries"]:
            typed = user_kernel.AxpbyKey(
                zerojit.DType(key["key"]["dtype"]), key["key"]["vector_width"]
            )
            self.assertTrue(
                self.kernel._core.has_executor(self.kernel.slot(typed), self.device.index)
            )

    def test_bit_exact_against_torch(self):
        before = self.kernel.counters()
        for dtype in (torch.bfloat16, torch.float32):
            for n, offset in ((1, 0), (1000, 0), (4096, 0), (4096, 1), (1 << 20, 0)):
                for alpha, beta in ((2.0, -0.5), (0.3, 1.7)):
                    with self.subTest(dtype=dtype, n=n, offset=offset, alpha=alpha):
                        x, y = self.inputs(dtype, n, offset, seed=n)
                        out = self.kernel(x, y, torch.empty_like(x), alpha, beta)
                        self.assertTrue(torch.equal(bits(out), bits(reference(x, y, alpha, beta))))
        after = self.kernel.counters()
        self.assertEqual(after["compiles"], before["compiles"])  # every key was warmed
        self.assertEqual(after["misses"], before["misses"])

    def test_explicit_stream(self):
        x, y = self.inputs(torch.float32, 1 << 16)
        out = torch.empty_like(x)
        stream = torch.cuda.Stream(self.device)
        stream.wait_stream(torch.cuda.current_stream(self.device))
        self.kernel(x, y, out, 2.0, -0.5, stream=stream)
        stream.synchronize()
        self.assertTrue(torch.equal(out, reference(x, y, 2.0, -0.5)))

    def test_torch_compile(self):
        def function(x, y):
            out = torch.empty_like(x)
            axpby_op(x, y, out, 2.0, -0.5)
            return out + 1

        x, y = self.inputs(torch.bfloat16, 8192)
        eager = function(x, y)
        torch._dynamo.reset()
        compiled = torch.compile(function, fullgraph=True)(x, y)
        self.assertTrue(torch.equal(bits(compiled), bits(eager)))
        self.assertTrue(torch.equal(bits(eager), bits(reference(x, y, 2.0, -0.5) + 1)))
        self.assertTrue(hasattr(torch.ops.zerojit_test, "axpby"))

    def test_cuda_graph_replay_and_refused_miss(self):
        x, y = self.inputs(torch.float32, 1 << 14)
        out = torch.empty_like(x)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self.kernel(x, y, out, 2.0, -0.5)
        x.copy_(torch.randn_like(x))  # the graph reads live memory
        graph.replay()
        torch.cuda.synchronize(self.device)
        self.assertTrue(torch.equal(out, reference(x, y, 2.0, -0.5)))

        # f16 was never warmed: a compile requested while capturing is refused in every mode.
        h = torch.ones(4096, device=self.device, dtype=torch.float16)
        h_out = torch.empty_like(h)
        graph = torch.cuda.CUDAGraph()
        with self.assertRaises(zerojit.RuntimeJitError) as raised:
            with torch.cuda.graph(graph):
                self.kernel(h, h, h_out, 1.0, 1.0)
        self.assertIn("capturing a CUDA graph", str(raised.exception))
        self.assertEqual(raised.exception.kernel, "user.axpby")
        self.assertEqual(raised.exception.key, "dtype=f16, vector_width=8")

    def test_monitor_error_mode_refuses_an_unwarmed_key(self):
        events = []
        zerojit.hooks.set_monitor_callback(events.append)
        zerojit.warmup_kernels([user_kernel.Axpby], devices=[self.device.index], monitor="error")
        self.assertTrue(zerojit.monitor.armed())
        h = torch.ones(1023, device=self.device, dtype=torch.float16)
        with self.assertRaises(zerojit.RuntimeJitError) as raised:
            self.kernel(h, h, torch.empty_like(h), 1.0, 1.0)
        self.assertEqual(raised.exception.key, "dtype=f16, vector_width=1")
        self.assertIn("x: f16[1023]", raised.exception.descriptors)
        self.assertEqual(
            [(e["kind"], e["kernel"], e["key"]) for e in events],
            [("compile", "user.axpby", "dtype=f16, vector_width=1")],
        )
        x, y = self.inputs(torch.float32, 4096)  # a warmed key still launches
        self.assertTrue(
            torch.equal(
                self.kernel(x, y, torch.empty_like(x), 2.0, -0.5), reference(x, y, 2.0, -0.5)
            )
        )

    def test_the_example_runs(self):
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
        result = subprocess.run(
            [sys.executable, EXAMPLE], env=env, capture_output=True, text=True, timeout=600
        )
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertIn("bit-exact against torch", result.stdout)
        self.assertIn("the monitor refused an unwarmed key: user.axpby", result.stdout)


if __name__ == "__main__":
    unittest.main()
