#!/usr/bin/env python3
"""Triton kernels through zerojit against Triton itself, side by side in one run (H200 host):

1. host cost per call: each of the five test kernels (python/tests/triton_test_owners.py)
   called through zerojit and launched by Triton (`kernel[grid](...)`, grid precomputed), with
   an empty PyTorch kernel launch as the floor. Method of bench/python_host_cost.py: a GPU spin
   outlasts each round, so the calls only enqueue and the loop times the host alone; rounds
   alternate between the rows; the median over rounds of the mean per call.
2. cold warmup of every key of the five kernels' spaces (26), each in a fresh process with
   empty caches: zerojit with 1 and with N compile workers, against Triton compiling the same
   specializations itself (`fn.warmup(...)`, one after another, as a process that compiles on
   first use would).
3. warm start from disk, each in a fresh process: zerojit's warmup from its disk cache (every
   key loaded on the GPU), against Triton with its warm disk cache (`fn.warmup` of each key plus
   its first launch, which loads the module and, for a new signature, builds a launcher).

    python3 bench/triton_bench.py [--rounds 7] [--calls 400] [--workers 8] [--json OUT.json]

Exit codes: 0 measured; 77 no CUDA device or no Triton.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.join(os.path.dirname(HERE), "python", "tests")
sys.path[:0] = [TESTS, HERE]


def host_cost_rows(torch, triton, zerojit, kernels, owners):
    """(name, zerojit call, Triton call) for each kernel, with its inputs made once."""
    cuda = "cuda"
    n = 4096
    x, y, out = (torch.randn(n, device=cuda) for _ in range(3))
    matrix, rows = torch.randn(64, 100, device=cuda), torch.empty(64, device=cuda)
    a = torch.randn(16, 64, device=cuda, dtype=torch.float16)
    b = torch.randn(64, 64, device=cuda, dtype=torch.float16)
    c = torch.empty(16, 64, device=cuda)
    ints = torch.empty(n, dtype=torch.int64, device=cuda)
    masked, row, tile, widths, pdl = (k() for k in owners.KERNELS)
    return [
        (
            "masked_add (3 pointers, 2 scalars)",
            lambda: masked(x, y, out, n, 0.5),
            lambda: kernels.masked_add[(16,)](x, y, out, n, 0.5, BLOCK=256, num_warps=2),
        ),
        (
            "row_sum (2 pointers, 2 ints)",
            lambda: row(matrix, rows, 100, 100),
            lambda: kernels.row_sum[(64,)](matrix, rows, 100, 100, BLOCK_COLS=128, num_warps=1),
        ),
        (
            "matmul_tile (3 pointers, 8 ints)",
            lambda: tile(a, b, c, 16, 64, 64, 64, 1, 64, 1, 64),
            lambda: kernels.matmul_tile[(1, 1)](
                a,
                b,
                c,
                16,
                64,
                64,
                64,
                1,
                64,
                1,
                64,
                BLOCK_M=64,
                BLOCK_N=64,
                BLOCK_K=32,
                num_warps=4,
                num_stages=2,
            ),
        ),
        (
            "int_widths (1 pointer, 4 ints)",
            lambda: widths(ints, 7, 3, 5, n),
            lambda: kernels.int_widths[(16,)](ints, 7, 3, 5, n, BLOCK=256, num_warps=2),
        ),
        (
            "pdl_scale (2 pointers, PDL)",
            lambda: pdl(x, out, n, 0.5),
            lambda: kernels.pdl_scale[(8,)](
                x, out, n, 0.5, BLOCK=512, num_warps=4, launch_pdl=True
            ),
        ),
    ]


def measure_host_cost(args, torch, triton, zerojit):
    import triton_test_kernels as kernels
    import triton_test_owners as owners
    from python_host_cost import spin_then_time  # the same method as the other host rows

    zerojit.clear_registrations()
    owners.register_all()
    zerojit.warmup_kernels(jobs=args.workers)
    rows = host_cost_rows(torch, triton, zerojit, kernels, owners)
    calls = {"empty torch kernel": lambda: torch.cuda._sleep(0)}
    for name, ours, theirs in rows:
        ours(), theirs()  # compiled, loaded, launcher built: outside the timing
        calls[f"zerojit {name}"] = ours
        calls[f"Triton {name}"] = theirs
    torch.cuda.synchronize()
    samples = {name: [] for name in calls}
    for _ in range(args.rounds):
        for name, call in calls.items():
            samples[name].append(spin_then_time(call, args.calls))
    return {name: statistics.median(values) for name, values in samples.items()}


def in_fresh_process(code, env):
    environment = dict(os.environ)
    environment["PYTHONPATH"] = os.pathsep.join(
        [TESTS, *[p for p in environment.get("PYTHONPATH", "").split(os.pathsep) if p]]
    )
    environment.update(env)
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=1800,
        env=environment,
    )
    if done.returncode != 0:
        raise RuntimeError(f"benchmark process failed:\n{done.stdout}\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


ZEROJIT_WARMUP = """
    import json, time, torch
    torch.cuda.init()
    start = time.perf_counter()
    import zerojit, triton_test_owners as owners
    owners.register_all()
    report = zerojit.warmup_kernels(jobs={jobs}{cache})
    torch.cuda.synchronize()
    keys = sorted(report["keys"], key=lambda k: -k["seconds"])
    print(json.dumps({{"seconds": time.perf_counter() - start, "totals": report["totals"],
                      "wall_seconds": report["wall_seconds"],
                      "key_seconds": sum(k["seconds"] for k in keys),
                      "slowest": [(k["kernel"], k["key"], k["seconds"]) for k in keys[:3]]}}))
"""

# Triton compiling (or loading from its disk cache) the same specializations, the way a process
# that compiles on first use does: fn.warmup per key (and with `launch`, its first launch).
TRITON_WARMUP = """
    import json, time, torch
    torch.cuda.init()
    start = time.perf_counter()
    import triton, zerojit, triton_test_kernels as kernels, triton_test_owners as owners
    torch_dtypes = {{"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}}
    zerojit.clear_registrations()
    owners.register_all()
    keys = zerojit.kernel_manifest()["entries"]
    launches = 0
    for entry in keys:
        kernel, key = entry["kernel"].split(".")[-1], entry["key"]
        fn = getattr(kernels, kernel)
        if kernel == "masked_add":
            t = torch.zeros(4096, dtype=torch_dtypes[key["dtype"]], device="cuda")
            args, meta = (t, t, t, 4096, 0.5), dict(BLOCK=key["block"], num_warps=key["num_warps"])
        elif kernel == "row_sum":
            cols = key["block_cols"] if key["aligned_rows"] else key["block_cols"] - 28
            t = torch.zeros(8, cols, dtype=torch_dtypes[key["dtype"]], device="cuda")
            r = torch.zeros(8, device="cuda")
            args = (t, r, cols, cols)
            meta = dict(BLOCK_COLS=key["block_cols"],
                        num_warps=4 if key["block_cols"] >= 512 else 1)
        elif kernel == "matmul_tile":
            t = torch.zeros(64, 64, dtype=torch_dtypes[key["dtype"]], device="cuda")
            c = torch.zeros(64, 64, device="cuda")
            args = (t, t, c, 64, 64, 64, 64, 1, 64, 1, 64)
            meta = dict(BLOCK_M=key["block_m"], BLOCK_N=key["block_n"], BLOCK_K=key["block_k"],
                        num_warps=key["num_warps"], num_stages=key["num_stages"])
        elif kernel == "int_widths":
            base = {{"i32": 7, "i64": 2**40, "u64": 2**63 + 5}}[key["base"]]
            t = torch.zeros(4096, dtype=torch.int64, device="cuda")
            args, meta = (t, base, 3, 5, 4096), dict(BLOCK=256, num_warps=2)
        else:
            t = torch.zeros(4096, device="cuda")
            args, meta = (t, t, 4096, 0.5), dict(BLOCK=512, num_warps=4, launch_pdl=True)
        fn.warmup(*args, grid=(1,), **meta)
        if {launch}:
            fn[(1,)](*args, **meta)
            launches += 1
    torch.cuda.synchronize()
    print(json.dumps({{"seconds": time.perf_counter() - start, "keys": len(keys),
                      "launches": launches}}))
"""


def measure_warmups(args):
    results = {}
    with tempfile.TemporaryDirectory() as scratch:
        for workers in (1, args.workers):
            cache = os.path.join(scratch, f"zerojit-{workers}")
            triton_cache = os.path.join(scratch, f"triton-for-zerojit-{workers}")
            results[f"zerojit cold, {workers} workers"] = in_fresh_process(
                ZEROJIT_WARMUP.format(jobs=workers, cache=""),
                {"ZEROJIT_CACHE_DIR": cache, "TRITON_CACHE_DIR": triton_cache},
            )
        # The same without the disk cache (nothing written, nothing synced): the compile
        # pipeline alone.
        results[f"zerojit cold, {args.workers} workers, no disk cache"] = in_fresh_process(
            ZEROJIT_WARMUP.format(jobs=args.workers, cache=", cache_dir='off'"), {}
        )
        triton_cache = os.path.join(scratch, "triton")
        results["Triton cold (fn.warmup, one process)"] = in_fresh_process(
            TRITON_WARMUP.format(launch=False), {"TRITON_CACHE_DIR": triton_cache}
        )
        cache = os.path.join(scratch, f"zerojit-{args.workers}")
        results["zerojit warm start from disk (every key loaded)"] = in_fresh_process(
            ZEROJIT_WARMUP.format(jobs=args.workers, cache=""), {"ZEROJIT_CACHE_DIR": cache}
        )
        results["Triton warm start (its disk cache, fn.warmup + first launch)"] = in_fresh_process(
            TRITON_WARMUP.format(launch=True), {"TRITON_CACHE_DIR": triton_cache}
        )
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--json")
    args = parser.parse_args()
    try:
        import torch
        import triton
    except ImportError as error:
        print(f"triton_bench: {error}", file=sys.stderr)
        return 77
    if not torch.cuda.is_available():
        print("triton_bench: no CUDA device", file=sys.stderr)
        return 77
    import zerojit

    host = measure_host_cost(args, torch, triton, zerojit)
    floor = host["empty torch kernel"]
    print(f"host cost per call (median of {args.rounds} rounds x {args.calls} calls), us:")
    print(f"  {'empty torch kernel':58s} {floor:8.2f}")
    for name, value in host.items():
        if name.startswith("zerojit "):
            theirs = host["Triton " + name[len("zerojit ") :]]
            print(
                f"  {name[8:]:40s} zerojit {value:7.2f} (+{value - floor:5.2f})  Triton "
                f"{theirs:7.2f}  ratio {value / theirs:5.3f}"
            )
    warmups = measure_warmups(args)
    print("warmup of every key of the five kernels, fresh processes (from after `import torch`):")
    for name, result in warmups.items():
        detail = ""
        if "key_seconds" in result:
            detail = (
                f"  (warmup {result['wall_seconds']:.2f} s, keys "
                f"{result['key_seconds']:.2f} s summed; slowest "
                f"{result['slowest'][0][2]:.2f} s)"
            )
        print(f"  {name:62s} {result['seconds']:8.2f} s{detail}")
    if args.json:
        with open(args.json, "w") as out:
            json.dump(
                {
                    "host_us": host,
                    "warmups": warmups,
                    "rounds": args.rounds,
                    "calls": args.calls,
                    "workers": args.workers,
                },
                out,
                indent=1,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
