"""Triton kernels on zerojit on a GPU: every test kernel bit-identical to the same kernel
launched by Triton itself on fresh random inputs (outputs poisoned first, the bytes around them
checked untouched), warmed kernels captured in CUDA graphs, an unwarmed class refused in error
mode (during capture too), the guard refusing a foreign Triton compile after warmup and a
Triton module load during capture, and a pack served in a process where Triton cannot be
imported.

Needs PyTorch with a CUDA device and Triton; skips, saying why, without them. Run with the
interpreter that has both (the GPU host's python3)."""

import json
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

TESTS = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, TESTS)

import lang_support  # noqa: E402

torch, REASON = lang_support.torch_for_triton_gpu()

if not REASON:
    import triton

    import triton_test_kernels as kernels
    import triton_test_owners as owners
    import zerojit

GUARD = 64  # elements kept around every output, poisoned, checked untouched


def guarded(count, dtype, poison):
    """An output of `count` elements inside a buffer whose GUARD elements on both sides hold
    `poison` too; returns (buffer, output view)."""
    buffer = torch.full((count + 2 * GUARD,), poison, dtype=dtype, device="cuda")
    return buffer, buffer[GUARD : GUARD + count]


def poison_of(dtype):
    return -7777 if not dtype.is_floating_point else float("nan")


@unittest.skipIf(REASON, REASON)
class AgainstTriton(unittest.TestCase):
    """Each kernel launched by zerojit and by Triton on the same inputs: the bytes agree."""

    @classmethod
    def setUpClass(cls):
        cls.cache = lang_support.warm_in_process(owners)
        zerojit.clear_registrations()

    @classmethod
    def tearDownClass(cls):
        cls.cache.cleanup()

    def same(self, ours, theirs, buffer_ours, buffer_theirs, poison):
        torch.cuda.synchronize()
        self.assertTrue(
            torch.equal(ours.view(torch.uint8) if ours.dtype.itemsize == 1 else ours, theirs),
            f"zerojit and Triton differ: {ours} vs {theirs}",
        )
        for buffer in (buffer_ours, buffer_theirs):
            for edge in (buffer[:GUARD], buffer[-GUARD:]):
                if poison != poison:  # NaN
                    self.assertTrue(torch.isnan(edge).all(), "a byte outside the output changed")
                else:
                    self.assertTrue((edge == poison).all(), "a byte outside the output changed")
        self.assertFalse(
            torch.isnan(ours.float()).any() if ours.is_floating_point() else False,
            "an output element was never written",
        )

    def test_masked_add(self):
        for dtype in (torch.float32, torch.float16, torch.bfloat16):
            for n in (1000, 1 << 20, 4097):
                x = torch.randn(n, device="cuda").to(dtype)
                y = torch.randn(n, device="cuda").to(dtype)
                alpha = 0.37
                poison = poison_of(dtype)
                buffer_a, ours = guarded(n, dtype, poison)
                buffer_b, theirs = guarded(n, dtype, poison)
                owners.MaskedAdd()(x, y, ours, n, alpha)
                key = owners.MaskedAdd().dispatch(zerojit.TensorDesc.of(x), n)
                kernels.masked_add[(triton.cdiv(n, key.block),)](
                    x, y, theirs, n, alpha, BLOCK=key.block, num_warps=key.num_warps
                )
                self.same(ours, theirs, buffer_a, buffer_b, poison)

    def test_row_sum(self):
        for dtype in (torch.float32, torch.bfloat16):
            for rows, cols in ((8, 100), (37, 512), (5, 1000), (64, 64)):
                x = torch.randn(rows, cols, device="cuda").to(dtype)
                buffer_a, ours = guarded(rows, torch.float32, float("nan"))
                buffer_b, theirs = guarded(rows, torch.float32, float("nan"))
                owners.RowSum()(x, ours, cols, x.stride(0))
                key = owners.RowSum().dispatch(zerojit.TensorDesc.of(x), cols, x.stride(0))
                kernels.row_sum[(rows,)](
                    x,
                    theirs,
                    cols,
                    x.stride(0),
                    BLOCK_COLS=key.block_cols,
                    num_warps=4 if key.block_cols >= 512 else 1,
                )
                self.same(ours, theirs, buffer_a, buffer_b, float("nan"))

    def test_matmul_tile(self):
        for dtype in (torch.float16, torch.bfloat16):
            for m in (16, 512, 100):
                k, n = 64, 64
                a = torch.randn(m, k, device="cuda").to(dtype)
                b = torch.randn(k, n, device="cuda").to(dtype)
                buffer_a, ours = guarded(m * n, torch.float32, float("nan"))
                buffer_b, theirs = guarded(m * n, torch.float32, float("nan"))
                ours, theirs = ours.view(m, n), theirs.view(m, n)
                owners.MatmulTile()(a, b, ours, m, n, k, a.stride(0), 1, b.stride(0), 1, n)
                key = owners.MatmulTile().dispatch(zerojit.TensorDesc.of(a), m)
                grid = (triton.cdiv(m, key.block_m), triton.cdiv(n, key.block_n))
                kernels.matmul_tile[grid](
                    a,
                    b,
                    theirs,
                    m,
                    n,
                    k,
                    a.stride(0),
                    1,
                    b.stride(0),
                    1,
                    n,
                    BLOCK_M=key.block_m,
                    BLOCK_N=key.block_n,
                    BLOCK_K=key.block_k,
                    num_warps=key.num_warps,
                    num_stages=key.num_stages,
                )
                self.same(ours, theirs, buffer_a, buffer_b, float("nan"))

    def test_int_widths_in_every_class(self):
        n16 = 4096
        for base in (7, -(2**31), 2**40, 2**63 + 5):
            salt = int(torch.randint(0, 2**30, ()).item())
            buffer_a, ours = guarded(n16, torch.int64, -7777)
            buffer_b, theirs = guarded(n16, torch.int64, -7777)
            owners.IntWidths()(ours, base, 3, salt, n16)
            kernels.int_widths[(triton.cdiv(n16, 256),)](
                theirs, base, 3, salt, n16, BLOCK=256, num_warps=2
            )
            self.same(ours, theirs, buffer_a, buffer_b, -7777)

    def test_pdl_scale_after_a_producer(self):
        n = 1 << 18
        for _ in range(3):
            x = torch.randn(n, device="cuda")
            buffer_a, ours = guarded(n, torch.float32, float("nan"))
            buffer_b, theirs = guarded(n, torch.float32, float("nan"))
            x.mul_(3.0)  # the producer: pdl_scale must wait for it before reading x
            owners.PdlScale()(x, ours, n, 0.5)
            kernels.pdl_scale[(triton.cdiv(n, 512),)](
                x, theirs, n, 0.5, BLOCK=512, num_warps=4, launch_pdl=True
            )
            self.same(ours, theirs, buffer_a, buffer_b, float("nan"))

    def test_warmed_kernels_replay_in_a_cuda_graph(self):
        n = 1 << 16
        x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
        eager, captured = torch.empty_like(x), torch.full_like(x, float("nan"))
        rows = torch.empty(64, device="cuda")
        matrix = torch.randn(64, 100, device="cuda")
        owners.MaskedAdd()(x, y, eager, n, 1.5)
        before = zerojit.monitor.counters()["tests.triton.masked_add"]["compiles"]
        graph = torch.cuda.CUDAGraph()
        stream = torch.cuda.Stream()
        with torch.cuda.stream(stream):
            owners.MaskedAdd()(x, y, captured, n, 1.5)  # outside capture: the memo learns it
            owners.RowSum()(matrix, rows, 100, 100)
            with torch.cuda.graph(graph, stream=stream):
                owners.MaskedAdd()(x, y, captured, n, 1.5)
                owners.RowSum()(matrix, rows, 100, 100)
        captured.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        self.assertTrue(torch.equal(eager, captured))
        self.assertEqual(zerojit.monitor.counters()["tests.triton.masked_add"]["compiles"], before)


@unittest.skipIf(REASON, REASON)
class Subprocesses(unittest.TestCase):
    """Monitor, guard and packs, each in a process of its own."""

    def run_python(self, code, env=None):
        environment = dict(os.environ)
        environment["PYTHONPATH"] = os.pathsep.join(
            [TESTS, *[p for p in environment.get("PYTHONPATH", "").split(os.pathsep) if p]]
        )
        environment.update(env or {})
        done = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(code)],
            capture_output=True,
            text=True,
            timeout=900,
            env=environment,
        )
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        return json.loads(done.stdout.strip().splitlines()[-1])

    def test_an_unwarmed_class_is_refused_in_error_mode_and_during_capture(self):
        result = self.run_python("""
            import json, torch, zerojit, triton_test_owners as owners
            space = owners.MaskedAdd().warmup_space()
            f32 = zerojit.Space(lambda p: {"x_ptr": zerojit.TensorDesc.contiguous("f32", (1000,)),
                                           "n": 1000})
            zerojit.register(owners.MaskedAdd, f32)
            zerojit.warmup_kernels(monitor="error")
            x = torch.randn(1000, device="cuda", dtype=torch.float16)
            out = {}
            try:
                owners.MaskedAdd()(x, x, torch.empty_like(x), 1000, 1.0)
                out["eager"] = None
            except zerojit.RuntimeJitError as error:
                out["eager"] = str(error)
            zerojit.monitor.set_mode("off")  # capture refuses in every mode
            graph = torch.cuda.CUDAGraph()
            try:
                with torch.cuda.graph(graph):
                    owners.MaskedAdd()(x, x, torch.empty_like(x), 1000, 1.0)
                out["capture"] = None
            except zerojit.RuntimeJitError as error:
                out["capture"] = str(error)
            print(json.dumps(out))
        """)
        self.assertIn("tests.triton.masked_add", result["eager"])
        self.assertIn("dtype=f16", result["eager"])
        self.assertIn("capturing", result["capture"])

    def test_the_guard_refuses_a_foreign_compile_after_warmup_and_a_load_during_capture(self):
        result = self.run_python("""
            import json, torch, triton, zerojit
            import triton_test_kernels as kernels, triton_test_owners as owners
            x = torch.randn(8, 100, device="cuda")
            rows = torch.empty(8, device="cuda")
            # Compiled (not loaded) before warmup: its first launch will load its module.
            kernels.row_sum.warmup(x, rows, 100, 100, BLOCK_COLS=256, grid=(8,))
            zerojit.register(owners.PdlScale)
            zerojit.warmup_kernels(monitor="error")
            out = {}
            try:
                kernels.row_sum[(8,)](x, rows, 100, 100, BLOCK_COLS=128)  # a new specialization
                out["compile"] = None
            except zerojit.RuntimeJitError as error:
                out["compile"] = str(error)
            zerojit.monitor.set_mode("warn")
            graph = torch.cuda.CUDAGraph()
            try:
                with torch.cuda.graph(graph):
                    kernels.row_sum[(8,)](x, rows, 100, 100, BLOCK_COLS=256)
                out["capture"] = None
            except Exception as error:
                out["capture"] = f"{type(error).__name__}: {error}"
            out["counters"] = zerojit.monitor.counters()["triton.foreign"]
            print(json.dumps(out))
        """)
        self.assertIn("row_sum", result["compile"])
        self.assertIn("capturing", result["capture"])
        self.assertIn("RuntimeJitError", result["capture"])
        self.assertGreaterEqual(result["counters"]["runtime_jit"], 1)

    def test_a_pack_serves_a_process_where_triton_cannot_be_imported(self):
        with tempfile.TemporaryDirectory() as pack:
            built = self.run_python(f"""
                import json, zerojit, triton_test_owners as owners
                owners.register_all()
                report = zerojit.warmup_kernels(cache_dir={pack!r}, compile_only=True,
                                                arch="sm_90a")
                print(json.dumps(report["totals"]))
            """)
            self.assertEqual(built["failed"], 0)
            served = self.run_python(f"""
                import json, sys
                sys.modules["triton"] = None  # as if not installed: find_spec gives None
                import torch, zerojit, triton_test_owners as owners
                owners.register_all()
                report = zerojit.warmup_kernels(cache_dir={pack!r}, monitor="error")
                x = torch.randn(4097, device="cuda")
                y = torch.randn(4097, device="cuda")
                out = torch.full_like(x, float("nan"))
                owners.MaskedAdd()(x, y, out, 4097, 0.25)
                expected = x.double() + y.double() * 0.25
                error = ((out.double() - expected).abs().max() / expected.abs().max()).item()
                compiles = sum(c["compiles"] for n, c in zerojit.monitor.counters().items()
                               if n.startswith("tests.triton."))
                print(json.dumps({{"totals": report["totals"], "error": error,
                                  "compiles": compiles,
                                  "triton": sys.modules.get("triton") is not None}}))
            """)
        self.assertEqual(served["totals"]["from_disk"], served["totals"]["keys"])
        self.assertEqual(served["compiles"], 0)
        self.assertLess(served["error"], 1e-6)
        self.assertFalse(served["triton"])


if __name__ == "__main__":
    unittest.main()
