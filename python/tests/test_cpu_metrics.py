"""CPU tests of the Prometheus metrics (zerojit.metrics_text, zerojit.PrometheusCollector) and
of warmup's ready file (ready_file=): the counters a scrape shows after a warmup and a runtime
JIT, and the file that exists only after a warmup succeeded. Needs NVRTC, not a GPU."""

import dataclasses
import importlib.util
import json
import os
import re
import tempfile
import unittest

os.environ.setdefault("ZEROJIT_CACHE_DIR", tempfile.mkdtemp(prefix="zerojit-metrics-test-"))
os.environ.pop("ZEROJIT_MONITOR", None)

import pytorch_nvrtc  # noqa: E402,F401  (before zerojit)
import zerojit  # noqa: E402
from zerojit import DType, Program, Space, TensorDesc  # noqa: E402

needs_nvrtc = unittest.skipUnless(zerojit.nvrtc_available(), "NVRTC is not available")

SAMPLE = re.compile(r"^([a-z_]+)(?:\{(.*)\})? (\S+)$")
LABEL = re.compile(r'([a-z_]+)="((?:[^"\\]|\\.)*)"')


def scrape(text):
    """{(name, ((label, value), ...)): value} of an exposition, checking each line's form."""
    samples = {}
    declared = set()
    for line in text.splitlines():
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            declared.add(line.split()[2])
            continue
        match = SAMPLE.match(line)
        assert match, f"not a sample line: {line!r}"
        name, labels, value = match.groups()
        assert name in declared, f"{name} has no HELP/TYPE"
        samples[(name, tuple(LABEL.findall(labels or "")))] = float(value)
    return samples


@dataclasses.dataclass(frozen=True)
class WidthKey:
    width: int


def metrics_kernel(kernel_name, broken=False):
    """A kernel of its own name (its counters are this test's alone), keys width=1..3; with
    `broken`, width=2 does not compile."""

    class Widths(zerojit.Kernel):
        name = kernel_name
        Key = WidthKey
        params = (("x", "tensor"),)

        def dispatch(self, x):
            return WidthKey(x.shape[0])

        def program(self, key):
            body = "this is not C++;" if broken and key.width == 2 else "x[0] = V;"
            return Program(
                source=f"template <int V> __global__ void k(float* x) {{ {body} }}",
                function="k",
            )

        def warmup_space(self):
            return Space(lambda p: (TensorDesc.contiguous(DType.f32, (p["n"],)),)).range("n", 1, 3)

    return Widths


class ExpositionTest(unittest.TestCase):
    def test_every_family_is_declared_and_the_monitor_state_shown(self):
        samples = scrape(zerojit.metrics_text())
        mode = zerojit.monitor.mode()
        self.assertEqual(samples[("zerojit_monitor_mode", (("mode", mode),))], 1.0)
        self.assertEqual(
            samples[("zerojit_monitor_armed", ())], 1.0 if zerojit.monitor.armed() else 0.0
        )
        # The DSv4 family is listed before any of its kernels is called.
        self.assertIn(("zerojit_kernel_hits_total", (("kernel", "dsv4.c4_store"),)), samples)


@needs_nvrtc
class MetricsAfterWarmupTest(unittest.TestCase):
    def setUp(self):
        zerojit.clear_registrations()
        zerojit.monitor.disarm()
        zerojit.monitor.set_mode("off")
        self.cache = tempfile.TemporaryDirectory(prefix="zerojit-metrics-cache-")

    def tearDown(self):
        zerojit.clear_registrations()
        zerojit.monitor.disarm()
        zerojit.monitor.set_mode("off")
        zerojit.cache.set_dir(None)
        self.cache.cleanup()

    def test_a_scrape_counts_the_warmup_and_a_runtime_jit(self):
        kernel = metrics_kernel("test.metrics.widths")()
        zerojit.register(kernel)
        ready = os.path.join(self.cache.name, "ready.json")
        with open(ready, "w") as stale:
            stale.write("from an earlier warmup")
        report = zerojit.warmup_kernels(
            compile_only=True, jobs=2, monitor="warn", cache_dir=self.cache.name, ready_file=ready
        )
        self.assertTrue(report["ok"])
        label = (("kernel", "test.metrics.widths"),)

        def value(name, labels=label):
            return scrape(zerojit.metrics_text())[(name, labels)]

        self.assertEqual(value("zerojit_kernel_compiles_total"), 3)
        self.assertEqual(value("zerojit_kernel_runtime_jit_total"), 0)
        self.assertEqual(value("zerojit_kernel_disk_loads_total"), 0)
        self.assertEqual(value("zerojit_kernel_module_loads_total"), 0)  # compile only
        self.assertEqual(value("zerojit_monitor_armed", ()), 1)
        self.assertEqual(value("zerojit_monitor_mode", (("mode", "warn"),)), 1)
        self.assertEqual(value("zerojit_disk_cache_published_total", ()), 3)
        self.assertEqual(value("zerojit_disk_cache_hits_total", ()), 0)

        # A key outside the warmup space, compiled after the monitor was armed: a runtime JIT.
        self.assertEqual(kernel.compile(WidthKey(7)), "compiled")
        self.assertEqual(value("zerojit_kernel_compiles_total"), 4)
        self.assertEqual(value("zerojit_kernel_runtime_jit_total"), 1)
        self.assertEqual(value("zerojit_disk_cache_published_total", ()), 4)
        self.assertGreater(value("zerojit_kernel_compile_seconds_total"), 0)
        counters = zerojit.monitor.counters()["test.metrics.widths"]
        self.assertEqual(counters["runtime_jit"], 1)

        # The warmup succeeded: the ready file replaced the stale one.
        with open(ready) as written:
            document = json.load(written)
        self.assertTrue(document["ready"])
        self.assertEqual(document["keys"], 3)
        self.assertRegex(document["manifest_digest"], r"^fnv1a64:[0-9a-f]{16}$")
        self.assertRegex(document["time"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
        self.assertEqual([n for n in os.listdir(self.cache.name) if ".tmp-" in n], [])

    def test_a_failed_warmup_leaves_no_ready_file(self):
        zerojit.register(metrics_kernel("test.metrics.broken", broken=True))
        ready = os.path.join(self.cache.name, "ready.json")
        with open(ready, "w") as stale:
            stale.write("from an earlier warmup")
        report = zerojit.warmup_kernels(
            compile_only=True,
            jobs=2,
            cache_dir=self.cache.name,
            raise_on_failure=False,
            ready_file=ready,
        )
        self.assertFalse(report["ok"])
        self.assertFalse(os.path.exists(ready))
        with self.assertRaises(zerojit.WarmupError):
            zerojit.warmup_kernels(compile_only=True, cache_dir=self.cache.name, ready_file=ready)
        self.assertFalse(os.path.exists(ready))

    def test_two_warmups_of_the_same_keys_have_one_digest(self):
        zerojit.register(metrics_kernel("test.metrics.digest"))
        digests = []
        for _ in range(2):
            ready = os.path.join(self.cache.name, "ready.json")
            zerojit.warmup_kernels(compile_only=True, cache_dir=self.cache.name, ready_file=ready)
            with open(ready) as written:
                digests.append(json.load(written)["manifest_digest"])
        self.assertEqual(digests[0], digests[1])


HAS_PROMETHEUS_CLIENT = importlib.util.find_spec("prometheus_client") is not None


@unittest.skipUnless(
    HAS_PROMETHEUS_CLIENT,
    "prometheus_client is not installed (pip install prometheus-client to test the collector)",
)
class CollectorTest(unittest.TestCase):
    def test_the_collector_exposes_the_same_values(self):
        from prometheus_client import CollectorRegistry, generate_latest

        registry = CollectorRegistry()
        registry.register(zerojit.PrometheusCollector())
        exposed = scrape_client(generate_latest(registry).decode())
        ours = scrape(zerojit.metrics_text())
        for key, value in ours.items():
            self.assertIn(key, exposed)
            if not key[0].endswith("compile_seconds_total"):  # may move between the two reads
                self.assertEqual(exposed[key], value, key)


def scrape_client(text):
    """scrape() of prometheus_client's output, which adds _created samples to counters."""
    kept = "\n".join(
        line for line in text.splitlines() if "_created" not in line.split(" ")[0].split("{")[0]
    )
    return scrape(kept)


if __name__ == "__main__":
    unittest.main()
