"""GPU tests of the DSv4 ops as PyTorch custom ops, for every op of zerojit.dsv4:

* ``torch.compile(fullgraph=True)`` of a function calling it compiles with no graph break and
  gives the eager result bit for bit;
* FakeTensor mode runs it (output shapes and dtypes as eager's, nothing launched);
* a compiled region captured into a CUDA graph replays it correctly.

Run: PYTHONPATH=<build>/python python3 -m unittest discover -v -s python/tests -p "test_gpu*.py"
"""

import unittest

import test_gpu
from test_gpu import (
    HAVE_CUDA,
    CompressorInputs,
    as_ds_mla_cache,
    bits,
    cos_sin_cache,
    ds_mla_pages,
    generator,
    torch,
    zerojit,
)

requires_cuda = unittest.skipUnless(HAVE_CUDA, "needs PyTorch with a CUDA device")


def tearDownModule():
    test_gpu.tearDownModule()


# --- One call of each op: (name, build) with build(device) -> (function, inputs) ------------
# `function(*inputs)` returns the tensors to compare: the op's outputs, or the tensors it
# writes in place.


def indexer_inputs(device, tokens, seed):
    g = generator(seed)
    positions = torch.randint(0, 4096, (tokens,), generator=g, dtype=torch.int64)
    q = torch.randn(tokens, 64, 128, generator=g).to(torch.bfloat16)
    weights = torch.randn(tokens, 64, generator=g).to(torch.bfloat16)
    cache = cos_sin_cache(4096, torch.float32, seed + 1)
    return [t.to(device) for t in (positions, q, cache, weights)]


def indexer_fp8(device):
    def function(positions, q, cache, weights):
        return zerojit.fused_indexer_q_rope_quant(positions, q, cache, weights, 0.088, 0.125)

    return function, indexer_inputs(device, 600, seed=1)


def indexer_mxfp4(device):
    def function(positions, q, cache, weights):
        (packed, scales), weights_out = zerojit.fused_indexer_q_rope_quant(
            positions, q, cache, weights, 0.088, 0.125, use_fp4=True
        )
        return packed, scales, weights_out

    return function, indexer_inputs(device, 64, seed=2)


def indexer_fp8_into(device):
    inputs = indexer_inputs(device, 33, seed=3)
    q_fp8 = torch.empty(33, 64, 128, dtype=torch.float8_e4m3fn, device=device)
    weights_out = torch.empty(33, 64, dtype=torch.float32, device=device)

    def function(positions, q, cache, weights, q_fp8, weights_out):
        zerojit.fused_indexer_q_rope_quant_fp8(
            positions, q, cache, weights, 0.088, 0.125, q_fp8, weights_out
        )
        return q_fp8, weights_out

    return function, inputs + [q_fp8, weights_out]


def dequant_gather(device):
    rows, pages, requests = 64, 24, 3
    stride = test_gpu.default_page_stride(rows)
    flat = ds_mla_pages(pages, rows, stride, seed=4).to(device)
    seq_lens = torch.tensor([rows * 5 + 3, 1, rows * 2], dtype=torch.int32, device=device)
    table = torch.randperm(pages, generator=generator(5))[: requests * 6].view(requests, 6)
    out = torch.zeros(requests, 400, 512, dtype=torch.bfloat16, device=device)

    def function(out, flat, seq_lens, block_table):
        cache = flat.as_strided((pages, rows, 584), (stride, 584, 1))
        zerojit.dequantize_and_gather_k_cache(out, cache, seq_lens, None, block_table, rows, 0)
        return (out,)

    return function, [out, flat, seq_lens, table.to(torch.int32).contiguous().to(device)]


def compressor_case(ratio, seed, call, ds_mla_rows=None):
    """A compressor op's case (a build, as CASES holds them). Its function takes the inputs of
    test_gpu.CompressorInputs for `ratio` and a K cache of 8 pages (full bf16 rows, 2 a page; or
    with `ds_mla_rows`, fp8_ds_mla pages of that many rows, filled with 0xA5 so that what the op
    leaves shows), calls ``call(state_args, weight, cos_sin, k_cache, kv_slots)`` and returns the
    cache. ``state_args`` are what every compressor function takes first: (state, requests,
    positions, slots, table, block size); ``k_cache`` is the cache as the op takes it."""

    def build(device):
        state_block = 4 if ratio == 4 else 8
        spans = [range(0, 23), range(40, 61)] if ratio == 4 else [range(0, 130), range(250, 260)]
        inputs = CompressorInputs(ratio, state_block, spans, seed=seed)
        block_size = inputs.block_size
        if ds_mla_rows is None:
            cache = torch.zeros(8, 2, 512, dtype=torch.bfloat16, device=device)
        else:
            stride = test_gpu.default_page_stride(ds_mla_rows)
            cache = torch.full((8 * stride,), 0xA5, dtype=torch.uint8, device=device)

        def function(state, requests, positions, slots, table, weight, cos_sin, cache, kv_slots):
            if ds_mla_rows is None:
                k_cache = cache
            else:
                k_cache = as_ds_mla_cache(cache, 8, ds_mla_rows, stride)
            state_args = (state, requests, positions, slots, table, block_size)
            call(state_args, weight, cos_sin, k_cache, kv_slots)
            return (cache,)

        moved = [
            inputs.state_cache,
            inputs.token_to_req,
            inputs.positions,
            inputs.slot_mapping,
            inputs.block_table,
            inputs.rms_norm_weight,
            inputs.cos_sin_cache,
            cache,
            inputs.kv_slots(16, seed=seed + 1),
        ]
        return function, [t.to(device) for t in moved]

    return build


def c4_store(state_args, weight, cos_sin, k_cache, kv_slots):
    zerojit.fused_kv_compress_norm_rope_insert_sparse_attn(
        *state_args, weight, 1e-6, cos_sin, k_cache, kv_slots
    )


def c128_stages(state_args, weight, cos_sin, k_cache, kv_slots):
    compressed = zerojit.sparse_attn_compress_c128(*state_args)
    _, _, positions, slots, _, _ = state_args
    zerojit.sparse_attn_norm_rope_store(
        compressed, positions, slots, weight, 1e-6, cos_sin, k_cache, kv_slots
    )


def c128_split(state_args, weight, cos_sin, k_cache, kv_slots):
    zerojit.split_kv_compress_norm_rope_insert_sparse_attn(
        *state_args, None, weight, 1e-6, cos_sin, k_cache, kv_slots
    )


def compressor_entry_point(ratio):
    def call(state_args, weight, cos_sin, k_cache, kv_slots):
        state, requests, positions, slots, table, block_size = state_args
        zerojit.compress_norm_rope_store(
            state,
            len(positions),
            requests,
            positions,
            slots,
            table,
            block_size,
            1024 if ratio == 4 else 512,
            cos_sin,
            k_cache,
            kv_slots,
            None,
            compress_ratio=ratio,
            rms_norm_weight=weight,
            rms_norm_eps=1e-6,
        )

    return compressor_case(ratio, 10 + ratio, call)


def dcp_pack(device):
    g = generator(12)
    logits = torch.randn(6, 3000, generator=g)
    indices = torch.randint(-1, 3000, (6, 512), generator=g, dtype=torch.int32)
    row_starts = torch.randint(0, 40, (6,), generator=g, dtype=torch.int32)

    def function(logits, indices, row_starts):
        return (zerojit.pack_dcp_topk_candidates(logits, indices, None, 1, 4, 2, row_starts),)

    return function, [t.to(device) for t in (logits, indices, row_starts)]


CASES = [
    ("indexer_q fp8", indexer_fp8),
    ("indexer_q mxfp4", indexer_mxfp4),
    ("indexer_q fp8 into outputs", indexer_fp8_into),
    ("dequant_gather", dequant_gather),
    ("c4 store ds_mla", compressor_case(4, 6, c4_store, ds_mla_rows=1)),
    ("c4 store full", compressor_case(4, 6, c4_store)),
    ("c128 compress then store", compressor_case(128, 8, c128_stages, ds_mla_rows=2)),
    ("c128 split", compressor_case(128, 9, c128_split)),
    ("compressor entry point ratio 4", compressor_entry_point(4)),
    ("compressor entry point ratio 128", compressor_entry_point(128)),
    ("dcp pack", dcp_pack),
]


def clones(inputs):
    return [t.clone() for t in inputs]


@requires_cuda
class TorchCustomOpsTest(unittest.TestCase):
    def setUp(self):
        zerojit.monitor.set_mode("off")
        zerojit.monitor.disarm()
        torch._dynamo.reset()
        self.device = torch.device("cuda", torch.cuda.current_device())

    def assert_same_bits(self, actual, expected, what):
        self.assertEqual(len(actual), len(expected), what)
        for index, (a, e) in enumerate(zip(actual, expected)):
            self.assertEqual((a.dtype, tuple(a.shape)), (e.dtype, tuple(e.shape)), what)
            if not torch.equal(bits(a.cpu()), bits(e.cpu())):
                differ = int((bits(a.cpu()) != bits(e.cpu())).sum())
                self.fail(f"{what}: output {index}: {differ} elements differ from eager")

    def run_eagerly(self, build):
        """A case's function and inputs, and what the function returns on clones of the inputs,
        run eagerly: what every other way of running it must give."""
        function, inputs = build(self.device)
        return function, inputs, function(*clones(inputs))

    def test_every_op_compiles_with_no_graph_break_and_matches_eager(self):
        for name, build in CASES:
            with self.subTest(op=name):
                function, inputs, eager = self.run_eagerly(build)
                compiled = torch.compile(function, fullgraph=True)
                result = compiled(*clones(inputs))
                torch.cuda.synchronize()
                self.assert_same_bits(result, eager, f"{name} under torch.compile")
                explanation = torch._dynamo.explain(function)(*clones(inputs))
                self.assertEqual(explanation.graph_break_count, 0, f"{name}: graph breaks")
                ops = [
                    str(node.target)
                    for graph in explanation.graphs
                    for node in graph.graph.nodes
                    if node.op == "call_function"
                ]
                self.assertTrue(
                    any("zerojit" in op for op in ops),
                    f"{name}: no torch.ops.zerojit call in the graph: {ops}",
                )

    def test_every_op_runs_in_fake_tensor_mode(self):
        from torch._subclasses.fake_tensor import FakeTensorMode

        for name, build in CASES:
            with self.subTest(op=name):
                function, inputs, eager = self.run_eagerly(build)
                launches = zerojit.monitor.counters()
                with FakeTensorMode() as mode:
                    fake = function(*[mode.from_tensor(t) for t in inputs])
                self.assertEqual(
                    [(t.dtype, tuple(t.shape)) for t in fake],
                    [(t.dtype, tuple(t.shape)) for t in eager],
                    name,
                )
                # Nothing launched: no kernel's hit count moved.
                self.assertEqual(
                    {k: c["hits"] for k, c in zerojit.monitor.counters().items()},
                    {k: c["hits"] for k, c in launches.items()},
                    name,
                )

    def test_a_compiled_region_captured_in_a_cuda_graph_replays_every_op(self):
        for name, build in CASES:
            with self.subTest(op=name):
                function, inputs, expected = self.run_eagerly(build)
                compiled = torch.compile(function, fullgraph=True)
                static = clones(inputs)
                compiled(*clones(inputs))  # compile (and warm every key) outside the capture
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):
                    captured = compiled(*static)
                # Poison what the graph returns, then put the inputs (caches written in place
                # included) back as they were: the replay must write the eager result again.
                for tensor in captured:
                    bits(tensor).zero_()
                for tensor, original in zip(static, inputs):
                    tensor.copy_(original)
                graph.replay()
                torch.cuda.synchronize()
                self.assert_same_bits(captured, expected, f"{name} replayed from a CUDA graph")


if __name__ == "__main__":
    unittest.main()
