"""The Python module under misbehaving callers, producers and surroundings: integer arguments
that are not integers (floats, strings, None, out of range), DLPack producers that break the
protocol (a null shape pointer, a byte offset of 2^63, sizes whose product overflows), cache
paths that are not UTF-8, and a pack-only process (ZEROJIT_CACHE_DIR=off, a read-only layer, a
malformed cache variable, no NVRTC). Each is an error naming what is wrong, or works, and never
a crash. (The empty yes/no value is test_cpu.py's EnvironmentFlagTest.) Needs no GPU; the cache
tests need NVRTC (skipped without it).
"""

import ctypes
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

# This process's cache, unless an earlier test module of the run named one: never the user's.
_CACHE_ROOT = tempfile.mkdtemp(prefix="zerojit-misbehaving-test-")
os.environ.setdefault("ZEROJIT_CACHE_DIR", _CACHE_ROOT)
os.environ.pop("ZEROJIT_CACHE_READONLY_DIRS", None)
os.environ.pop("ZEROJIT_MONITOR", None)

import pytorch_nvrtc  # noqa: E402,F401  (before zerojit)
import zerojit  # noqa: E402
from dsv4_support import dequant_gather_arguments, refused_compressor_arguments  # noqa: E402
from fake_dlpack import KDL_INT, HostileProducer, VersionedProducer  # noqa: E402

# The example Python kernel (examples/python/user_kernel.py): what the cache tests warm, also in
# the child process they start.
EXAMPLES = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "python"
)
needs_nvrtc = unittest.skipUnless(zerojit.nvrtc_available(), "NVRTC is not available")


def tearDownModule():
    shutil.rmtree(_CACHE_ROOT, ignore_errors=True)


def dcp_arguments(logits=None):
    """Host tensors for the DCP pack: logits [2, 100] (or `logits`), topk_indices [2, 512] all
    -1 (so nothing is read from the logits), packed [2, 512, 2]."""
    topk = VersionedProducer((2, 512), (KDL_INT, 32, 1))
    ctypes.memset(topk.data, 0xFF, 2 * 512 * 4)  # -1 in every int32
    if logits is None:
        logits = VersionedProducer((2, 100))
    return logits, topk, VersionedProducer((2, 512, 2))


class IntegerArgumentTest(unittest.TestCase):
    """Every integer parameter of the DSv4 functions takes an integer (int, numpy integers)
    and nothing else, on every path (the launch path and the CPU reference): before, a float or
    string rank was truncated or parsed (1.9 and "1" ran as rank 1) and None or an
    out-of-range value raised pybind11's TypeError naming nothing."""

    BAD = (1.9, "1", None, 2**31, -(2**31) - 1, 2**64, float("nan"), b"1")

    def assert_refused(self, call, argument, value, kernel):
        with self.assertRaises(zerojit.InvalidArgument, msg=f"{argument}={value!r}") as raised:
            call()
        self.assertEqual(raised.exception.argument, argument, str(raised.exception))
        self.assertEqual(raised.exception.kernel, kernel, str(raised.exception))
        self.assertIn(f"argument '{argument}'", str(raised.exception))
        self.assertIn("must be", str(raised.exception))

    def test_dcp_pack_ranks_refuse_what_is_not_an_int32(self):
        functions = (zerojit.pack_dcp_topk_candidates, zerojit.reference.pack_dcp_topk_candidates)
        for function in functions:
            for position, argument in enumerate(("dcp_rank", "dcp_world_size", "cp_interleave")):
                for value in self.BAD:
                    ranks = [0, 2, 1]
                    ranks[position] = value
                    logits, topk, packed = dcp_arguments()
                    self.assert_refused(
                        lambda: function(logits, topk, packed, *ranks),
                        argument,
                        value,
                        "dsv4.dcp_pack",
                    )

    def test_an_int_from_index_is_taken_and_the_reference_runs_with_it(self):
        class Rank:
            def __index__(self):
                return 1

        logits, topk, packed = dcp_arguments()
        zerojit.reference.pack_dcp_topk_candidates(logits, topk, packed, Rank(), 2, True)
        self.assertEqual(logits.deleted, 1)

    def test_every_other_integer_parameter_refuses_floats_and_strings(self):
        out, cache, seq_lens, table = dequant_gather_arguments()
        for function in (
            zerojit.dequantize_and_gather_k_cache,
            zerojit.reference.dequantize_and_gather_k_cache,
        ):
            for argument, block_size, offset in (
                ("block_size", 64.0, 0),
                ("block_size", "64", 0),
                ("offset", 64, 0.5),
                ("offset", 64, "0"),
                ("offset", 64, None),
            ):
                self.assert_refused(
                    lambda: function(out, cache, seq_lens, None, table, block_size, offset),
                    argument,
                    (block_size, offset),
                    "dsv4.dequant_gather",
                )
        state = VersionedProducer((2, 8, 1024))
        for argument, value in (
            ("compress_ratio", 4.0),
            ("head_dim", 512.0),
            ("state_width", "1024"),
            ("num_actual", 1.5),
        ):
            kwargs = {
                "compress_ratio": 128 if argument == "num_actual" else 4,
                "rms_norm_weight": VersionedProducer((512,)),
            }
            positional = {
                "num_actual": 1,
                "state_width": 1024 if kwargs["compress_ratio"] == 4 else 512,
            }
            # The argument under test takes the bad value, where it is passed.
            (positional if argument in positional else kwargs)[argument] = value
            positions = VersionedProducer((1,), (KDL_INT, 64, 1))
            arguments = refused_compressor_arguments(state, positions, **positional)
            self.assert_refused(
                lambda: zerojit.compress_norm_rope_store(*arguments, **kwargs),
                argument,
                value,
                "dsv4.compressor",
            )

    def test_pdl_kwargs_that_are_not_a_dict_are_refused_by_name(self):
        state = VersionedProducer((2, 8, 1024))
        positions = VersionedProducer((1,), (KDL_INT, 64, 1))
        arguments = refused_compressor_arguments(state, positions, state_width=1024)
        for value in (True, "launch_pdl", 1):
            self.assert_refused(
                lambda: zerojit.compress_norm_rope_store(
                    *arguments,
                    compress_ratio=4,
                    rms_norm_weight=VersionedProducer((512,)),
                    pdl_kwargs=value,
                ),
                "pdl_kwargs",
                value,
                "dsv4.compressor",
            )


class HostileProducerTest(unittest.TestCase):
    """A producer whose DLTensor lies is refused before anything is read through it, on the
    launch path and the reference path alike: before, a null shape pointer or a byte offset of
    2^63 crashed the interpreter."""

    LIES = (
        ({"null_shape": True}, "null shape pointer"),
        ({"byte_offset": 2**63}, "byte_offset of 9223372036854775808"),
        ({"byte_offset": 2**64 - 8}, "beyond any address"),
        ({"shape": (2**62, 8)}, "overflows 64 bits"),
        ({"shape": (3, 2**61)}, "overflows 64 bits"),
        ({"strides": (2**62, 1)}, "overflows 64 bits"),
        ({"strides": (-(2**63), 1)}, "overflows 64 bits"),
        ({"shape": (2, -100)}, "negative extent -100 in dimension 1"),
        ({"null_data": True}, "null data pointer"),
    )

    def test_lying_producers_are_refused_naming_the_argument(self):
        for function in (
            zerojit.pack_dcp_topk_candidates,
            zerojit.reference.pack_dcp_topk_candidates,
        ):
            for lie, said in self.LIES:
                liar = HostileProducer((2, 100), lie)
                logits, topk, packed = dcp_arguments(liar)
                with self.assertRaises(zerojit.InvalidArgument, msg=str(lie)) as raised:
                    function(logits, topk, packed, 0, 2, 1)
                self.assertEqual(raised.exception.argument, "logits", str(raised.exception))
                self.assertIn(said, str(raised.exception))
                # Refused, and still handed back: the producer's deleter ran.
                self.assertEqual(liar.deleted, 1, str(lie))

    def test_an_honest_producer_with_strides_and_an_offset_still_works(self):
        # The checks refuse lies, not legal tensors: a strided view at an offset is read right.
        logits = HostileProducer((2, 100), {"strides": (100, 1), "byte_offset": 0})
        logits_, topk, packed = dcp_arguments(logits)
        zerojit.reference.pack_dcp_topk_candidates(logits_, topk, packed, 0, 2, 1)
        self.assertEqual(logits.deleted, 1)


def warm_example_in_a_child(arguments="", **environment):
    """A compile-only warmup of the example kernel in a fresh interpreter (so that nothing is
    served from the memory of this one), with `arguments` added to the warmup call. Returns the
    finished process; its standard output is "keys from_disk compiled ok" and the cache's
    description."""
    code = (
        "import sys, zerojit\n"
        f"sys.path.insert(0, {EXAMPLES!r})\n"
        "import user_kernel\n"
        "zerojit.register(user_kernel.Axpby)\n"
        f"report = zerojit.warmup_kernels(compile_only=True, arch='sm_90a'{arguments})\n"
        "totals = report['totals']\n"
        "print(totals['keys'], totals['from_disk'], totals['compiled'], report['ok'])\n"
        "print(zerojit.cache.describe())\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code],
        env=dict(os.environ, **environment),
        capture_output=True,
        encoding="utf-8",
        errors="replace",
        timeout=300,
    )


@needs_nvrtc
class CacheSurroundingsTest(unittest.TestCase):
    """Cache paths that are not UTF-8 work as in the tool, and a pack in a read-only container
    image serves a process with ZEROJIT_CACHE_DIR=off, a malformed cache variable and no
    NVRTC: before, the path raised TypeError, the layer was ignored under "off", and one bad
    variable dropped the others (the layers with them)."""

    @classmethod
    def setUpClass(cls):
        cls.scratch = tempfile.mkdtemp(prefix="zerojit-misbehaving-pack-")
        # A pack at a path that is not UTF-8, named as os.fsdecode gives it (a str with
        # surrogate escapes).
        cls.pack = os.fsdecode(os.fsencode(cls.scratch) + b"/pack-\xe9\xff")
        cls.built = warm_example_in_a_child(f", cache_dir={cls.pack!r}")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.scratch, ignore_errors=True)

    def test_a_path_that_is_not_utf8_is_a_cache_like_any_other(self):
        self.assertEqual(self.built.returncode, 0, self.built.stderr)
        keys, from_disk, compiled, ok = self.built.stdout.split("\n")[0].split()
        self.assertEqual((from_disk, compiled, ok), ("0", keys, "True"), self.built.stdout)
        self.assertIn("pack-\ufffd", self.built.stdout.split("\n")[1])
        entries = os.listdir(os.fsencode(self.pack) + b"/entries")
        self.assertEqual(len([e for e in entries if e.endswith(b".zjc")]), int(keys))
        listed = zerojit.cache.ls(self.pack)
        self.assertEqual(len(listed), int(keys))
        self.assertIn("pack-\ufffd", listed[0]["layer"])  # reports are UTF-8, as the tool's
        self.assertEqual(zerojit.cache.verify(os.fsencode(self.pack))["valid"], int(keys))
        zerojit.cache.set_dir(self.pack)
        try:
            self.assertIn("pack-\ufffd", zerojit.cache.describe())
        finally:
            zerojit.cache.set_dir(None)

    def test_a_pack_serves_a_process_without_a_root_or_nvrtc_despite_a_bad_variable(self):
        self.assertEqual(self.built.returncode, 0, self.built.stderr)
        keys = self.built.stdout.split()[0]
        served = warm_example_in_a_child(
            ZEROJIT_CACHE_DIR="off",
            ZEROJIT_CACHE_READONLY_DIRS=self.pack,
            ZEROJIT_NVRTC_DISABLE="1",
            ZEROJIT_CACHE_LOCK_TIMEOUT_S="2m",
            ZEROJIT_PYTHON_LOGGING="0",
        )
        self.assertEqual(served.returncode, 0, served.stderr)
        lines = served.stdout.splitlines()
        self.assertEqual(lines[0], f"{keys} {keys} 0 True", served.stdout + served.stderr)
        self.assertIn("1 read-only layer", lines[1])
        # The malformed variable is named once, and the others (the layer) still apply.
        self.assertEqual(served.stderr.count('ZEROJIT_CACHE_LOCK_TIMEOUT_S="2m"'), 1, served.stderr)
        self.assertIn("the other cache variables apply", served.stderr)


if __name__ == "__main__":
    unittest.main()
