"""The engine-style Triton kernels (triton_engine_kernels) on a GPU: every call the engine's
launcher makes through zerojit (triton_engine_launch: the meta-parameters as call options, the
owner's key from them) gives the bytes the same kernel gives launched by Triton itself with the
meta-parameters the engine's original launcher picked (`kernel[grid](..., RATIO=...)`, the
"Before" of docs/PYTHON.md, "Moving an engine's kernels: Triton"), on fresh random inputs, with
the bytes around each output checked untouched; after warmup, zerojit compiles nothing.

Needs PyTorch with a CUDA device and Triton; skips, saying why, without them."""

import os
import sys
import unittest

TESTS = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, TESTS)

import lang_support  # noqa: E402

torch, REASON = lang_support.torch_for_triton_gpu()

if not REASON:
    import triton

    import triton_engine_kernels as kernels
    import triton_engine_launch as launch
    import triton_engine_owners as owners
    import zerojit

GUARD = 64  # elements kept around every output, poisoned, checked untouched
TOKENS = (1000, 8192)  # a prefix of the cache, and the whole of it


def triton_compress(kv, out, num_tokens, config):
    """The engine's launcher before zerojit: it picks the constexprs and the grid itself."""
    prefix = kv[:num_tokens]
    n_out = num_tokens // config.compress_ratio
    rows = 4 if n_out >= 1024 else 1
    kernels.compress_kv[(triton.cdiv(n_out, rows),)](
        prefix, out, n_out, prefix.stride(0), out.stride(0), config.eps,
        RATIO=config.compress_ratio, HEAD_DIM=kv.shape[1], QUANT_FP8=config.fp8_cache, ROWS=rows,
    )  # fmt: skip


def triton_split_sum(x, partial, num_sms, scale=1.0):
    splits = num_sms if x.shape[0] >= 1 << 16 else 1
    kernels.split_sum[(splits,)](x, partial, x.shape[0], scale, SPLITS=splits)


def guarded(shape, dtype):
    """An output of `shape` inside a byte buffer whose GUARD bytes on both sides are poisoned
    too; returns (buffer, output view)."""
    count = 1
    for extent in shape:
        count *= extent
    size = count * torch.empty((), dtype=dtype).element_size()
    buffer = torch.full((size + 2 * GUARD,), 0xA5, dtype=torch.uint8, device="cuda")
    return buffer, buffer[GUARD : GUARD + size].view(dtype).view(shape)


@unittest.skipIf(REASON, REASON)
class AgainstTriton(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cache = lang_support.warm_in_process(owners)

    @classmethod
    def tearDownClass(cls):
        zerojit.clear_registrations()
        cls.cache.cleanup()

    def same(self, ours, theirs, buffers):
        torch.cuda.synchronize()
        self.assertTrue(
            torch.equal(ours.view(torch.uint8), theirs.view(torch.uint8)),
            "zerojit and Triton differ",
        )
        for buffer in buffers:
            for edge in (buffer[:GUARD], buffer[-GUARD:]):
                self.assertTrue((edge == 0xA5).all(), "a byte outside the output changed")

    def test_the_launchers_compress_calls(self):
        before = zerojit.monitor.counters()[owners.CompressKv.name]["compiles"]
        kv = torch.randn(max(TOKENS), owners.HEAD_DIM, device="cuda").to(torch.bfloat16)
        for config in launch.LAYERS:
            dtype = torch.float8_e4m3fn if config.fp8_cache else torch.bfloat16
            for tokens in TOKENS:
                shape = (tokens // config.compress_ratio, owners.HEAD_DIM)
                buffer_a, ours = guarded(shape, dtype)
                buffer_b, theirs = guarded(shape, dtype)
                launch.compress(kv, ours, tokens, config)
                triton_compress(kv, theirs, tokens, config)
                with self.subTest(config=config, tokens=tokens):
                    self.same(ours, theirs, (buffer_a, buffer_b))
        self.assertEqual(zerojit.monitor.counters()[owners.CompressKv.name]["compiles"], before)

    def test_the_launchers_split_sums(self):
        for dtype in (torch.float32, torch.bfloat16):
            for n in (1000, 1 << 20):
                x = torch.randn(n, device="cuda").to(dtype)
                for scale in (1.0, 0.5):
                    buffer_a, ours = guarded((owners.NUM_SMS,), torch.float32)
                    buffer_b, theirs = guarded((owners.NUM_SMS,), torch.float32)
                    if scale == 1.0:  # left out: the function's default
                        launch.split_sum(x, ours, owners.NUM_SMS)
                    else:
                        launch.split_sum(x, ours, owners.NUM_SMS, scale)
                    triton_split_sum(x, theirs, owners.NUM_SMS, scale)
                    with self.subTest(dtype=dtype, n=n, scale=scale):
                        self.same(ours, theirs, (buffer_a, buffer_b))


if __name__ == "__main__":
    unittest.main()
