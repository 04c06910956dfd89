"""The Python module under misbehaving callers and producers: integer arguments that are not
integers (floats, strings, None, out of range), DLPack producers that break the protocol (a null
shape pointer, a byte offset of 2^63, sizes whose product overflows). Each is an error naming
what is wrong, never a truncated or wrapped value, and never a crash. Needs no GPU.
"""

import ctypes
import os
import shutil
import tempfile
import unittest

# This process's cache, unless an earlier test module of the run named one: never the user's.
_CACHE_ROOT = tempfile.mkdtemp(prefix="zerojit-misbehaving-test-")
os.environ.setdefault("ZEROJIT_CACHE_DIR", _CACHE_ROOT)
os.environ.pop("ZEROJIT_CACHE_READONLY_DIRS", None)
os.environ.pop("ZEROJIT_MONITOR", None)

import pytorch_nvrtc  # noqa: E402,F401  (before zerojit)
import zerojit  # noqa: E402
from fake_dlpack import KDL_INT, HostileProducer, VersionedProducer  # noqa: E402


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
                    self.assert_refused(lambda: function(logits, topk, packed, *ranks), argument,
                                        value, "dsv4.dcp_pack")

    def test_an_int_from_index_is_taken_and_the_reference_runs_with_it(self):
        class Rank:
            def __index__(self):
                return 1

        logits, topk, packed = dcp_arguments()
        zerojit.reference.pack_dcp_topk_candidates(logits, topk, packed, Rank(), 2, True)
        self.assertEqual(logits.deleted, 1)

    def test_every_other_integer_parameter_refuses_floats_and_strings(self):
        out = VersionedProducer((1, 16, 512), (4, 16, 1))  # bf16
        cache = VersionedProducer((4, 64, 584), (1, 8, 1))  # uint8
        seq_lens = VersionedProducer((1,), (KDL_INT, 32, 1))
        table = VersionedProducer((1, 4), (KDL_INT, 32, 1))
        for function in (zerojit.dequantize_and_gather_k_cache,
                         zerojit.reference.dequantize_and_gather_k_cache):
            for argument, block_size, offset in (("block_size", 64.0, 0), ("block_size", "64", 0),
                                                 ("offset", 64, 0.5), ("offset", 64, "0"),
                                                 ("offset", 64, None)):
                self.assert_refused(
                    lambda: function(out, cache, seq_lens, None, table, block_size, offset),
                    argument, (block_size, offset), "dsv4.dequant_gather")
        state = VersionedProducer((2, 8, 1024))
        for argument, value in (("compress_ratio", 4.0), ("head_dim", 512.0),
                                ("state_width", "1024"), ("num_actual", 1.5)):
            kwargs = {"compress_ratio": 128 if argument == "num_actual" else 4,
                      "rms_norm_weight": VersionedProducer((512,))}
            arguments = [state, 1, None, VersionedProducer((1,), (KDL_INT, 64, 1)), None, None,
                         8, 1024 if kwargs["compress_ratio"] == 4 else 512, None, None, None]
            if argument == "num_actual":
                arguments[1] = value
            elif argument == "state_width":
                arguments[7] = value
            else:
                kwargs[argument] = value
            self.assert_refused(lambda: zerojit.compress_norm_rope_store(*arguments, **kwargs),
                                argument, value, "dsv4.compressor")


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
        for function in (zerojit.pack_dcp_topk_candidates,
                         zerojit.reference.pack_dcp_topk_candidates):
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


if __name__ == "__main__":
    unittest.main()
