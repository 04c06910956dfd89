"""GPU tests of the zerojit Python package, with PyTorch: every DSv4 kernel against its CPU
reference (zerojit.reference) through torch tensors, CUDA-graph capture and replay of a warmed
kernel, the refusal of an unwarmed one during capture, and the monitor in error mode.

Without a CUDA device only the PyTorch-on-CPU tests run; without PyTorch everything skips.

Run: PYTHONPATH=<build>/python python3 -m unittest discover -v -s python/tests -p "test_gpu*.py"
"""

import os
import shutil
import sys
import tempfile
import types
import unittest

_CACHE_ROOT = tempfile.mkdtemp(prefix="zerojit-python-gpu-test-")
os.environ["ZEROJIT_CACHE_DIR"] = _CACHE_ROOT
os.environ.pop("ZEROJIT_MONITOR", None)

try:
    import torch
except ImportError:  # pragma: no cover - depends on the machine
    torch = None

import pytorch_nvrtc  # noqa: E402,F401  (before zerojit)
import zerojit  # noqa: E402

HAVE_CUDA = torch is not None and torch.cuda.is_available()
requires_torch = unittest.skipIf(torch is None, "needs PyTorch")
requires_cuda = unittest.skipUnless(HAVE_CUDA, "needs PyTorch with a CUDA device")

SOFTMAX_SCALE = 128**-0.5
HEAD_SCALE = 64**-0.5
SENTINEL = 0xA5  # vLLM's cache fill byte
DS_MLA_ROW_BYTES = 584
DS_MLA_DATA_BYTES = 576


def tearDownModule():
    shutil.rmtree(_CACHE_ROOT, ignore_errors=True)


def generator(seed):
    return torch.Generator().manual_seed(seed)


def bits(tensor):
    """The tensor's storage as integers of the same width, for bitwise comparison."""
    integer = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
    return tensor.contiguous().view(integer[tensor.element_size()])


def cos_sin_cache(max_pos, dtype, seed):
    """[max_pos, 64]: cos of 32 random angles, then their sin (as vLLM's tests build it)."""
    angles = torch.rand(max_pos, 32, generator=generator(seed)) * 6.283185307179586
    return torch.cat([angles.cos(), angles.sin()], dim=1).to(dtype).contiguous()


def distinct_slots(count, capacity, seed):
    return torch.randperm(capacity, generator=generator(seed))[:count].to(torch.int64)


def ds_mla_pages(num_pages, rows, page_stride, seed):
    """A flat uint8 buffer of fp8_ds_mla pages (spec 0.4) with valid random rows: E4M3 codes
    without NaN, BF16 tails of normal values, scale exponents near 2^0 and a zero pad byte.
    Bytes past rows * 584 keep the sentinel."""
    g = generator(seed)
    flat = torch.full((num_pages * page_stride,), SENTINEL, dtype=torch.uint8)
    pages = flat.view(num_pages, page_stride)
    data = pages[:, : rows * DS_MLA_DATA_BYTES].view(num_pages, rows, DS_MLA_DATA_BYTES)
    codes = torch.randint(0, 256, (num_pages, rows, 448), generator=g, dtype=torch.uint8)
    codes[(codes & 0x7F) == 0x7F] = 0  # 0x7F / 0xFF are NaN
    data[:, :, :448] = codes
    tail = torch.randn(num_pages, rows, 64, generator=g).to(torch.bfloat16)
    data[:, :, 448:] = tail.view(torch.uint8).view(num_pages, rows, 128)
    scale_bytes = rows * DS_MLA_DATA_BYTES
    scales = pages[:, scale_bytes : scale_bytes + rows * 8].view(num_pages, rows, 8)
    scales[:, :, :7] = torch.randint(118, 136, (num_pages, rows, 7), generator=g, dtype=torch.uint8)
    scales[:, :, 7] = 0
    return flat


def as_ds_mla_cache(flat, num_pages, rows, page_stride):
    """The [num_pages, rows, 584] uint8 view the kernels take (stride(1) is not used)."""
    return flat.as_strided((num_pages, rows, DS_MLA_ROW_BYTES), (page_stride, DS_MLA_ROW_BYTES, 1))


def default_page_stride(rows):
    return (rows * DS_MLA_ROW_BYTES + 575) // 576 * 576


class KernelTestCase(unittest.TestCase):
    def setUp(self):
        zerojit.monitor.set_mode("off")
        zerojit.monitor.disarm()
        self.device = torch.device("cuda", torch.cuda.current_device())

    def cuda(self, *tensors):
        moved = tuple(t.to(self.device) if t is not None else None for t in tensors)
        return moved if len(moved) > 1 else moved[0]

    def assert_bits_equal(self, actual, expected, what):
        actual_bits, expected_bits = bits(actual.cpu()), bits(expected.cpu())
        self.assertEqual(actual_bits.shape, expected_bits.shape, what)
        if not torch.equal(actual_bits, expected_bits):
            where = (actual_bits != expected_bits).nonzero()[:5].tolist()
            self.fail(
                f"{what}: {int((actual_bits != expected_bits).sum())} elements differ, "
                f"first at {where}"
            )


@requires_torch
class TorchOnCpuTest(unittest.TestCase):
    """PyTorch tensors through DLPack without a GPU: bf16, float8 and strided tensors reach the
    references intact; CPU tensors are refused by the kernels."""

    def test_kernels_refuse_cpu_tensors(self):
        q = torch.zeros(4, 64, 128, dtype=torch.bfloat16)
        with self.assertRaises(zerojit.InvalidArgument) as raised:
            zerojit.fused_indexer_q_rope_quant(
                torch.zeros(4, dtype=torch.int64),
                q,
                torch.zeros(16, 64),
                torch.zeros(4, 64, dtype=torch.bfloat16),
                SOFTMAX_SCALE,
                HEAD_SCALE,
            )
        self.assertEqual(raised.exception.argument, "q")
        self.assertIn("must be on a CUDA device", str(raised.exception))

    def test_mxfp4_weights_are_the_scaled_bf16_weights(self):
        tokens = 3
        weights = torch.randn(tokens, 64, generator=generator(1)).to(torch.bfloat16)
        (packed, scales), weights_out = zerojit.reference.fused_indexer_q_rope_quant(
            torch.arange(tokens, dtype=torch.int64),
            torch.randn(tokens, 64, 128, generator=generator(2)).to(torch.bfloat16),
            cos_sin_cache(16, torch.float32, 3),
            weights,
            SOFTMAX_SCALE,
            HEAD_SCALE,
            use_fp4=True,
        )
        scale = torch.tensor(SOFTMAX_SCALE * HEAD_SCALE, dtype=torch.float32)
        self.assertTrue(torch.equal(bits(weights_out), bits(weights.float() * scale)))
        self.assertEqual((packed.dtype, tuple(packed.shape)), (torch.uint8, (tokens, 64, 64)))
        self.assertEqual((scales.dtype, tuple(scales.shape)), (torch.int32, (tokens, 64)))
        # Every UE8M0 exponent is >= 1 (the amax floor keeps the scale normal).
        self.assertTrue(bool((scales.view(torch.uint8) >= 1).all()))

    def test_fp8_output_is_float8(self):
        q_fp8, weights_out = zerojit.reference.fused_indexer_q_rope_quant(
            torch.zeros(2, dtype=torch.int64),
            torch.zeros(2, 64, 128, dtype=torch.bfloat16),
            cos_sin_cache(4, torch.bfloat16, 4),
            torch.ones(2, 64, dtype=torch.bfloat16),
            SOFTMAX_SCALE,
            HEAD_SCALE,
        )
        self.assertEqual(q_fp8.dtype, torch.float8_e4m3fn)
        # Zeros, signed as the rotation leaves them (0 * c - 0 * s can be -0).
        self.assertTrue(bool(((q_fp8.view(torch.uint8) & 0x7F) == 0).all()))
        # An all-zero row takes the 1e-4 amax floor: scale 2^-22, folded into the weights.
        expected = torch.tensor(SOFTMAX_SCALE * HEAD_SCALE, dtype=torch.float32) * 2.0**-22
        self.assertTrue(torch.equal(weights_out, expected.expand(2, 64)))

    def test_dequant_gather_reference_on_a_hand_built_page(self):
        rows, stride = 2, default_page_stride(2)
        flat = torch.full((stride,), SENTINEL, dtype=torch.uint8)
        data = flat[: rows * DS_MLA_DATA_BYTES].view(rows, DS_MLA_DATA_BYTES)
        data[:, :448] = 0x38  # E4M3 1.0
        data[:, 448:] = torch.full((rows, 64), 0.5, dtype=torch.bfloat16).view(torch.uint8)
        scales = flat[rows * DS_MLA_DATA_BYTES : rows * DS_MLA_ROW_BYTES].view(rows, 8)
        scales[:, :7] = 128  # 2^1
        scales[:, 7] = 0
        out = torch.zeros(1, 4, 512, dtype=torch.bfloat16)
        zerojit.reference.dequantize_and_gather_k_cache(
            out,
            as_ds_mla_cache(flat, 1, rows, stride),
            torch.tensor([2], dtype=torch.int32),
            None,
            torch.zeros(1, 1, dtype=torch.int32),
            rows,
            1,
        )
        self.assertTrue(bool((out[0, 1:3, :448] == 2.0).all()))
        self.assertTrue(bool((out[0, 1:3, 448:] == 0.5).all()))
        self.assertTrue(bool((out[0, 0] == 0).all()) and bool((out[0, 3] == 0).all()))

    def test_dcp_pack_reference_writes_strided_outputs(self):
        logits = torch.arange(10, dtype=torch.float32).view(1, 10)
        indices = torch.full((1, 512), -1, dtype=torch.int32)
        indices[0, 5] = 4
        base = torch.zeros(1, 512, 3)
        zerojit.reference.pack_dcp_topk_candidates(logits, indices, base[..., 1:], 0, 2, 2)
        # Rank 0 of 2, interleave 2: local 4 -> (4 // 2) * 4 + 0 * 2 + 4 % 2 = 8.
        self.assertEqual(base[0, 5].tolist(), [0.0, 4.0, 8.0])
        self.assertEqual(base[0, 0].tolist(), [0.0, -float("inf"), -1.0])


@requires_cuda
class IndexerQTest(KernelTestCase):
    def inputs(self, tokens, cos_sin_dtype, seed):
        g = generator(seed)
        positions = torch.randint(0, 4096, (tokens,), generator=g, dtype=torch.int64)
        q = torch.randn(tokens, 64, 128, generator=g).to(torch.bfloat16)
        # Powers of two and their neighbours hit the scale and E2M1 rounding ties.
        ties = torch.tensor([0.25, 0.75, 1.25, 2.5, 5.0, 6.0, -3.0, 448.0])
        q[:, :, :8] = ties.to(torch.bfloat16)
        weights = torch.randn(tokens, 64, generator=g).to(torch.bfloat16)
        return positions, q, cos_sin_cache(4096, cos_sin_dtype, seed + 1), weights

    def test_fp8_matches_the_reference_bit_for_bit(self):
        # 7 and 33 tokens dispatch coarsen 1, 600 tokens coarsen 4; bf16 cos/sin is a key too.
        for tokens, dtype in ((7, torch.float32), (600, torch.float32), (33, torch.bfloat16)):
            with self.subTest(tokens=tokens, cos_sin=dtype):
                inputs = self.inputs(tokens, dtype, seed=tokens)
                q_fp8, weights_out = zerojit.fused_indexer_q_rope_quant(
                    *self.cuda(*inputs), SOFTMAX_SCALE, HEAD_SCALE
                )
                torch.cuda.synchronize()
                expected_q, expected_weights = zerojit.reference.fused_indexer_q_rope_quant(
                    *inputs, SOFTMAX_SCALE, HEAD_SCALE
                )
                self.assertEqual(q_fp8.dtype, torch.float8_e4m3fn)
                self.assertEqual(q_fp8.device, self.device)
                self.assertEqual(tuple(weights_out.shape), (tokens, 64))
                self.assert_bits_equal(q_fp8, expected_q, "q_fp8")
                self.assert_bits_equal(weights_out, expected_weights, "weights_out")

    def test_mxfp4_matches_the_reference_bit_for_bit(self):
        for tokens in (5, 700):
            with self.subTest(tokens=tokens):
                inputs = self.inputs(tokens, torch.float32, seed=100 + tokens)
                (packed, scales), weights_out = zerojit.fused_indexer_q_rope_quant(
                    *self.cuda(*inputs), SOFTMAX_SCALE, HEAD_SCALE, use_fp4=True
                )
                torch.cuda.synchronize()
                (expected_packed, expected_scales), expected_weights = (
                    zerojit.reference.fused_indexer_q_rope_quant(
                        *inputs, SOFTMAX_SCALE, HEAD_SCALE, use_fp4=True
                    )
                )
                self.assertEqual(tuple(packed.shape), (tokens, 64, 64))
                self.assertEqual(scales.dtype, torch.int32)  # 4 UE8M0 bytes a (token, head)
                self.assertEqual(tuple(scales.shape), (tokens, 64))
                self.assert_bits_equal(packed, expected_packed, "q_packed")
                self.assert_bits_equal(scales, expected_scales, "q_scale")
                self.assert_bits_equal(weights_out, expected_weights, "weights_out")


@requires_cuda
class DequantGatherTest(KernelTestCase):
    def run_both(self, rows, gather, offset, seed):
        num_pages, requests, max_rows = 24, 3, 700
        page_stride = default_page_stride(rows)
        g = generator(seed)
        flat = ds_mla_pages(num_pages, rows, page_stride, seed)
        seq_lens = torch.tensor([rows * 5 + 3, 1, rows * 2], dtype=torch.int32)
        blocks = (int(seq_lens.max()) + rows - 1) // rows
        table = torch.randperm(num_pages, generator=g)[: requests * blocks]
        block_table = table.view(requests, blocks).to(torch.int32).contiguous()
        gather_lens = torch.tensor([rows + 7, 1, rows], dtype=torch.int32) if gather else None
        sentinel = torch.full((requests, max_rows, 512), 0x1234, dtype=torch.int16).view(
            torch.bfloat16
        )
        out = sentinel.to(self.device)
        flat_gpu = flat.to(self.device)
        zerojit.dequantize_and_gather_k_cache(
            out,
            as_ds_mla_cache(flat_gpu, num_pages, rows, page_stride),
            *self.cuda(seq_lens, gather_lens, block_table),
            rows,
            offset,
        )
        torch.cuda.synchronize()
        expected = sentinel.clone()
        zerojit.reference.dequantize_and_gather_k_cache(
            expected,
            as_ds_mla_cache(flat, num_pages, rows, page_stride),
            seq_lens,
            gather_lens,
            block_table,
            rows,
            offset,
        )
        self.assertFalse(torch.equal(bits(expected), bits(sentinel)), "the reference wrote nothing")
        self.assert_bits_equal(out, expected, f"out (rows={rows}, gather={gather})")

    def test_matches_the_reference_bit_for_bit(self):
        self.run_both(rows=64, gather=False, offset=0, seed=1)  # a compressed cache
        self.run_both(rows=256, gather=True, offset=400, seed=2)  # the sliding window


class CompressorInputs:
    """State cache, tokens and tables of one compressor call (spec 0.5), on the CPU."""

    def __init__(self, ratio, state_block_size, positions_per_request, seed):
        g = generator(seed)
        width = 1024 if ratio == 4 else 512
        requests = len(positions_per_request)
        blocks_per_request = max(max(p) for p in positions_per_request) // state_block_size + 1
        state_blocks = requests * blocks_per_request + 3
        self.state_cache = torch.randn(state_blocks, state_block_size, 2 * width, generator=g)
        self.block_size = state_block_size
        table = torch.randperm(state_blocks, generator=g)[: requests * blocks_per_request]
        self.block_table = table.view(requests, blocks_per_request).to(torch.int32).contiguous()
        positions, token_to_req = [], []
        for request, request_positions in enumerate(positions_per_request):
            positions += list(request_positions)
            token_to_req += [request] * len(request_positions)
        self.positions = torch.tensor(positions, dtype=torch.int64)
        self.token_to_req = torch.tensor(token_to_req, dtype=torch.int32)
        tokens = len(positions)
        self.slot_mapping = torch.arange(tokens, dtype=torch.int64)
        boundary = [t for t in range(tokens) if (positions[t] + 1) % ratio == 0]
        self.slot_mapping[boundary[1]] = -1  # a boundary token without state: writes nothing
        self.boundary = [t for t in boundary if t != boundary[1]]
        self.rms_norm_weight = (1.0 + 0.1 * torch.randn(512, generator=g)).to(torch.bfloat16)
        self.cos_sin_cache = cos_sin_cache(4096, torch.float32, seed + 1)

    def kv_slots(self, capacity, seed):
        """Distinct cache slots for the boundary tokens (one left at -1), -1 elsewhere."""
        slots = torch.full((len(self.positions),), -1, dtype=torch.int64)
        chosen = distinct_slots(len(self.boundary), capacity, seed)
        for index, token in enumerate(self.boundary[1:]):
            slots[token] = chosen[index]
        return slots


@requires_cuda
class C4StoreTest(KernelTestCase):
    def setUp(self):
        super().setUp()
        # Two requests; positions below 7 have rows before the start (skipped); one request
        # resumes mid-sequence.
        self.inputs = CompressorInputs(4, 4, [range(0, 23), range(40, 61)], seed=7)

    def call(self, inputs, k_cache, kv_slots, fp8_scale, reference):
        function = (
            zerojit.reference.fused_kv_compress_norm_rope_insert_sparse_attn
            if reference
            else zerojit.fused_kv_compress_norm_rope_insert_sparse_attn
        )
        move = (lambda t: t) if reference else self.cuda
        extra = {"fp8_scale": move(fp8_scale)} if fp8_scale is not None else {}
        return function(
            move(inputs.state_cache),
            move(inputs.token_to_req),
            move(inputs.positions),
            move(inputs.slot_mapping),
            move(inputs.block_table),
            inputs.block_size,
            move(inputs.rms_norm_weight),
            1e-6,
            move(inputs.cos_sin_cache),
            k_cache,
            move(kv_slots),
            **extra,
        )

    def test_ds_mla_store_matches_the_reference(self):
        rows, pages = 64, 4
        stride = default_page_stride(rows)
        kv_slots = self.inputs.kv_slots(rows * pages, seed=8)
        flat = torch.full((pages * stride,), SENTINEL, dtype=torch.uint8)
        flat_gpu = flat.to(self.device)
        self.call(
            self.inputs,
            as_ds_mla_cache(flat_gpu, pages, rows, stride),
            kv_slots,
            None,
            reference=False,
        )
        torch.cuda.synchronize()
        written = self.call(
            self.inputs, as_ds_mla_cache(flat, pages, rows, stride), kv_slots, None, reference=True
        )
        self.assertEqual(sorted(written), sorted(int(s) for s in kv_slots if s >= 0))
        self.assertEqual(
            zerojit.reference.compare_ds_mla_rows(flat, flat_gpu.cpu(), stride, rows, written), ""
        )

    def test_full_stores_match_the_reference(self):
        rows, pages = 16, 8
        kv_slots = self.inputs.kv_slots(rows * pages, seed=9)
        for dtype, scale in ((torch.bfloat16, None), (torch.float8_e4m3fn, 0.25)):
            with self.subTest(cache=dtype):
                width = 512 * (2 if dtype == torch.bfloat16 else 1)
                cache = torch.full((pages, rows, width), SENTINEL, dtype=torch.uint8)
                cache = cache.view(dtype)
                cache_gpu = cache.to(self.device)
                fp8_scale = torch.tensor([scale], dtype=torch.float32) if scale else None
                self.call(self.inputs, cache_gpu, kv_slots, fp8_scale, reference=False)
                torch.cuda.synchronize()
                written = self.call(self.inputs, cache, kv_slots, fp8_scale, reference=True)
                self.assertEqual(len(written), len(self.inputs.boundary) - 1)
                self.assertEqual(
                    zerojit.reference.compare_full_rows(
                        cache,
                        cache_gpu.cpu(),
                        rows * width,
                        width,
                        rows,
                        written,
                        dtype != torch.bfloat16,
                    ),
                    "",
                )


@requires_cuda
class C128Test(KernelTestCase):
    def setUp(self):
        super().setUp()
        # Boundaries at positions 127, 255, 383 and 511 of the first request, 639 of the second.
        self.inputs = CompressorInputs(128, 8, [range(100, 520), range(600, 650)], seed=11)

    def compress(self, reference):
        inputs = self.inputs
        compressed = torch.full((len(inputs.positions), 512), 7.0)
        function = (
            zerojit.reference.sparse_attn_compress_c128
            if reference
            else zerojit.sparse_attn_compress_c128
        )
        move = (lambda t: t) if reference else self.cuda
        result = function(
            move(inputs.state_cache),
            move(inputs.token_to_req),
            move(inputs.positions),
            move(inputs.slot_mapping),
            move(inputs.block_table),
            8,
            move(compressed),
        )
        return result

    def store(self, compressed_kv, k_cache, kv_slots, reference, fp8_scale=None):
        inputs = self.inputs
        function = (
            zerojit.reference.sparse_attn_norm_rope_store
            if reference
            else zerojit.sparse_attn_norm_rope_store
        )
        move = (lambda t: t) if reference else self.cuda
        extra = {"fp8_scale": move(fp8_scale)} if fp8_scale is not None else {}
        return function(
            move(compressed_kv),
            move(inputs.positions),
            move(inputs.slot_mapping),
            move(inputs.rms_norm_weight),
            1e-6,
            move(inputs.cos_sin_cache),
            k_cache,
            move(kv_slots),
            **extra,
        )

    def test_compress_matches_the_reference(self):
        actual = self.compress(reference=False)
        torch.cuda.synchronize()
        expected, rows = self.compress(reference=True)
        self.assertEqual(rows, self.inputs.boundary)
        self.assertEqual(
            zerojit.reference.compare_compressed_kv(expected, actual.cpu(), 512, rows), ""
        )

    def test_stores_match_the_reference_given_the_same_pooled_rows(self):
        compressed = self.compress(reference=False)
        torch.cuda.synchronize()
        # The warmed key: B_k = 2 rows a page, page stride 1728.
        rows, pages, stride = 2, 8, 1728
        kv_slots = self.inputs.kv_slots(rows * pages, seed=12)
        flat = torch.full((pages * stride,), SENTINEL, dtype=torch.uint8)
        flat_gpu = flat.to(self.device)
        self.store(compressed, as_ds_mla_cache(flat_gpu, pages, rows, stride), kv_slots, False)
        torch.cuda.synchronize()
        written = self.store(
            compressed.cpu(), as_ds_mla_cache(flat, pages, rows, stride), kv_slots, True
        )
        self.assertEqual(len(written), len(self.inputs.boundary) - 1)
        self.assertEqual(
            zerojit.reference.compare_ds_mla_rows(flat, flat_gpu.cpu(), stride, rows, written), ""
        )
        cache = torch.full((pages, rows, 1024), SENTINEL, dtype=torch.uint8).view(torch.bfloat16)
        cache_gpu = cache.to(self.device)
        self.store(compressed, cache_gpu, kv_slots, False)
        torch.cuda.synchronize()
        written = self.store(compressed.cpu(), cache, kv_slots, True)
        self.assertEqual(
            zerojit.reference.compare_full_rows(
                cache, cache_gpu.cpu(), rows * 1024, 1024, rows, written, False
            ),
            "",
        )

    def test_the_split_call_keeps_no_reference_to_compressed_kv(self):
        # The one-call split (the launch path's c128_split) once kept a reference to the
        # compressed_kv it was given, and to the one it allocated: a leaked buffer a layer.
        inputs = self.inputs
        rows, pages, stride = 2, 8, 1728
        kv_slots = inputs.kv_slots(rows * pages, seed=14)
        cache = as_ds_mla_cache(
            torch.full((pages * stride,), SENTINEL, dtype=torch.uint8, device=self.device),
            pages,
            rows,
            stride,
        )
        compressed = torch.empty(len(inputs.positions), 512, device=self.device)
        arguments = self.cuda(
            inputs.state_cache,
            inputs.token_to_req,
            inputs.positions,
            inputs.slot_mapping,
            inputs.block_table,
        )
        before = sys.getrefcount(compressed)
        for _ in range(3):
            zerojit.split_kv_compress_norm_rope_insert_sparse_attn(
                *arguments,
                8,
                compressed,
                self.cuda(inputs.rms_norm_weight),
                1e-6,
                self.cuda(inputs.cos_sin_cache),
                cache,
                self.cuda(kv_slots),
            )
        torch.cuda.synchronize()
        self.assertEqual(sys.getrefcount(compressed), before)

    def test_the_compressor_entry_point_runs_both_stages(self):
        self.check_the_compressor_entry_point({})

    def test_the_compressor_entry_point_honours_vllms_pdl_kwargs(self):
        # Both kernels launched with programmatic dependent launch, after a producer that
        # writes the state cache the first one reads: the same rows as the reference.
        self.check_the_compressor_entry_point({"launch_pdl": True}, producer=True)

    def check_the_compressor_entry_point(self, pdl_kwargs, producer=False):
        inputs = self.inputs
        rows, pages, stride = 2, 8, 1728
        kv_slots = inputs.kv_slots(rows * pages, seed=13)
        flat = torch.full((pages * stride,), SENTINEL, dtype=torch.uint8)
        flat_gpu = flat.to(self.device)
        state_gpu = self.cuda(inputs.state_cache)
        if producer:  # poisoned on the device, then rewritten by the kernel just before
            expected = state_gpu.clone()
            state_gpu.fill_(float("nan"))
            state_gpu.copy_(expected)
        for reference in (False, True):
            move = (lambda t: t) if reference else self.cuda
            function = (
                zerojit.reference.compress_norm_rope_store
                if reference
                else zerojit.compress_norm_rope_store
            )
            result = function(
                inputs.state_cache if reference else state_gpu,
                len(inputs.positions),
                move(inputs.token_to_req),
                move(inputs.positions),
                move(inputs.slot_mapping),
                move(inputs.block_table),
                8,
                512,
                move(inputs.cos_sin_cache),
                as_ds_mla_cache(flat if reference else flat_gpu, pages, rows, stride),
                types.SimpleNamespace(slot_mapping=move(kv_slots)),
                pdl_kwargs,
                compress_ratio=128,
                overlap=False,
                rms_norm_weight=move(inputs.rms_norm_weight),
                rms_norm_eps=1e-6,
            )
            if not reference:
                self.assertIsNone(result)
                torch.cuda.synchronize()
        self.assertEqual(
            zerojit.reference.compare_ds_mla_rows(flat, flat_gpu.cpu(), stride, rows, result), ""
        )


@requires_cuda
class DcpPackTest(KernelTestCase):
    def inputs(self, seed, rows=6, columns=3000, topk=512):
        g = generator(seed)
        logits = torch.randn(rows, columns, generator=g)
        logits[0, :8] = torch.tensor(
            [float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 1.0, 1.0, 1.0]
        )
        indices = torch.randint(0, columns, (rows, topk), generator=g, dtype=torch.int32)
        indices[torch.rand(rows, topk, generator=g) < 0.2] = -1
        indices[:, -3:] = -1
        row_starts = torch.randint(0, 40, (rows,), generator=g, dtype=torch.int32)
        return logits, indices, row_starts

    def test_every_rank_matches_the_reference_bit_for_bit(self):
        logits, indices, row_starts = self.inputs(seed=21)
        for rank in range(4):
            for starts in (None, row_starts):
                with self.subTest(rank=rank, row_starts=starts is not None):
                    # A strided output, as the symmetric-memory exchange passes.
                    base = torch.zeros(6, 512, 3)
                    base_gpu = base.to(self.device)
                    result = zerojit.pack_dcp_topk_candidates(
                        *self.cuda(logits, indices),
                        base_gpu[..., :2],
                        rank,
                        4,
                        2,
                        self.cuda(starts) if starts is not None else None,
                    )
                    self.assertEqual(result.data_ptr(), base_gpu.data_ptr())
                    torch.cuda.synchronize()
                    zerojit.reference.pack_dcp_topk_candidates(
                        logits, indices, base[..., :2], rank, 4, 2, starts
                    )
                    self.assert_bits_equal(base_gpu, base, f"packed (rank {rank})")

    def test_pdl_behind_a_producer_through_the_fast_path_and_the_torch_op(self):
        # Launched with programmatic dependent launch right after a kernel that rewrites the
        # logits it reads: the reference's bits, on the launch path and through the derived op.
        logits, indices, row_starts = self.inputs(seed=23)
        expected = zerojit.reference.pack_dcp_topk_candidates(
            logits, indices, None, 1, 2, 1, row_starts
        )
        logits_gpu, indices_gpu, starts_gpu = self.cuda(logits, indices, row_starts)
        for path in ("fast", "op"):
            with self.subTest(path=path):
                logits_gpu.fill_(float("nan"))
                logits_gpu.copy_(self.cuda(logits))
                if path == "fast":
                    packed = zerojit.pack_dcp_topk_candidates(
                        logits_gpu, indices_gpu, None, 1, 2, 1, starts_gpu, pdl=True
                    )
                else:
                    packed = torch.full((6, 512, 2), float("nan"), device=self.device)
                    torch.ops.zerojit.dcp_pack(
                        logits_gpu, indices_gpu, packed, 1, 2, 1, starts_gpu, True
                    )
                torch.cuda.synchronize()
                self.assert_bits_equal(packed, expected, f"packed ({path}, pdl)")

    def test_side_streams(self):
        logits, indices, _ = self.inputs(seed=22, topk=1024)
        expected = zerojit.reference.pack_dcp_topk_candidates(logits, indices, None, 1, 2, 1)
        side = torch.cuda.Stream()
        logits_gpu, indices_gpu = self.cuda(logits, indices)
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # PyTorch's current stream
            in_context = zerojit.pack_dcp_topk_candidates(logits_gpu, indices_gpu, None, 1, 2, 1)
        explicit = zerojit.pack_dcp_topk_candidates(
            logits_gpu, indices_gpu, None, 1, 2, 1, stream=side
        )
        side.synchronize()
        self.assert_bits_equal(in_context, expected, "packed (current stream)")
        self.assert_bits_equal(explicit, expected, "packed (explicit stream)")


@requires_cuda
class WarmupAndGraphTest(KernelTestCase):
    def tearDown(self):
        zerojit.monitor.set_mode("off")
        zerojit.monitor.disarm()

    def gather_inputs(self, rows, seed):
        pages, stride = 12, default_page_stride(rows)
        flat = ds_mla_pages(pages, rows, stride, seed)
        seq_lens = torch.tensor([rows * 3 + 5, rows + 1], dtype=torch.int32)
        gather_lens = torch.tensor([rows + 2, rows], dtype=torch.int32)
        block_table = torch.randperm(pages, generator=generator(seed))[:8].view(2, 4)
        return flat, stride, pages, seq_lens, gather_lens, block_table.to(torch.int32)

    def expected_gather(self, flat, stride, pages, rows, seq_lens, gather_lens, block_table):
        out = torch.zeros(2, rows + 8, 512, dtype=torch.bfloat16)
        zerojit.reference.dequantize_and_gather_k_cache(
            out,
            as_ds_mla_cache(flat, pages, rows, stride),
            seq_lens,
            gather_lens,
            block_table,
            rows,
            0,
        )
        return out

    def test_warmed_kernel_is_captured_in_a_cuda_graph_and_replayed(self):
        report = zerojit.warmup(devices=[self.device.index], jobs=4, progress="none")
        self.assertTrue(report["ok"], report)
        self.assertEqual(report["totals"]["keys"], len(zerojit.manifest()))
        self.assertEqual(report["devices"], [self.device.index])

        rows = 256  # the warmed sliding-window key: (256, gather_lens)
        flat, stride, pages, seq_lens, gather_lens, block_table = self.gather_inputs(rows, 31)
        flat_gpu = flat.to(self.device)
        seq_gpu, gather_gpu, table_gpu = self.cuda(seq_lens, gather_lens, block_table)
        out = torch.zeros(2, rows + 8, 512, dtype=torch.bfloat16, device=self.device)
        before = zerojit.monitor.counters()["dsv4.dequant_gather"]
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            zerojit.dequantize_and_gather_k_cache(
                out,
                as_ds_mla_cache(flat_gpu, pages, rows, stride),
                seq_gpu,
                gather_gpu,
                table_gpu,
                rows,
                0,
            )
        graph.replay()
        torch.cuda.synchronize()
        self.assert_bits_equal(
            out,
            self.expected_gather(flat, stride, pages, rows, seq_lens, gather_lens, block_table),
            "replay 1",
        )
        # The graph reads live memory: new cache contents, same graph.
        fresh = ds_mla_pages(pages, rows, stride, 32)
        flat_gpu.copy_(fresh)
        out.zero_()
        graph.replay()
        torch.cuda.synchronize()
        self.assert_bits_equal(
            out,
            self.expected_gather(fresh, stride, pages, rows, seq_lens, gather_lens, block_table),
            "replay 2",
        )
        after = zerojit.monitor.counters()["dsv4.dequant_gather"]
        self.assertEqual(after["runtime_jit"], before["runtime_jit"])
        self.assertEqual(after["compiles"], before["compiles"])
        self.assertGreater(after["hits"], before["hits"])

    def test_unwarmed_kernel_during_capture_raises_runtime_jit_error(self):
        # A key no other test uses: topk 1024, 5 ranks, interleave 7.
        logits = torch.randn(3, 900, device=self.device)
        indices = torch.randint(0, 900, (3, 1024), dtype=torch.int32, device=self.device)
        graph = torch.cuda.CUDAGraph()
        with self.assertRaises(zerojit.RuntimeJitError) as raised:
            with torch.cuda.graph(graph):
                zerojit.pack_dcp_topk_candidates(logits, indices, None, 2, 5, 7)
        error = raised.exception
        self.assertIn("capturing a CUDA graph", str(error))
        self.assertEqual(error.kernel, "dsv4.dcp_pack")
        self.assertIn("topk=1024", error.key)
        self.assertIn("cp_interleave=7", error.key)
        # Outside the capture the same call compiles (the monitor is off) and is correct.
        packed = zerojit.pack_dcp_topk_candidates(logits, indices, None, 2, 5, 7)
        expected = zerojit.reference.pack_dcp_topk_candidates(
            logits.cpu(), indices.cpu(), None, 2, 5, 7
        )
        self.assert_bits_equal(packed, expected, "packed after the refused capture")

    def test_monitor_in_error_mode_refuses_unwarmed_keys(self):
        report = zerojit.warmup(devices=[self.device.index], jobs=4, monitor="error")
        self.assertTrue(report["monitor_armed"])
        zerojit.monitor.reset_events()
        rows = 16  # (16, gather_lens) is not in the default manifest
        flat, stride, pages, seq_lens, gather_lens, block_table = self.gather_inputs(rows, 41)
        out = torch.zeros(2, rows + 8, 512, dtype=torch.bfloat16, device=self.device)
        with self.assertRaises(zerojit.RuntimeJitError) as raised:
            zerojit.dequantize_and_gather_k_cache(
                out,
                as_ds_mla_cache(flat.to(self.device), pages, rows, stride),
                *self.cuda(seq_lens, gather_lens, block_table),
                rows,
                0,
            )
        self.assertIn("monitor in error mode", str(raised.exception))
        self.assertIn("block_size=16", raised.exception.key)
        events = zerojit.monitor.events()
        self.assertEqual(
            [(e["kernel"], e["kind"]) for e in events], [("dsv4.dequant_gather", "compile")]
        )
        # A warmed key still runs.
        rows = 256
        flat, stride, pages, seq_lens, gather_lens, block_table = self.gather_inputs(rows, 42)
        out = torch.zeros(2, rows + 8, 512, dtype=torch.bfloat16, device=self.device)
        zerojit.dequantize_and_gather_k_cache(
            out,
            as_ds_mla_cache(flat.to(self.device), pages, rows, stride),
            *self.cuda(seq_lens, gather_lens, block_table),
            rows,
            0,
        )
        torch.cuda.synchronize()
        self.assert_bits_equal(
            out,
            self.expected_gather(flat, stride, pages, rows, seq_lens, gather_lens, block_table),
            "warmed",
        )


if __name__ == "__main__":
    unittest.main()
