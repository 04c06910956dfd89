#!/usr/bin/env python3
"""Host cost of one call from Python, for every DSv4 op and the usual yardsticks, side by side
in one run (issue: "a call that costs less than the kernel").

Method: a call's host cost is the time the calling thread spends in it. To keep the device
out of the measurement, each round first launches a GPU spin (torch.cuda._sleep) that outlasts
the round, then times N back-to-back calls (outputs preallocated): the launches only enqueue
behind the spin, so the loop measures the host alone. Rounds alternate between all the calls
under test (so drift of the host hits them alike); the table gives the median over rounds of
the mean per call, and the difference to the empty torch kernel launch measured in the same
rounds.

Rows:
  * torch.cuda._sleep(0): one empty kernel launched by PyTorch (the floor a PyTorch op pays);
  * torch.addcmul(out=): a built-in op of similar arity (4 tensors);
  * a Triton kernel of 6 pointer arguments, and a CuPy RawKernel of 6, when installed;
  * zerojit's C++ hit path and the raw cuLaunchKernel of an empty kernel, timed in C++;
  * a Python kernel (zerojit.Kernel: examples/python/user_kernel.py's axpby, 3 tensors and 3
    scalars): through plan() (the slow path: Python on every call), through a pure geometry()
    (the fast path: the one C++ call path every Python-defined kernel takes), and through
    torch.ops;
  * every DSv4 op called directly (the fast path), through torch.ops.zerojit (eager), an
    empty-bodied custom op registered the same way with the same arguments, the op inside a
    torch.compile'd function, and a CUDA graph holding the op (replay).

    python3 bench/python_host_cost.py [--rounds 7] [--calls 400] [--json OUT.json]

Exit codes: 0 measured; 77 no CUDA device; 1 a row failed (the others are still reported).
"""

import argparse
import json
import statistics
import sys
import time

import torch
from torch import library as torch_library

import zerojit

CYCLES_PER_MICROSECOND = 2000  # the spin's length only needs to outlast a round


def spin_then_time(call, calls):
    torch.cuda._sleep(int(calls * 200 * CYCLES_PER_MICROSECOND))
    start = time.perf_counter()
    for _ in range(calls):
        call()
    elapsed = time.perf_counter() - start
    torch.cuda.synchronize()
    return elapsed / calls * 1e6


# --- Inputs of one call of each op (the cases) -------------------------------------


def cuda(tensor):
    return tensor.cuda()


def ds_mla_cache(pages, rows):
    stride = (rows * 584 + 575) // 576 * 576
    flat = torch.zeros(pages * stride, dtype=torch.uint8, device="cuda")
    return flat.as_strided((pages, rows, 584), (stride, 584, 1))


def indexer_fp8_case(tokens=64):
    positions = cuda(torch.arange(tokens, dtype=torch.int64))
    q = cuda(torch.randn(tokens, 64, 128).to(torch.bfloat16))
    cos_sin = cuda(torch.rand(4096, 64))
    weights = cuda(torch.randn(tokens, 64).to(torch.bfloat16))
    q_fp8 = torch.empty(tokens, 64, 128, dtype=torch.float8_e4m3fn, device="cuda")
    weights_out = torch.empty(tokens, 64, device="cuda")
    scale = 128**-0.5 * 64**-0.5
    return {
        "direct": lambda: zerojit.fused_indexer_q_rope_quant_fp8(
            positions, q, cos_sin, weights, 128**-0.5, 64**-0.5, q_fp8, weights_out
        ),
        "op": lambda: torch.ops.zerojit.indexer_q_fp8(
            positions, q, cos_sin, weights, scale, q_fp8, weights_out
        ),
        "args": (positions, q, cos_sin, weights, q_fp8, weights_out),
        "scalars": 1,
    }


def gather_case(requests=1, length=64):
    block = 64
    pages = requests * (length // block + 1)
    cache = ds_mla_cache(pages, block)
    seq_lens = torch.full((requests,), length, dtype=torch.int32, device="cuda")
    table = torch.arange(pages, dtype=torch.int32, device="cuda").view(requests, -1)
    out = torch.empty(requests, length, 512, dtype=torch.bfloat16, device="cuda")
    return {
        "direct": lambda: zerojit.dequantize_and_gather_k_cache(
            out, cache, seq_lens, None, table, block, 0
        ),
        "op": lambda: torch.ops.zerojit.dequant_gather(out, cache, seq_lens, None, table, block, 0),
        "args": (out, cache, seq_lens, table),
        "scalars": 2,
    }


def compressor_tensors(ratio, tokens):
    """The inputs of a compressor: those that find each token's state rows (what the compressor
    functions take first: state cache, token_to_req, positions, slot_mapping, block table),
    then the store's (norm weight, cos/sin cache, kv slots)."""
    state_rows = 4 if ratio == 4 else 8
    width = 1024 if ratio == 4 else 512
    blocks = tokens // state_rows + 2
    state = cuda(torch.randn(blocks, state_rows, 2 * width))
    requests = torch.zeros(tokens, dtype=torch.int32, device="cuda")
    positions = torch.arange(tokens, dtype=torch.int64, device="cuda")
    slots = torch.arange(tokens, dtype=torch.int64, device="cuda")
    table = torch.arange(blocks, dtype=torch.int32, device="cuda").view(1, -1)
    weight = torch.ones(512, dtype=torch.bfloat16, device="cuda")
    cos_sin = cuda(torch.rand(65536, 64))
    kv_slots = torch.arange(tokens, dtype=torch.int64, device="cuda")
    return (state, requests, positions, slots, table), (weight, cos_sin, kv_slots)


# A store op takes the Python function's arguments, then the K cache's geometry and layout
# restated (kv_cache_block_size, kv_block_stride, fp8_scale, store_full_kv, store_full_fp8):
# None here, taken from the cache.
UNSTATED_CACHE_LAYOUT = (None,) * 5


def tensors_of(arguments):
    """The tensors among a call's arguments, in order: what the empty custom op takes."""
    return tuple(argument for argument in arguments if isinstance(argument, torch.Tensor))


# The argument tuples below are made once, outside the timed calls.


def c4_case(tokens=8):
    state_args, (weight, cos_sin, kv_slots) = compressor_tensors(4, tokens)
    cache = ds_mla_cache(tokens // 64 + 2, 64)
    direct = (*state_args, 4, weight, 1e-6, cos_sin, cache, kv_slots)
    op = direct + UNSTATED_CACHE_LAYOUT
    return {
        "direct": lambda: zerojit.fused_kv_compress_norm_rope_insert_sparse_attn(*direct),
        "op": lambda: torch.ops.zerojit.c4_store(*op),
        "args": tensors_of(direct),
        "scalars": 6,
    }


def c128_split_case(tokens=256):
    state_args, (weight, cos_sin, kv_slots) = compressor_tensors(128, tokens)
    _, _, positions, slots, _ = state_args
    cache = ds_mla_cache(tokens // 128 // 2 + 2, 2)
    compressed = torch.empty(tokens, 512, device="cuda")
    # The split function takes the compress op's arguments, then the store op's after its
    # compressed_kv, positions and slot_mapping.
    compress = (*state_args, 8, compressed)
    store = (weight, 1e-6, cos_sin, cache, kv_slots)
    split = compress + store
    store_op = (compressed, positions, slots, *store, *UNSTATED_CACHE_LAYOUT)
    return {
        "direct": lambda: zerojit.split_kv_compress_norm_rope_insert_sparse_attn(*split),
        "op": lambda: (
            torch.ops.zerojit.c128_compress(*compress),
            torch.ops.zerojit.c128_store(*store_op),
        ),
        "args": tensors_of(split),
        "scalars": 4,  # per launch, about: the compress op takes 1, the store op 6
        "launches": 2,
    }


def dcp_case(rows=16):
    logits = cuda(torch.randn(rows, 4096))
    indices = torch.randint(-1, 4096, (rows, 512), dtype=torch.int32, device="cuda")
    packed = torch.empty(rows, 512, 2, device="cuda")
    return {
        "direct": lambda: zerojit.pack_dcp_topk_candidates(logits, indices, packed, 1, 2, 1),
        # By name: the op's argument order follows the Python function's since the arguments
        # are declared once (row_starts moved), and this runs against both revisions.
        "op": lambda: torch.ops.zerojit.dcp_pack(
            logits=logits,
            topk_indices=indices,
            row_starts=None,
            packed=packed,
            dcp_rank=1,
            dcp_world_size=2,
            cp_interleave=1,
        ),
        "args": (logits, indices, packed),
        "scalars": 3,
    }


CASES = {
    "indexer FP8, T = 64 (6 tensors)": indexer_fp8_case,
    "dequant-gather R = 1, L = 64 (4 tensors)": gather_case,
    "C4 store T = 8 (9 tensors)": c4_case,
    "C128 split T = 256 (2 launches)": c128_split_case,
    "DCP pack R = 16 (3 tensors)": dcp_case,
}


# --- Yardsticks --------------------------------------------------------------------------


_EMPTY_OPS = torch_library.Library("zerojit_bench", "FRAGMENT")


def empty_custom_op(tensors, scalars):
    """A custom op with an empty body, registered like zerojit's (Library.define + impl for
    CUDA + a fake): the dispatcher's own cost for that many arguments."""
    name = f"empty_{tensors}_{scalars}"
    if not hasattr(torch.ops.zerojit_bench, name):
        arguments = [f"Tensor t{i}" for i in range(tensors - 1)] + ["Tensor(a!) out"]
        arguments += [f"float s{i}" for i in range(scalars)]
        _EMPTY_OPS.define(f"{name}({', '.join(arguments)}) -> ()")
        _EMPTY_OPS.impl(name, lambda *args: None, "CUDA")
        torch_library.register_fake(f"zerojit_bench::{name}", lambda *args: None, lib=_EMPTY_OPS)
    op = getattr(torch.ops.zerojit_bench, name)
    return op


def triton_call():
    try:
        import triton
        import triton.language as tl
    except ImportError:
        return None

    @triton.jit
    def six(a, b, c, d, e, f, n, BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(f + i, tl.load(a + i, mask=i < n), mask=i < n)

    tensors = [torch.zeros(64, device="cuda") for _ in range(6)]
    six[(1,)](*tensors, 64, BLOCK=64)
    return lambda: six[(1,)](*tensors, 64, BLOCK=64)


def cupy_call():
    try:
        import cupy
    except ImportError:
        return None
    kernel = cupy.RawKernel(
        r'extern "C" __global__ void six(const float* a, const float* b, const float* c,'
        r" const float* d, const float* e, float* f) {}",
        "six",
    )
    arrays = [cupy.zeros(64, dtype=cupy.float32) for _ in range(6)]
    kernel((1,), (32,), tuple(arrays))
    return lambda: kernel((1,), (32,), tuple(arrays))


def python_kernel_rows(rows):
    """The Python-kernel rows: examples/python/user_kernel.py's Axpby, warmed first."""
    import os

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples", "python"))
    import user_kernel

    class FastAxpby(zerojit.Kernel):
        """The same kernel on the fast path: a pure geometry, the call passes `params`."""

        name = "bench.axpby_geometry"
        Key = user_kernel.AxpbyKey
        params = user_kernel.Axpby.params
        dispatch = user_kernel.Axpby.dispatch
        program = user_kernel.Axpby.program
        warmup_space = user_kernel.Axpby.warmup_space

        def geometry(self, key, n):
            per_block = user_kernel.THREADS * key.vector_width
            return zerojit.Geometry((n + per_block - 1) // per_block, user_kernel.THREADS)

    kernel, fast = user_kernel.Axpby(), FastAxpby()
    for each in (kernel, fast):
        zerojit.register(each)
    zerojit.warmup_kernels([kernel, fast], devices=[torch.cuda.current_device()])
    x, y, out = (torch.zeros(4096, device="cuda") for _ in range(3))
    kernel(x, y, out, 2.0, 0.5)
    fast(x, y, out, 2.0, 0.5, 4096)

    @zerojit.torch_op("zerojit_bench::axpby", mutates_args=("out",))
    def axpby(
        x: torch.Tensor, y: torch.Tensor, out: torch.Tensor, alpha: float, beta: float
    ) -> None:
        kernel(x, y, out, alpha, beta)

    rows["Python kernel (axpby): kernel(x, y, out, a, b)"] = lambda: kernel(x, y, out, 2.0, 0.5)
    rows["Python kernel (axpby): geometry(), the fast path"] = lambda: fast(
        x, y, out, 2.0, 0.5, 4096
    )
    rows["Python kernel (axpby): torch.ops (eager)"] = lambda: axpby.op(x, y, out, 2.0, 0.5)
    rows["Python kernel (axpby): CUDA graph replay"] = graph_replay(
        lambda: kernel(x, y, out, 2.0, 0.5)
    )


def graph_replay(call):
    call()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        call()
    graph.replay()
    return graph.replay


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--json", help="write every row's figures here")
    options = parser.parse_args()
    if not torch.cuda.is_available():
        print("python_host_cost: no CUDA device", file=sys.stderr)
        return 77
    torch.cuda.init()
    stream = torch.cuda.current_stream().cuda_stream
    device = torch.cuda.current_device()

    rows = {}  # label -> callable returning microseconds per call for `calls`
    empty = torch.zeros(1, device="cuda")
    a, b, c, d = (torch.zeros(64, device="cuda") for _ in range(4))
    rows["torch.cuda._sleep(0): empty PyTorch kernel"] = lambda: torch.cuda._sleep(0)
    rows["torch.addcmul(out=), 4 tensors"] = lambda: torch.addcmul(a, b, c, out=d)
    if (call := triton_call()) is not None:
        rows["Triton kernel, 6 pointers"] = call
    if (call := cupy_call()) is not None:
        rows["CuPy RawKernel, 6 pointers"] = call
    c_rows = {
        "zerojit C++ hit path (empty kernel)": "zerojit",
        "raw cuLaunchKernel (empty kernel)": "driver",
    }
    del empty

    failures = []
    try:
        python_kernel_rows(rows)
    except Exception as error:  # reported, the other rows still run
        failures.append(f"Python kernel: {type(error).__name__}: {error}")
    for label, build in CASES.items():
        try:
            case = build()
            case["direct"]()  # compile and load (runtime JIT, monitor off)
            case["op"]()
            torch.cuda.synchronize()
            tensors = len(case["args"])
            empty_op = empty_custom_op(tensors, case["scalars"])
            empty_args = list(case["args"]) + [0.5] * case["scalars"]
            rows[f"{label}: zerojit direct"] = case["direct"]
            rows[f"{label}: torch.ops.zerojit (eager)"] = case["op"]
            rows[f"{label}: empty custom op, same arguments"] = (
                lambda op=empty_op, args=empty_args, n=case.get("launches", 1): [
                    op(*args) for _ in range(n)
                ]
            )
            compiled = torch.compile(case["direct"], fullgraph=True)
            compiled()
            rows[f"{label}: inside torch.compile"] = compiled
            rows[f"{label}: CUDA graph replay"] = graph_replay(case["direct"])
        except Exception as error:  # reported, the other rows still run
            failures.append(f"{label}: {type(error).__name__}: {error}")

    samples = {label: [] for label in list(rows) + list(c_rows)}
    for _ in range(options.rounds):
        for label, call in rows.items():
            samples[label].append(spin_then_time(call, options.calls))
        for label, through in c_rows.items():
            torch.cuda._sleep(int(options.calls * 200 * CYCLES_PER_MICROSECOND))
            seconds = zerojit._core.benchmark.launch_loop(through, options.calls, stream, device)
            torch.cuda.synchronize()
            samples[label].append(seconds * 1e6)

    floor = statistics.median(samples["torch.cuda._sleep(0): empty PyTorch kernel"])
    print(
        f"host microseconds per call, median of {options.rounds} rounds of "
        f"{options.calls} calls; GPU: {torch.cuda.get_device_name()}"
    )
    print(f"{'call':<78} {'us':>8} {'vs empty':>9}")
    report = {}
    for label, values in samples.items():
        median = statistics.median(values)
        report[label] = {"median_us": median, "min_us": min(values), "rounds": values}
        print(f"{label:<78} {median:8.2f} {median - floor:+9.2f}")
    for failure in failures:
        print(f"FAILED {failure}", file=sys.stderr)
    if options.json:
        with open(options.json, "w") as out:
            json.dump({"rows": report, "failures": failures, "calls": options.calls}, out, indent=1)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
