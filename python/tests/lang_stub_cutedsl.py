"""CuTeDSL calls through the whole call path to the exported entry, on the stub driver
(tests/support/stub_driver.cpp stands in for libcuda and for the CuTeDSL runtime): the tests'
and the engine-style kernels are compiled for sm_90a and loaded on the stub's device 0, and each
call's `host_run` event holds the argument pointers zerojit passed and the bytes behind them,
read here as the entry reads them (the structs of the export's header). Calls the compiled code
cannot take are refused before anything runs.

CTest runs this file with the stub environment (zerojit_python_languages_stub); elsewhere, or
without nvidia-cutlass-dsl, every test skips, saying why."""

import ctypes
import json
import os
import struct
import tempfile
import unittest

import cute_engine_owners as owners
import cute_test_owners
import zerojit
from fake_dlpack import KDL_FLOAT
from lang_cpu_cutedsl_engine import U8, cuda, gather_call, refused
from lang_support import HAVE_DSL

STUB = os.environ.get("ZEROJIT_TESTING_CUDA_DRIVER", "")
NEEDS_STUB = unittest.skipUnless(
    HAVE_DSL and STUB and os.environ.get("ZEROJIT_CUTE_DSL_RUNTIME") == STUB,
    "needs nvidia-cutlass-dsl and the stub driver as the CUDA driver and the CuTeDSL runtime "
    "(ZEROJIT_TESTING_CUDA_DRIVER and ZEROJIT_CUTE_DSL_RUNTIME: CTest's "
    "zerojit_python_languages_stub sets both)",
)
F32, E4M3 = (KDL_FLOAT, 32, 1), (10, 8, 1)


def stub():
    library = ctypes.CDLL(STUB)
    library.zerojit_stub_events.restype = ctypes.c_size_t
    return library


def runs(library):
    """The host_run events since the last clear."""
    size = library.zerojit_stub_events(None, 0)
    buffer = ctypes.create_string_buffer(size)
    library.zerojit_stub_events(buffer, size)
    events = [json.loads(line) for line in buffer.value.decode().splitlines()]
    return [event for event in events if event["event"] == "host_run"]


class Arguments:
    """A host_run's argument i as the entry reads it: a tensor's struct {void* data;
    int{32,64}_t dynamic_shapes[k]; int64_t dynamic_strides[m];}, or a scalar."""

    def __init__(self, event):
        self.memory = bytes.fromhex(event["memory"])
        self.offsets = event["offsets"]
        self.count = event["arguments"]

    def tensor(self, i, shapes, strides, shape_bytes=4):
        at = self.offsets[i]
        data = struct.unpack_from("<Q", self.memory, at)[0]
        code = "<" + ("i" if shape_bytes == 4 else "q") * shapes
        extents = list(struct.unpack_from(code, self.memory, at + 8))
        at += 8 + (shapes * shape_bytes + 7) // 8 * 8
        return data, extents, list(struct.unpack_from("<" + "q" * strides, self.memory, at))

    def scalar(self, i, code):
        return struct.unpack_from("<" + code, self.memory, self.offsets[i])[0]


@NEEDS_STUB
class HostRun(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cache = tempfile.TemporaryDirectory()
        owners.register_all()
        cute_test_owners.register_all()
        report = zerojit.warmup_kernels(
            cache_dir=cls.cache.name, devices=[0], jobs=2, arm_monitor=False
        )
        assert report["totals"]["failed"] == 0, report["keys"]
        cls.stub = stub()

    @classmethod
    def tearDownClass(cls):
        zerojit.clear_registrations()
        cls.cache.cleanup()

    def setUp(self):
        self.stub.zerojit_stub_clear()

    def one_run(self):
        events = runs(self.stub)
        self.assertEqual(len(events), 1, events)
        return Arguments(events[0])

    def test_the_gather_fills_every_struct_and_leaves_an_absent_tensor_out(self):
        kernel = owners.PagedGather()
        out, cache, table, lens, gather, scale = gather_call(reqs=3, rows=5)
        kernel(out, cache, table, lens, gather, scale)
        run = self.one_run()
        # mOut, mCache, mBlockTable, mSeqLens, mGatherLens, scale, stream, the return code
        self.assertEqual(run.count, 8)
        self.assertEqual(run.tensor(0, 2, 2), (out.data, [3, 5], [5 * 512, 512]))
        self.assertEqual(run.tensor(1, 1, 1), (cache.data, [16], [owners.PAGE_BYTES]))
        self.assertEqual(run.tensor(2, 2, 1), (table.data, [3, 8], [8]))
        self.assertEqual(run.tensor(3, 1, 0), (lens.data, [3], []))
        self.assertEqual(run.tensor(4, 1, 0), (gather.data, [3], []))
        self.assertEqual(run.scalar(5, "f"), 0.5)
        self.stub.zerojit_stub_clear()
        kernel(out, cache, table, lens, None, scale)  # the other key: no gather_lens argument
        run = self.one_run()
        self.assertEqual(run.count, 7)
        self.assertEqual(run.scalar(4, "f"), 0.5)

    def test_the_indexer_takes_its_scale_only_where_compiled(self):
        kernel = owners.IndexerLogits()
        rows = [cuda((4, 64), F32) for _ in range(2)]
        key = cuda((4, 128), F32)
        kernel(cuda((4, 64, 128), E4M3), None, key, *rows)
        self.assertEqual(self.one_run().count, 6)
        self.stub.zerojit_stub_clear()
        q = cuda((4, 64, 128), U8)
        kernel(q, cuda((4, 64), U8), key, *rows)
        run = self.one_run()
        self.assertEqual(run.count, 7)
        self.assertEqual(run.tensor(0, 1, 2), (q.data, [4], [64 * 128, 128]))

    def test_the_first_kernels_still_run(self):
        cute_test_owners.ScaledAdd()(*[cuda((1024,), F32) for _ in range(3)], 2.0)
        run = self.one_run()
        self.assertEqual((run.count, run.scalar(3, "f")), (6, 2.0))

    def test_refused_calls_run_nothing(self):
        gather, indexer = owners.PagedGather(), owners.IndexerLogits()
        refused(self, lambda: gather(*gather_call(page_stride=1730)), "mCache", ["multiple of 32"])
        wide = cuda((16, 2, owners.ROW_BYTES), U8, (owners.PAGE_BYTES, 600, 1))
        call = list(gather_call())
        call[1] = wide
        refused(self, lambda: gather(*call), "mCache", ["stride 600", "static at 584"])
        refused(
            self,
            lambda: gather(*gather_call(seq_reqs=4)),
            "mSeqLens",
            ["extent 4", "symbol 'num_reqs' is 3", "mOut's extent in dimension 0"],
        )
        rows = [cuda((4, 64), F32) for _ in range(2)]
        key = cuda((4, 128), F32)
        refused(
            self,
            lambda: indexer(cuda((4, 64, 128), U8), None, key, *rows),
            "mQScale",
            ["is None", "compiled a tensor"],
        )
        refused(
            self,
            lambda: indexer(cuda((4, 64, 128), E4M3), cuda((4, 64), U8), key, *rows),
            "mQScale",
            ["is a tensor", "absent (None)"],
        )
        refused(
            self,
            lambda: indexer(cuda((4, 64, 128), E4M3), None, cuda((5, 128), F32), *rows),
            "mK",
            ["symbol 'num_tokens' is 4"],
        )
        self.assertEqual(runs(self.stub), [])


if __name__ == "__main__":
    unittest.main()
