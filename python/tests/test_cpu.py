"""CPU tests of the zerojit Python package: import, configurations and manifests, compile-only
warmup, the cache operations, the monitor, DLPack import and the mapping of errors onto Python
exceptions. Needs no GPU; warmup needs NVRTC (skipped without it), some tests need numpy
(skipped without it: `python3 -m pip install numpy`).

Run: PYTHONPATH=<build>/python python3 -m unittest discover -s python/tests -p "test_cpu*.py"
"""

import logging
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

# The disk cache of this process: a fresh directory, never the user's.
_CACHE_ROOT = tempfile.mkdtemp(prefix="zerojit-python-test-")
os.environ["ZEROJIT_CACHE_DIR"] = _CACHE_ROOT
os.environ.pop("ZEROJIT_MONITOR", None)

import pytorch_nvrtc  # noqa: E402,F401  (before zerojit)
import zerojit  # noqa: E402
from dsv4_support import dequant_gather_arguments, refused_compressor_arguments  # noqa: E402
from fake_dlpack import (  # noqa: E402
    KDL_BFLOAT,
    KDL_COMPLEX,
    KDL_CUDA,
    KDL_FLOAT,
    KDL_INT,
    KDL_UINT,
    LegacyProducer,
    VersionedProducer,
    capsule_name,
)

try:
    import numpy
except ImportError:  # pragma: no cover - depends on the interpreter
    numpy = None

NEEDS_NUMPY = unittest.skipIf(
    numpy is None, "numpy is not installed for this interpreter (python3 -m pip install numpy)"
)


def tearDownModule():
    shutil.rmtree(_CACHE_ROOT, ignore_errors=True)


class ImportTest(unittest.TestCase):
    def test_package_exposes_the_api(self):
        self.assertEqual(zerojit.__version__, "0.1.0")
        for name in zerojit.__all__:
            self.assertTrue(hasattr(zerojit, name), name)
        self.assertIn("dequantize_and_gather_k_cache", zerojit.__all__)
        self.assertTrue(callable(zerojit.reference.fused_indexer_q_rope_quant))

    def test_error_classes_map_onto_python_ones(self):
        self.assertTrue(issubclass(zerojit.InvalidArgument, ValueError))
        self.assertTrue(issubclass(zerojit.InvalidArgument, zerojit.Error))
        self.assertTrue(issubclass(zerojit.ConfigError, ValueError))
        self.assertTrue(issubclass(zerojit.RuntimeJitError, zerojit.Error))
        self.assertFalse(issubclass(zerojit.RuntimeJitError, ValueError))
        self.assertTrue(issubclass(zerojit.CompileError, zerojit.Error))
        self.assertTrue(issubclass(zerojit.UnavailableError, zerojit.Error))
        self.assertTrue(issubclass(zerojit.Error, RuntimeError))
        self.assertEqual(zerojit.InvalidArgument.__module__, "zerojit")

    def test_machine_queries_never_raise(self):
        self.assertIsInstance(zerojit.driver_available(), bool)
        self.assertIsInstance(zerojit.nvrtc_available(), bool)
        self.assertGreaterEqual(zerojit.device_count(), 0)


class EnvironmentFlagTest(unittest.TestCase):
    """The yes/no variables (ZEROJIT_PYTHON_LOGGING, ZEROJIT_NO_TORCH here; the library's
    ZEROJIT_NVRTC_DISABLE and others in C++) share one rule; before, ZEROJIT_NO_TORCH=true and
    ZEROJIT_PYTHON_LOGGING=off were silently taken the other way."""

    def run_python(self, code, **environment):
        env = dict(os.environ, **environment)
        return subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
        )

    def test_words_and_defaults(self):
        from zerojit.runtime import environment as _environment

        name = "ZEROJIT_TEST_FLAG"
        try:
            for value in ("1", "true", "YES", "On"):
                os.environ[name] = value
                self.assertIs(_environment.flag(name, False), True, value)
            for value in ("0", "false", "No", "OFF"):
                os.environ[name] = value
                self.assertIs(_environment.flag(name, True), False, value)
            os.environ[name] = ""
            self.assertIs(_environment.flag(name, True), False, "empty is no")
            os.environ[name] = "sure"
            with self.assertLogs("zerojit", logging.WARNING) as logged:
                self.assertIs(_environment.flag(name, False), False)
            self.assertEqual(len(logged.output), 1)
            self.assertIn("ignoring ZEROJIT_TEST_FLAG=sure", logged.output[0])
        finally:
            os.environ.pop(name, None)

    def test_python_logging_off_leaves_the_library_on_standard_error(self):
        # A library warning (an unclear ZEROJIT_NVRTC_DISABLE) shows where the library's log
        # lines go: its own standard-error format without the Python bridge, the "zerojit"
        # logger with it.
        code = "import zerojit; zerojit.nvrtc_available()"
        prefix = "zerojit environment: warning: ignoring ZEROJIT_NVRTC_DISABLE=maybe"
        for off in ("0", "off", "False", ""):
            result = self.run_python(
                code, ZEROJIT_PYTHON_LOGGING=off, ZEROJIT_NVRTC_DISABLE="maybe"
            )
            self.assertEqual(result.returncode, 0, result.stderr)
            self.assertIn(prefix, result.stderr, off)
        bridged = self.run_python(code, ZEROJIT_PYTHON_LOGGING="yes", ZEROJIT_NVRTC_DISABLE="maybe")
        self.assertEqual(bridged.returncode, 0, bridged.stderr)
        self.assertNotIn(prefix, bridged.stderr)
        self.assertIn("ignoring ZEROJIT_NVRTC_DISABLE=maybe", bridged.stderr)
        unclear = self.run_python("import zerojit", ZEROJIT_PYTHON_LOGGING="nah")
        self.assertEqual(unclear.returncode, 0, unclear.stderr)
        self.assertIn("ignoring ZEROJIT_PYTHON_LOGGING=nah", unclear.stderr)


class ConfigTest(unittest.TestCase):
    def test_default_config_is_dsv4_flash_with_the_serving_defaults(self):
        config = zerojit.default_config()
        self.assertEqual(set(config), {"model", "serving"})
        self.assertEqual(config["model"]["num_hidden_layers"], 43)
        self.assertEqual(config["model"]["index_topk"], 512)
        self.assertEqual(
            config["serving"],
            {
                "block_size": 256,
                "kv_cache_dtype": "fp8_ds_mla",
                "indexer_dtype": "fp8",
                "max_num_batched_tokens": 8192,
                "target_arch": "sm_90a",
                "dcp_world_size": 1,
                "cp_interleave": 1,
                "c128_page_stride_bytes": None,
            },
        )

    def test_presets_and_serving_options(self):
        pro = zerojit.config("dsv4-pro", {"block_size": 64, "dcp_world_size": 2})
        self.assertEqual(pro["model"]["num_hidden_layers"], 61)
        self.assertEqual(pro["model"]["index_topk"], 1024)
        self.assertEqual(pro["serving"]["block_size"], 64)
        self.assertEqual(pro["serving"]["dcp_world_size"], 2)
        self.assertEqual(pro["serving"]["kv_cache_dtype"], "fp8_ds_mla")

    def test_a_config_dict_round_trips(self):
        config = zerojit.config("dsv4-pro", {"kv_cache_dtype": "bf16"})
        self.assertEqual(zerojit.config(config), config)
        self.assertEqual(zerojit.config(config["model"], config["serving"]), config)

    def test_bad_configs_raise_config_error_naming_the_field(self):
        with self.assertRaises(zerojit.ConfigError) as raised:
            zerojit.config(serving={"block_size": -1})
        self.assertIsInstance(raised.exception, ValueError)
        self.assertIn("block_size", str(raised.exception))
        with self.assertRaisesRegex(zerojit.ConfigError, "unknown option 'no_such_option'"):
            zerojit.config(serving={"no_such_option": 1})
        with self.assertRaisesRegex(zerojit.ConfigError, "kv_cache_dtype"):
            zerojit.config(serving={"kv_cache_dtype": "int3"})
        with self.assertRaisesRegex(zerojit.ConfigError, "no-such-model"):
            zerojit.config("no-such-model")
        # MXFP4 Q feeds an SM100-only consumer.
        with self.assertRaisesRegex(zerojit.ConfigError, "indexer"):
            zerojit.config(serving={"indexer_dtype": "mxfp4"})
        with self.assertRaises(TypeError):
            zerojit.config(serving=[("block_size", 64)])


# The default configuration's manifest: the spec's 8 keys (section 11) with C128 compress as
# its decode and its prefill scan (DESIGN.md).
DEFAULT_KEYS = 9


class ManifestTest(unittest.TestCase):
    def kernels(self, manifest):
        counts = {}
        for entry in manifest:
            counts[entry["kernel"]] = counts.get(entry["kernel"], 0) + 1
        return counts

    def test_default_manifest_has_the_keys_of_the_spec_with_both_c128_scans(self):
        manifest = zerojit.manifest()
        self.assertEqual(len(manifest), DEFAULT_KEYS)
        self.assertEqual(
            self.kernels(manifest),
            {
                "dsv4.indexer_q_fp8": 2,
                "dsv4.dequant_gather": 3,
                "dsv4.c4_store": 1,
                "dsv4.c128_compress": 2,
                "dsv4.c128_store": 1,
            },
        )
        self.assertEqual(sorted(e["key"]["coarsen"] for e in manifest[:2]), [1, 4])
        gathers = [
            (e["key"]["block_size"], e["key"]["has_gather_lens"])
            for e in manifest
            if e["kernel"] == "dsv4.dequant_gather"
        ]
        self.assertEqual(gathers, [(256, True), (64, False), (2, False)])
        store = [e for e in manifest if e["kernel"] == "dsv4.c128_store"][0]
        self.assertEqual(store["key"]["kv_cache_block_size"], 2)
        self.assertEqual(store["key"]["kv_block_stride"], 1728)
        self.assertIn("kv_block_stride=1728", store["text"])
        self.assertEqual(zerojit.manifest(zerojit.default_config()), manifest)

    def test_dcp_adds_the_decode_and_prefill_pack_keys(self):
        manifest = zerojit.manifest(serving={"dcp_world_size": 2})
        self.assertEqual(len(manifest), DEFAULT_KEYS + 2)
        packs = [e["key"] for e in manifest if e["kernel"] == "dsv4.dcp_pack"]
        self.assertEqual(sorted(p["has_row_starts"] for p in packs), [False, True])
        self.assertTrue(all(p["topk"] == 512 and p["dcp_world_size"] == 2 for p in packs))

    def test_gates_follow_the_serving_config(self):
        blackwell = zerojit.manifest(serving={"indexer_dtype": "mxfp4", "target_arch": "sm_100a"})
        self.assertEqual(self.kernels(blackwell).get("dsv4.indexer_q_mxfp4"), 2)
        self.assertNotIn("dsv4.indexer_q_fp8", self.kernels(blackwell))
        full = self.kernels(zerojit.manifest(serving={"kv_cache_dtype": "bf16"}))
        self.assertEqual(full.get("dsv4.c4_store_full"), 1)
        self.assertEqual(full.get("dsv4.c128_store_full"), 1)
        self.assertNotIn("dsv4.c4_store", full)
        self.assertEqual(zerojit.manifest(serving={"block_size": 0}), [])


@unittest.skipUnless(zerojit.nvrtc_available(), "NVRTC is not available: warmup cannot compile")
class CompileOnlyWarmupTest(unittest.TestCase):
    def setUp(self):
        self.cache_dir = tempfile.mkdtemp(prefix="zerojit-warmup-")

    def tearDown(self):
        zerojit.monitor.set_mode("off")
        zerojit.monitor.disarm()
        zerojit.cache.set_dir(_CACHE_ROOT)
        shutil.rmtree(self.cache_dir, ignore_errors=True)

    def test_warmup_compiles_the_manifest_and_the_cache_manages_it(self):
        report = zerojit.warmup(compile_only=True, cache_dir=self.cache_dir, jobs=2, monitor="warn")
        self.assertTrue(report["ok"], report)
        self.assertEqual(report["totals"]["keys"], DEFAULT_KEYS)
        self.assertEqual(report["totals"]["failed"], 0)
        self.assertEqual(report["devices"], [])
        self.assertEqual(report["archs"], ["sm_90a"])
        self.assertTrue(report["monitor_armed"])
        self.assertTrue(zerojit.monitor.armed())
        self.assertIn(f"{DEFAULT_KEYS} keys", report["summary"])
        self.assertEqual(
            sorted({k["kernel"] for k in report["keys"]}),
            sorted({e["kernel"] for e in zerojit.manifest()}),
        )
        self.assertIn(self.cache_dir, zerojit.cache.describe())

        # The same process warms again from memory; counters saw each key once.
        again = zerojit.warmup(compile_only=True, jobs=2)
        self.assertEqual(again["totals"]["from_memory"], DEFAULT_KEYS)
        counters = zerojit.monitor.counters()
        self.assertEqual(counters["dsv4.dequant_gather"]["runtime_jit"], 0)
        self.assertEqual(counters["dsv4.dequant_gather"]["loads"], 0)

        entries = zerojit.cache.ls(self.cache_dir)
        self.assertGreaterEqual(len(entries), DEFAULT_KEYS)
        self.assertTrue(all(e["status"] == "ok" for e in entries), entries)
        self.assertIn("dsv4.c4_store", {e["kernel"] for e in entries})
        verified = zerojit.cache.verify(self.cache_dir)
        self.assertEqual(verified["checked"], verified["valid"])
        self.assertEqual(verified["bad"], [])
        collected = zerojit.cache.gc(self.cache_dir)
        self.assertEqual(collected["removed"], 0)
        cleared = zerojit.cache.clear(self.cache_dir)
        self.assertGreaterEqual(cleared["removed"], DEFAULT_KEYS)
        self.assertEqual(zerojit.cache.ls(self.cache_dir), [])

    def test_warmup_in_worker_processes(self):
        # Targets no other test compiles for, so that the keys are not in memory already.
        report = zerojit.warmup(
            compile_only=True,
            cache_dir=self.cache_dir,
            jobs=2,
            arch="sm_103a",
            compile_processes=True,
        )
        self.assertTrue(report["ok"], report)
        self.assertEqual(report["totals"]["compiled"], DEFAULT_KEYS)
        self.assertEqual(report["compile_workers"], 2)
        self.assertEqual(report["compile_fallbacks"], 0)
        # In-process by default (another arch, so that the keys do compile).
        default = zerojit.warmup(compile_only=True, cache_dir="off", jobs=2, arch="sm_120a")
        self.assertEqual(default["totals"]["compiled"], DEFAULT_KEYS)
        self.assertEqual(default["compile_workers"], 0)

    def test_warmup_for_another_architecture(self):
        report = zerojit.warmup(
            serving={"block_size": 0}, compile_only=True, cache_dir="off", arch="sm_100a"
        )
        self.assertEqual(report["totals"]["keys"], 0)
        self.assertIn("memory only", zerojit.cache.describe())

    def test_bad_warmup_options_raise_value_errors(self):
        with self.assertRaisesRegex(ValueError, "progress"):
            zerojit.warmup(serving={"block_size": 0}, compile_only=True, progress="fancy")
        with self.assertRaisesRegex(zerojit.ConfigError, "cp_interleave"):
            zerojit.warmup(serving={"cp_interleave": 0}, compile_only=True)


class MonitorTest(unittest.TestCase):
    def tearDown(self):
        zerojit.monitor.set_mode("off")
        zerojit.monitor.disarm()

    def test_mode_arm_and_counters(self):
        self.assertEqual(zerojit.monitor.mode(), "off")
        zerojit.monitor.set_mode("ERROR")
        self.assertEqual(zerojit.monitor.mode(), "error")
        with self.assertRaisesRegex(ValueError, "'off', 'warn', 'error' or 'fallback'"):
            zerojit.monitor.set_mode("loud")
        zerojit.monitor.arm()
        self.assertTrue(zerojit.monitor.armed())
        zerojit.monitor.disarm()
        self.assertFalse(zerojit.monitor.armed())
        counters = zerojit.monitor.counters()
        self.assertEqual(len(counters), 9)
        self.assertEqual(
            set(counters["dsv4.dcp_pack"]),
            {
                "hits",
                "misses",
                "compiles",
                "compile_seconds",
                "disk_loads",
                "loads",
                "runtime_jit",
                "fallback_launches",
                "background_compiles",
                "background_failures",
            },
        )
        zerojit.monitor.reset_events()
        self.assertEqual(zerojit.monitor.events(), [])


def dcp_arguments(factory, **kwargs):
    """logits f32 [2, 100], topk_indices i32 [2, 512], packed f32 [2, 512, 2]."""
    return (
        factory((2, 100), (KDL_FLOAT, 32, 1), **kwargs),
        factory((2, 512), (KDL_INT, 32, 1), **kwargs),
        factory((2, 512, 2), (KDL_FLOAT, 32, 1), **kwargs),
    )


class DLPackTest(unittest.TestCase):
    """The capsule protocol, through a ctypes producer (no array library needed)."""

    def assert_consumed_once(self, *tensors):
        for tensor in tensors:
            self.assertEqual(tensor.deleted, len(tensor.capsules))
            for capsule in tensor.capsules:
                self.assertTrue(capsule_name(capsule).startswith("used_dltensor"))

    def test_cpu_tensors_are_imported_then_refused_by_validation(self):
        for factory, name in (
            (VersionedProducer, "used_dltensor_versioned"),
            (LegacyProducer, "used_dltensor"),
        ):
            logits, topk, packed = dcp_arguments(factory)
            with self.assertRaises(zerojit.InvalidArgument) as raised:
                zerojit.pack_dcp_topk_candidates(logits, topk, packed, 0, 2, 1)
            error = raised.exception
            self.assertEqual(error.kernel, "dsv4.dcp_pack")
            self.assertEqual(error.argument, "topk_indices")
            self.assertIn("must be on a CUDA device", str(error))
            self.assertIn("dsv4.dcp_pack", str(error))
            self.assert_consumed_once(logits, topk, packed)
            self.assertEqual(capsule_name(logits.capsules[0]), name)
            # CPU producers are asked with stream=None, as the protocol requires.
            self.assertEqual(logits.requests[0][0], None)
        self.assertEqual(logits.requests[0][1], None)  # the legacy producer took no version

    def test_versioned_producers_are_offered_dlpack_1(self):
        logits, topk, packed = dcp_arguments(VersionedProducer)
        with self.assertRaises(zerojit.InvalidArgument):
            zerojit.pack_dcp_topk_candidates(logits, topk, packed, 0, 2, 1)
        self.assertEqual(logits.requests, [(None, (1, 1))])

    @unittest.skipIf(zerojit.driver_available(), "a CUDA driver is present")
    def test_cuda_tensors_without_a_driver_raise_unavailable(self):
        logits, topk, packed = dcp_arguments(VersionedProducer, device=(KDL_CUDA, 0))
        with self.assertRaisesRegex(zerojit.UnavailableError, "libcuda"):
            zerojit.pack_dcp_topk_candidates(logits, topk, packed, 0, 2, 1)
        self.assert_consumed_once(logits, topk, packed)
        # A CUDA producer is told the consumer's stream: 1 is the legacy default stream.
        self.assertEqual(logits.requests[0][0], 1)
        logits, topk, packed = dcp_arguments(VersionedProducer, device=(KDL_CUDA, 0))
        with self.assertRaises(zerojit.UnavailableError):
            zerojit.pack_dcp_topk_candidates(logits, topk, packed, 0, 2, 1, stream=0x1234)
        self.assertEqual(logits.requests[0][0], 0x1234)

    def test_bad_tensors_name_the_argument(self):
        logits, topk, packed = dcp_arguments(VersionedProducer)
        with self.assertRaisesRegex(zerojit.InvalidArgument, "'logits'.*must be a tensor"):
            zerojit.pack_dcp_topk_candidates("logits", topk, packed, 0, 2, 1)
        complex_logits = VersionedProducer((2, 100), (KDL_COMPLEX, 64, 1))
        with self.assertRaisesRegex(zerojit.InvalidArgument, r"'logits'.*DLPack dtype \(code 5"):
            zerojit.pack_dcp_topk_candidates(complex_logits, topk, packed, 0, 2, 1)
        deep = VersionedProducer((1,) * 7, (KDL_FLOAT, 32, 1))
        with self.assertRaisesRegex(zerojit.InvalidArgument, "7 dimensions"):
            zerojit.pack_dcp_topk_candidates(deep, topk, packed, 0, 2, 1)
        future = VersionedProducer((2, 100), (KDL_FLOAT, 32, 1), version=(2, 0))
        with self.assertRaisesRegex(zerojit.InvalidArgument, "DLPack 2.0"):
            zerojit.pack_dcp_topk_candidates(future, topk, packed, 0, 2, 1)
        read_only = VersionedProducer((2, 512, 2), (KDL_FLOAT, 32, 1), read_only=True)
        with self.assertRaises(zerojit.InvalidArgument) as raised:
            zerojit.pack_dcp_topk_candidates(logits, topk, read_only, 0, 2, 1)
        self.assertEqual(raised.exception.argument, "packed")
        self.assertIn("read-only", str(raised.exception))
        self.assert_consumed_once(complex_logits, deep, future, read_only, logits, topk)

    def test_producers_that_break_the_protocol_are_named(self):
        logits, topk, packed = dcp_arguments(VersionedProducer)

        class NoCapsule(VersionedProducer):
            def __dlpack__(self, *, stream=None, max_version=None):
                return None

        class OddDevice(VersionedProducer):
            def __dlpack_device__(self):
                return "cpu"

        with self.assertRaisesRegex(
            zerojit.InvalidArgument, r"'logits'.*__dlpack__\(\) that returned NoneType"
        ):
            zerojit.pack_dcp_topk_candidates(NoCapsule((2, 100)), topk, packed, 0, 2, 1)
        with self.assertRaisesRegex(
            zerojit.InvalidArgument, r"'logits'.*__dlpack_device__\(\) that returned str"
        ):
            zerojit.pack_dcp_topk_candidates(OddDevice((2, 100)), topk, packed, 0, 2, 1)

    def test_a_capsule_is_consumed_once(self):
        logits, topk, packed = dcp_arguments(VersionedProducer)
        capsule = logits.__dlpack__(max_version=(1, 0))
        with self.assertRaises(zerojit.InvalidArgument):
            zerojit.pack_dcp_topk_candidates(capsule, topk, packed, 0, 2, 1)
        self.assertEqual(capsule_name(capsule), "used_dltensor_versioned")
        with self.assertRaisesRegex(zerojit.InvalidArgument, "consumed only once"):
            zerojit.pack_dcp_topk_candidates(capsule, topk, packed, 0, 2, 1)
        self.assertEqual(logits.deleted, 1)

    def test_optional_sizes_must_agree_with_the_tensors(self):
        out, cache, seq_lens, table = dequant_gather_arguments()
        with self.assertRaises(zerojit.InvalidArgument) as raised:
            zerojit.dequantize_and_gather_k_cache(out, cache, seq_lens, None, table, 256, 0)
        self.assertEqual(raised.exception.argument, "block_size")
        self.assertIn("k_cache.shape[1] = 64", str(raised.exception))
        with self.assertRaisesRegex(zerojit.InvalidArgument, "'k_cache'.*must be on a CUDA device"):
            zerojit.dequantize_and_gather_k_cache(out, cache, seq_lens, None, table, 64, 0)
        self.assert_consumed_once(out, cache, seq_lens, table)


@NEEDS_NUMPY
class NumpyErrorMappingTest(unittest.TestCase):
    """Argument validation with numpy arrays (CPU tensors) through DLPack."""

    def test_every_kernel_refuses_host_tensors_naming_kernel_and_argument(self):
        f32, i32, i64 = numpy.float32, numpy.int32, numpy.int64
        tokens = 4
        with self.assertRaises(zerojit.InvalidArgument) as raised:
            zerojit.pack_dcp_topk_candidates(
                numpy.zeros((3, 50), f32), numpy.zeros((3, 512), i32), None, 0, 2, 1
            )
        self.assertIn(
            "dsv4.dcp_pack: argument 'topk_indices': must be on a CUDA device",
            str(raised.exception),
        )
        with self.assertRaises(ValueError) as raised:
            zerojit.sparse_attn_compress_c128(
                numpy.zeros((2, 8, 1024), f32),
                numpy.zeros(tokens, i32),
                numpy.zeros(tokens, i64),
                numpy.zeros(tokens, i64),
                numpy.zeros((1, 2), i32),
                8,
            )
        self.assertEqual(raised.exception.kernel, "dsv4.c128_compress")
        self.assertIn("must be on a CUDA device", str(raised.exception))
        # numpy has no bfloat16: a uint16 query is refused on its dtype first.
        with self.assertRaisesRegex(
            zerojit.InvalidArgument, r"dsv4.indexer_q_fp8: argument 'q': dtype must be bf16"
        ):
            zerojit.fused_indexer_q_rope_quant(
                numpy.zeros(tokens, i64),
                numpy.zeros((tokens, 64, 128), numpy.uint16),
                numpy.zeros((100, 64), f32),
                numpy.zeros((tokens, 64), numpy.uint16),
                128**-0.5,
                64**-0.5,
            )
        with self.assertRaisesRegex(zerojit.InvalidArgument, "dsv4.indexer_q_mxfp4: argument 'q'"):
            zerojit.fused_indexer_q_rope_quant(
                numpy.zeros(tokens, i64),
                numpy.zeros((tokens, 64), f32),
                None,
                None,
                1.0,
                1.0,
                use_fp4=True,
            )
        with self.assertRaisesRegex(zerojit.InvalidArgument, "compress_ratio"):
            zerojit.compress_norm_rope_store(
                *refused_compressor_arguments(None, numpy.zeros(1, i64), num_actual=0),
                compress_ratio=16,
                rms_norm_weight=numpy.zeros(512, f32),
            )

    def test_failing_calls_leave_the_callers_references(self):
        # A call that fails before or after its outputs are read must not drop a reference the
        # caller holds (it once freed the caller's output tensor).
        import sys

        logits = numpy.zeros((3, 50), numpy.float32)
        packed = numpy.zeros((3, 512, 2), numpy.float32)
        before = sys.getrefcount(packed)
        for _ in range(10):
            with self.assertRaises(zerojit.InvalidArgument):  # 1-D topk: fails sizing the output
                zerojit.pack_dcp_topk_candidates(
                    logits, numpy.zeros(512, numpy.int32), packed, 0, 2, 1
                )
            with self.assertRaises(zerojit.InvalidArgument):  # host tensors: fails validating
                zerojit.pack_dcp_topk_candidates(
                    logits, numpy.zeros((3, 512), numpy.int32), packed, 0, 2, 1
                )
        self.assertEqual(sys.getrefcount(packed), before)
        with self.assertRaisesRegex(zerojit.InvalidArgument, "dcp_world_size.*int32"):
            zerojit.pack_dcp_topk_candidates(
                logits, numpy.zeros((3, 512), numpy.int32), packed, 0, 2**32 + 2, 1
            )

    def test_fast_path_flags_must_be_bools(self):
        # A truthy "False" must not read as True.
        from zerojit import _core

        args = [None] * 18  # vLLM's 16 arguments, pdl, stream
        args[9] = numpy.zeros((2, 64, 584), numpy.uint8)  # k_cache, read first: it picks the kernel
        args[14] = "False"
        with self.assertRaisesRegex(
            zerojit.InvalidArgument, "'store_full_kv'.*must be True, False or None, got str"
        ):
            _core.fast.c4_store(*args)

    def test_outputs_are_allocated_like_numpy_inputs(self):
        logits = numpy.zeros((3, 50), numpy.float32)
        packed = zerojit.reference.pack_dcp_topk_candidates(
            logits, numpy.full((3, 512), -1, numpy.int32), None, 0, 2, 1
        )
        self.assertIsInstance(packed, numpy.ndarray)
        self.assertEqual(packed.shape, (3, 512, 2))
        self.assertEqual(packed.dtype, numpy.float32)


@NEEDS_NUMPY
class NumpyReferenceTest(unittest.TestCase):
    """The CPU references on host tensors, against hand-computed values."""

    def test_dcp_pack_reference(self):
        logits = numpy.arange(16, dtype=numpy.float32).reshape(2, 8) + 0.5
        indices = numpy.full((2, 512), -1, numpy.int32)
        indices[0, 0], indices[0, 3], indices[1, 1] = 3, 0, 6
        row_starts = numpy.array([0, 1], numpy.int32)  # row 1 reads column 6 + 1 = 7
        packed = numpy.zeros((2, 512, 2), numpy.float32)
        result = zerojit.reference.pack_dcp_topk_candidates(
            logits, indices, packed, 1, 2, 1, row_starts
        )
        self.assertIs(result, packed)
        # Rank 1 of 2, interleave 1: global = 2 * local + 1.
        self.assertEqual(tuple(packed[0, 0]), (3.5, 7.0))
        self.assertEqual(tuple(packed[0, 3]), (0.5, 1.0))
        self.assertEqual(tuple(packed[1, 1]), (15.5, 13.0))
        self.assertEqual(tuple(packed[0, 1]), (-numpy.inf, -1.0))
        self.assertEqual(tuple(packed[1, 511]), (-numpy.inf, -1.0))

    def test_c128_compress_reference_pools_the_128_rows(self):
        # One request whose 128 positions fill state blocks 0..15 (8 rows each); equal scores
        # make the softmax a plain mean: kv of row r is r, so every column pools to 63.5.
        state = numpy.zeros((16, 8, 1024), numpy.float32)
        for position in range(128):
            state[position // 8, position % 8, :512] = position
        positions = numpy.array([126, 127], numpy.int64)  # only 127 is a boundary token
        compressed = numpy.full((2, 512), 7.0, numpy.float32)
        result, rows = zerojit.reference.sparse_attn_compress_c128(
            state,
            numpy.zeros(2, numpy.int32),
            positions,
            numpy.array([5, 6], numpy.int64),
            numpy.arange(16, dtype=numpy.int32).reshape(1, 16),
            8,
            compressed,
        )
        self.assertIs(result, compressed)
        self.assertEqual(rows, [1])
        self.assertTrue(numpy.all(compressed[0] == 7.0))  # not a boundary: untouched
        self.assertTrue(numpy.allclose(compressed[1], 63.5, rtol=0, atol=1e-5))

    def test_references_refuse_indices_past_their_tensors(self):
        # The CPU references read host memory: a page, block or slot past its tensor is an
        # error naming the argument, never a read or write outside the allocation.
        # 256-byte aligned (numpy promises less than the kernel's 32), and numpy has no bf16.
        k_cache = VersionedProducer((2, 64, 584), dtype=(KDL_UINT, 8, 1))
        out = VersionedProducer((1, 4, 512), dtype=(KDL_BFLOAT, 16, 1))
        block_table = numpy.array([[10**8]], numpy.int32)
        with self.assertRaisesRegex(
            zerojit.InvalidArgument, r"'block_table'.*100000000.*the pages of k_cache \(2\)"
        ):
            zerojit.reference.dequantize_and_gather_k_cache(
                out, k_cache, numpy.array([4], numpy.int32), None, block_table, 64, 0
            )
        state = numpy.zeros((16, 8, 1024), numpy.float32)
        table = numpy.arange(16, dtype=numpy.int32).reshape(1, 16)
        table[0, 3] = 16
        with self.assertRaisesRegex(zerojit.InvalidArgument, r"'block_table'.*state_cache"):
            zerojit.reference.sparse_attn_compress_c128(
                state,
                numpy.zeros(2, numpy.int32),
                numpy.array([126, 127], numpy.int64),
                numpy.array([5, 6], numpy.int64),
                table,
                8,
                numpy.zeros((2, 512), numpy.float32),
            )

    def test_references_refuse_device_tensors(self):
        cuda_logits = VersionedProducer((2, 8), (KDL_FLOAT, 32, 1), device=(KDL_CUDA, 0))
        with self.assertRaisesRegex(zerojit.InvalidArgument, "host memory"):
            zerojit.reference.pack_dcp_topk_candidates(
                cuda_logits,
                numpy.full((2, 512), -1, numpy.int32),
                numpy.zeros((2, 512, 2), numpy.float32),
                0,
                2,
                1,
            )
        with self.assertRaisesRegex(TypeError, "no stream"):
            zerojit.reference.pack_dcp_topk_candidates(None, None, None, 0, 2, 1, stream=1)


if __name__ == "__main__":
    unittest.main()
