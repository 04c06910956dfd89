"""CuTeDSL kernels on zerojit on a GPU, served from a pack built without a GPU: each key's output
bit-identical to the same compiled function (cute.compile of the same function and fakes,
exported) called directly through NVIDIA's runtime; warmed kernels captured in a CUDA graph (the
measure of whether warmup really loaded their modules); an unwarmed key refused in error mode;
a second process served with zero compiles.

Needs PyTorch with a CUDA device, the CuTeDSL runtime library (the wheel's, or
ZEROJIT_CUTE_DSL_RUNTIME) and ZEROJIT_TEST_CUTE_EXPORTS, the folder
cute_reference_exports.py wrote (its pack and reference objects); skips, saying why, without
them."""

import ctypes
import json
import os
import shutil
import sys
import tempfile
import unittest

TESTS = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, TESTS)

import lang_support  # noqa: E402

torch, HAVE_CUDA = lang_support.torch_with_cuda()
EXPORTS = os.environ.get("ZEROJIT_TEST_CUTE_EXPORTS", "")
RUNTIME = os.environ.get("ZEROJIT_CUTE_DSL_RUNTIME", "")
REASON = (
    "needs PyTorch with a CUDA device"
    if not HAVE_CUDA
    else "needs ZEROJIT_TEST_CUTE_EXPORTS (cute_reference_exports.py)"
    if not os.path.isdir(EXPORTS)
    else "needs ZEROJIT_CUTE_DSL_RUNTIME"
    if not os.path.isfile(RUNTIME)
    else ""
)

if not REASON:
    import cute_test_owners as owners
    import zerojit


class _Runtime:
    """NVIDIA's CuTeDSL runtime called directly (ctypes), for the reference calls."""

    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        self.lib.CuteDSLRT_Module_Create_From_Bytes.argtypes = [
            ctypes.POINTER(ctypes.c_void_p),
            ctypes.c_char_p,
            ctypes.c_size_t,
            ctypes.c_void_p,
            ctypes.c_size_t,
        ]
        self.lib.CuteDSLRT_Module_Get_Function.argtypes = [
            ctypes.POINTER(ctypes.c_void_p),
            ctypes.c_void_p,
            ctypes.c_char_p,
        ]
        self.lib.CuteDSLRT_Function_Run.argtypes = [
            ctypes.c_void_p,
            ctypes.POINTER(ctypes.c_void_p),
            ctypes.c_size_t,
        ]
        self.functions = {}

    def function(self, prefix):
        if prefix not in self.functions:
            with open(os.path.join(EXPORTS, "reference", prefix + ".o"), "rb") as handle:
                image = handle.read()
            module, function = ctypes.c_void_p(), ctypes.c_void_p()
            assert (
                self.lib.CuteDSLRT_Module_Create_From_Bytes(
                    ctypes.byref(module), image, len(image), None, 0
                )
                == 0
            )
            assert (
                self.lib.CuteDSLRT_Module_Get_Function(
                    ctypes.byref(function), module, prefix.encode()
                )
                == 0
            )
            self.functions[prefix] = (module, function)  # the module lives as long as this
        return self.functions[prefix][1]

    def call(self, key, values):
        """The entry of `key` with `values` (tensors and scalars, in the call's order)."""
        keep, pointers, given = [], [], iter(values)
        for name, kind in key["params"]:
            if kind == "constexpr":
                continue
            if kind == "stream":
                value = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
            else:
                spec, value = key["arguments"][name], next(given)
                value = (
                    self.tensor_struct(spec, value)
                    if spec["kind"] == "tensor"
                    else ctypes.c_float(value)
                )
            keep.append(value)
            pointers.append(ctypes.cast(ctypes.pointer(value), ctypes.c_void_p))
        status = ctypes.c_int32(0)
        pointers.append(ctypes.cast(ctypes.pointer(status), ctypes.c_void_p))
        array = (ctypes.c_void_p * len(pointers))(*pointers)
        assert (
            self.lib.CuteDSLRT_Function_Run(self.function(key["prefix"]), array, len(pointers)) == 0
        )
        assert status.value == 0

    @staticmethod
    def tensor_struct(spec, tensor):
        dynamic = [d for d, extent in enumerate(spec["shape"]) if extent < 0]
        shape_type = ctypes.c_int32 if spec["shape_bytes"] == 4 else ctypes.c_int64
        fields = [("data", ctypes.c_void_p)]
        if dynamic:
            fields.append(("shapes", shape_type * len(dynamic)))
        if spec["dynamic_strides"]:
            fields.append(("strides", ctypes.c_int64 * len(spec["dynamic_strides"])))
        struct = type("TensorStruct", (ctypes.Structure,), {"_fields_": fields})()
        struct.data = tensor.data_ptr()
        for i, d in enumerate(dynamic):
            struct.shapes[i] = tensor.shape[d]
        for i, d in enumerate(spec["dynamic_strides"]):
            struct.strides[i] = tensor.stride(d)
        return struct


@unittest.skipIf(REASON, REASON)
class FromAPack(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.root = tempfile.mkdtemp()
        shutil.copytree(os.path.join(EXPORTS, "pack"), os.path.join(cls.root, "pack"))
        os.chmod(cls.root, 0o700)
        zerojit.clear_registrations()
        owners.register_all()
        cls.report = zerojit.warmup_kernels(cache_dir=os.path.join(cls.root, "pack"), monitor="off")
        with open(os.path.join(EXPORTS, "reference", "keys.json")) as handle:
            cls.keys = {(k["kernel"], k["key"]): k for k in json.load(handle)}
        cls.runtime = _Runtime(RUNTIME)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.root, ignore_errors=True)

    def test_every_key_came_from_the_pack(self):
        totals = self.report["totals"]
        self.assertEqual(totals["from_disk"], totals["keys"])
        self.assertEqual(totals["failed"], 0)

    def same_as_direct(self, kernel, key, inputs, outputs, scalars=()):
        """zerojit's call and the reference entry's on the same inputs: identical outputs."""
        ours = [torch.full_like(o, float("nan")) for o in outputs]
        theirs = [torch.full_like(o, float("nan")) for o in outputs]
        kernel(*inputs, *ours, *scalars)
        self.runtime.call(self.keys[(kernel.name, key)], [*inputs, *theirs, *scalars])
        torch.cuda.synchronize()
        for a, b in zip(ours, theirs):
            self.assertFalse(torch.isnan(a.float()).any(), "an output element was never written")
            self.assertTrue(
                torch.equal(a, b), f"{kernel.name} [{key}] differs from the direct call"
            )

    def test_scaled_add(self):
        for dtype, name, n in ((torch.float32, "f32", 4096), (torch.bfloat16, "bf16", 1000)):
            a, b = (torch.randn(n, device="cuda").to(dtype) for _ in range(2))
            c = torch.empty(n, device="cuda", dtype=dtype)
            self.same_as_direct(owners.ScaledAdd(), f"dtype={name}", (a, b), (c,), (0.37,))

    def test_row_sum(self):
        for cols in (64, 128):
            x = torch.randn(37, cols, device="cuda").to(torch.bfloat16)
            out = torch.empty(37, device="cuda")
            self.same_as_direct(owners.RowSum(), f"dtype=bf16, cols={cols}", (x,), (out,))

    def test_tiled_scale(self):
        for rows, columns, tile in ((5, 100, 128), (3, 4096, 256)):
            a = torch.randn(rows, columns, device="cuda")
            c = torch.empty_like(a)
            self.same_as_direct(owners.TiledScale(), f"tile={tile}", (a,), (c,), (1.5,))

    def test_warmed_kernels_replay_in_a_cuda_graph(self):
        a, b = torch.randn(4096, device="cuda"), torch.randn(4096, device="cuda")
        eager, captured = torch.empty_like(a), torch.empty_like(a)
        x = torch.randn(64, 128, device="cuda").to(torch.bfloat16)
        rows = torch.empty(64, device="cuda")
        owners.ScaledAdd()(a, b, eager, 2.0)
        graph, stream = torch.cuda.CUDAGraph(), torch.cuda.Stream()
        with torch.cuda.stream(stream):
            owners.ScaledAdd()(a, b, captured, 2.0)  # the memo learns the call outside capture
            owners.RowSum()(x, rows)
            with torch.cuda.graph(graph, stream=stream):
                owners.ScaledAdd()(a, b, captured, 2.0)
                owners.RowSum()(x, rows)
        captured.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        self.assertTrue(torch.equal(eager, captured))

    def test_in_error_mode_an_unwarmed_key_is_refused(self):
        half = torch.randn(1024, device="cuda").to(torch.float16)
        zerojit.monitor.set_mode("error")
        zerojit.monitor.arm()
        try:
            with self.assertRaises(zerojit.RuntimeJitError) as caught:
                owners.ScaledAdd()(half, half, torch.empty_like(half), 1.0)
            self.assertIn("dtype=f16", str(caught.exception))
        finally:
            zerojit.monitor.disarm()
            zerojit.monitor.set_mode("off")

    def test_another_process_starts_with_zero_compiles(self):
        pack = os.path.join(self.root, "pack")
        result = lang_support.run_python(
            "cute_test_owners",
            f"""
            owners.register_all()
            report = zerojit.warmup_kernels(cache_dir={pack!r}, monitor="error")
            compiles = sum(zerojit.monitor.counters()[k.name]["compiles"] for k in owners.KERNELS)
            print(json.dumps({{"totals": report["totals"], "compiles": compiles}}))
        """,
        )
        self.assertEqual(result["compiles"], 0)
        self.assertEqual(result["totals"]["from_disk"], result["totals"]["keys"])


if __name__ == "__main__":
    unittest.main()
