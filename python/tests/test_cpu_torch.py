"""The torch custom ops without a GPU: registration, schemas, FakeTensor mode on fake CUDA
tensors, and torch.compile(fullgraph=True) tracing every DSv4 function into torch.ops.zerojit
calls (with a backend that only records the graph: nothing launches). Also: zerojit imports
and runs its launch path without PyTorch, and ZEROJIT_NO_TORCH=1 skips the registration.

Skips without PyTorch (run it where PyTorch is installed, e.g. with CUDA_VISIBLE_DEVICES= on a
GPU host).
"""

import os
import subprocess
import sys
import unittest

try:
    import torch
except ImportError:  # pragma: no cover - depends on the machine
    torch = None

import zerojit

requires_torch = unittest.skipIf(torch is None, "needs PyTorch (not installed here)")


def fake_cuda(mode, shape, dtype):
    return mode.from_tensor(torch.empty(shape, dtype=dtype, device="meta")).to("cuda")


@requires_torch
class RegistrationTest(unittest.TestCase):
    def test_every_op_is_registered_with_its_mutated_arguments(self):
        expected_mutated = {
            "indexer_q_fp8": {"q_fp8", "weights_out"},
            "indexer_q_mxfp4": {"q_packed", "q_scale", "weights_out"},
            "dequant_gather": {"out"},
            "c4_store": {"k_cache"},
            "c128_compress": {"compressed_kv"},
            "c128_store": {"k_cache"},
            "dcp_pack": {"packed"},
        }
        self.assertEqual(set(zerojit.torch_ops.OPS), set(expected_mutated))
        for name, mutated in expected_mutated.items():
            schema = getattr(torch.ops.zerojit, name).default._schema
            written = {a.name for a in schema.arguments if a.alias_info and a.alias_info.is_write}
            self.assertEqual(written, mutated, name)
            self.assertEqual(len(schema.returns), 0, name)

    def test_fake_tensor_mode_gives_eager_shapes_without_a_gpu(self):
        from torch._subclasses.fake_tensor import FakeTensorMode

        with FakeTensorMode() as mode:

            def cuda(shape, dtype=torch.float32):
                return mode.from_tensor(torch.empty(shape, dtype=dtype, device="meta")).to("cuda")

            q = cuda((16, 64, 128), torch.bfloat16)
            q_fp8, weights = zerojit.fused_indexer_q_rope_quant(
                cuda((16,), torch.int64),
                q,
                cuda((4096, 64)),
                cuda((16, 64), torch.bfloat16),
                0.1,
                0.1,
            )
            self.assertEqual(
                (q_fp8.dtype, tuple(q_fp8.shape)), (torch.float8_e4m3fn, (16, 64, 128))
            )
            self.assertEqual(tuple(weights.shape), (16, 64))
            (packed, scales), _ = zerojit.fused_indexer_q_rope_quant(
                cuda((16,), torch.int64),
                q,
                cuda((4096, 64)),
                cuda((16, 64), torch.bfloat16),
                0.1,
                0.1,
                use_fp4=True,
            )
            self.assertEqual(tuple(packed.shape), (16, 64, 64))
            self.assertEqual((scales.dtype, tuple(scales.shape)), (torch.int32, (16, 64)))
            pairs = zerojit.pack_dcp_topk_candidates(
                cuda((4, 4096)), cuda((4, 512), torch.int32), None, 0, 2, 1
            )
            self.assertEqual(tuple(pairs.shape), (4, 512, 2))
            compressed = zerojit.sparse_attn_compress_c128(
                cuda((8, 8, 1024)),
                cuda((3,), torch.int32),
                cuda((3,), torch.int64),
                cuda((3,), torch.int64),
                cuda((1, 8), torch.int32),
                8,
            )
            self.assertEqual(tuple(compressed.shape), (3, 512))

    def test_torch_compile_traces_every_function_into_zerojit_ops(self):
        graphs = []

        def record(graph_module, example_inputs):
            # Keeps the graph and never runs it: the ops have CUDA implementations only.
            graphs.append(graph_module)
            outputs = [node for node in graph_module.graph.nodes if node.op == "output"][0]
            count = len(outputs.args[0])
            return lambda *inputs: [torch.zeros(4, 512, 2)] * count

        # CPU tensors: only the trace is wanted (the recorded graph is never run).
        def function(
            state,
            requests,
            positions,
            slots,
            table,
            weight,
            cos_sin,
            cache,
            kv_slots,
            logits,
            indices,
            q,
            weights,
            out,
            paged,
            seq_lens,
            page_table,
        ):
            zerojit.fused_indexer_q_rope_quant(positions, q, cos_sin, weights, 0.1, 0.1)
            zerojit.fused_kv_compress_norm_rope_insert_sparse_attn(
                state, requests, positions, slots, table, 4, weight, 1e-6, cos_sin, cache, kv_slots
            )
            zerojit.split_kv_compress_norm_rope_insert_sparse_attn(
                state,
                requests,
                positions,
                slots,
                table,
                8,
                None,
                weight,
                1e-6,
                cos_sin,
                cache,
                kv_slots,
            )
            zerojit.dequantize_and_gather_k_cache(out, paged, seq_lens, None, page_table, 64)
            zerojit.compress_norm_rope_store(
                state,
                4,
                requests,
                positions,
                slots,
                table,
                4,
                1024,
                cos_sin,
                cache,
                kv_slots,
                None,
                rms_norm_weight=weight,
            )
            return zerojit.pack_dcp_topk_candidates(logits, indices, None, 0, 2, 1)

        tensors = [
            torch.zeros(8, 4, 2048),
            torch.zeros(4, dtype=torch.int32),
            torch.zeros(4, dtype=torch.int64),
            torch.zeros(4, dtype=torch.int64),
            torch.zeros(1, 8, dtype=torch.int32),
            torch.ones(512, dtype=torch.bfloat16),
            torch.zeros(4096, 64),
            torch.zeros(8, 2, 512, dtype=torch.bfloat16),
            torch.zeros(4, dtype=torch.int64),
            torch.zeros(4, 4096),
            torch.zeros(4, 512, dtype=torch.int32),
            torch.zeros(4, 64, 128, dtype=torch.bfloat16),
            torch.zeros(4, 64, dtype=torch.bfloat16),
            torch.zeros(1, 64, 512, dtype=torch.bfloat16),
            torch.zeros(2, 64, 584, dtype=torch.uint8),
            torch.zeros(1, dtype=torch.int32),
            torch.zeros(1, 2, dtype=torch.int32),
        ]
        torch._dynamo.reset()
        torch.compile(function, backend=record, fullgraph=True)(*tensors)
        self.assertEqual(len(graphs), 1)
        called = [str(node.target) for node in graphs[0].graph.nodes if node.op == "call_function"]
        for op in (
            "indexer_q_fp8",
            "c4_store",
            "c128_compress",
            "c128_store",
            "dequant_gather",
            "dcp_pack",
        ):
            self.assertTrue(any(f"zerojit.{op}" in target for target in called), (op, called))


class WithoutTorchTest(unittest.TestCase):
    def run_python(self, code, **environment):
        env = dict(os.environ, **environment)
        return subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
        )

    def test_zerojit_imports_without_torch(self):
        # A None entry in sys.modules makes `import torch` fail as if it were not installed.
        result = self.run_python(
            "import sys; sys.modules['torch'] = None\n"
            "import importlib.util; importlib.util.find_spec = lambda name, *a: None\n"
            "import zerojit; print(zerojit.torch_ops is None, hasattr(zerojit._core, 'fast'))"
        )
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stdout.split(), ["True", "True"])

    @requires_torch
    def test_zerojit_no_torch_skips_the_registration(self):
        result = self.run_python(
            "import torch, zerojit\n"
            "print(zerojit.torch_ops is None, hasattr(torch.ops.zerojit, 'dcp_pack'))",
            ZEROJIT_NO_TORCH="1",
        )
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stdout.split(), ["True", "False"])
        # The library's yes words (before: only "1" counted, so "true" registered the ops).
        for yes in ("true", "Yes", "on"):
            result = self.run_python(
                "import torch, zerojit\n"
                "print(zerojit.torch_ops is None, hasattr(torch.ops.zerojit, 'dcp_pack'))",
                ZEROJIT_NO_TORCH=yes,
            )
            self.assertEqual(result.returncode, 0, result.stderr)
            self.assertEqual(result.stdout.split(), ["True", "False"], yes)


if __name__ == "__main__":
    unittest.main()
