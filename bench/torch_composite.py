#!/usr/bin/env python3
"""The DSv4 kernels' math as PyTorch eager composites: the second column of the bandwidth
benchmark (bench/kernels/ and bench/dsv4/ are the first; bench/plot_bandwidth.py draws both).

Each composite is a faithful, straightforward eager implementation of one kernel of the spec
(interleaved RoPE, bf16 rounding, e4m3 codes with power-of-two scales through
torch.float8_e4m3fn, MXFP4 codes by bucketize, softmax pooling over gathered state rows,
RMSNorm, the fp8_ds_mla page layout through views, gathers with index_select / advanced
indexing, DCP packing with gather and where). It is not bit-exact with zerojit's kernels (those
are checked against the CPU references elsewhere); it computes the same function.

Sizes, shapes, dtypes, metadata distributions and byte formulas are those of
bench/dsv4/*.cpp (keep the two in step); the inputs are generated here with torch. The timing
method is the same too: warm up, then per repetition a GPU spin (torch.cuda._sleep, no memory
traffic) that outlasts the host's enqueueing, a start event, one call of the composite, an end
event; median and minimum of the repetitions; inputs copied up to 16 times and rotated when a
case's bytes would fit in the L2; a 1 GiB device-to-device copy (bytes read + written) timed the
same way at the start and the end is the roofline.

The compressor composites take the list of active (boundary) tokens as an input: in serving it
is known on the host from the scheduler's metadata, and taking it avoids a device-to-host sync
(torch.nonzero) inside the timed region. They are credited with the same bytes as the kernel
all the same (which favours the composite: it skips the metadata of inactive tokens).

    python3 bench/torch_composite.py --json OUT.json [--kernels LIST] [--sizes LIST] [--repeat N]
    python3 bench/torch_composite.py --dry-run    # no GPU: every composite once on the CPU,
                                                  # at reduced sizes, with self-checks

Exit codes: 0 measured; 1 a case failed (the others are still reported); 77 no CUDA device.
"""

import argparse
import json
import statistics
import sys
import time

import torch

# The seeded inputs of each kernel and size.
from torch_composite_inputs import *  # noqa: F401,F403

# The shapes, constants and composites (one function per kernel).
from torch_composite_ops import *  # noqa: F401,F403

# --- timing ---------------------------------------------------------------------------------


def measure(calls, repetitions, clock_hz):
    """Median and minimum microseconds of one call, after warmup, rotating among `calls`."""
    for call in calls:
        call()
    torch.cuda.synchronize()
    probe = 4
    start = time.perf_counter()
    for i in range(probe):
        calls[i % len(calls)]()
    host_us = (time.perf_counter() - start) / probe * 1e6
    torch.cuda.synchronize()
    cycles = int(max(20.0, 3.0 * host_us + 10.0) * clock_hz / 1e6)
    sleep = getattr(torch.cuda, "_sleep", None)
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(repetitions)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(repetitions)]
    for r in range(repetitions):
        if sleep is not None:
            sleep(cycles)
        starts[r].record()
        calls[r % len(calls)]()
        ends[r].record()
    torch.cuda.synchronize()
    times = sorted(s.elapsed_time(e) * 1e3 for s, e in zip(starts, ends))
    return statistics.median(times), times[0]


def input_sets_for(l2_bytes, case_bytes, allocated):
    wanted = -(-COLD_FOOTPRINT_IN_L2S * l2_bytes // max(case_bytes, 1))
    affordable = max(1, MAX_SET_BYTES // max(allocated, 1))
    return max(1, min(wanted, affordable, MAX_INPUT_SETS))


def select(option, known, what):
    if option in ("", "all"):
        return list(known)
    chosen = [item for item in option.split(",") if item]
    for item in chosen:
        if item not in known:
            sys.exit(f"torch_composite.py: unknown {what} '{item}' (known: {', '.join(known)})")
    return [name for name in known if name in chosen]


def measure_case(kernel, size, device, l2_bytes, clock_hz, args):
    started = time.perf_counter()
    b = Builder(device, seed_of(kernel, size), 1)
    inp, meta = make_case(b, kernel, size)
    torch.cuda.synchronize()
    sets = [inp]
    for _ in range(1, input_sets_for(l2_bytes, meta["bytes"], allocated_bytes(inp))):
        sets.append(replicate(inp))
    built = time.perf_counter() - started
    composite = COMPOSITES[kernel]
    calls = [(lambda s=s: composite(s)) for s in sets]
    median_us, min_us = measure(calls, args.repeat, clock_hz)
    print(
        f"  {kernel:<16} {size:<8} built in {built:5.2f} s, {len(sets):2d} input "
        f"set(s), {median_us:9.2f} us",
        flush=True,
    )
    record = {"impl": "torch_eager", "kernel": kernel, "size": size, "tokens": meta["tokens"]}
    if "active_tokens" in meta:
        record["active_tokens"] = meta["active_tokens"]
    record.update(
        {
            "bytes": meta["bytes"],
            "median_us": median_us,
            "min_us": min_us,
            "input_sets": len(sets),
            "repetitions": args.repeat,
        }
    )
    return record


def run(args):
    if not torch.cuda.is_available():
        print(
            "torch_composite.py: no CUDA device (torch.cuda.is_available() is False); "
            "nothing measured"
        )
        return 77
    kernels = select(args.kernels, KERNELS, "kernel")
    sizes = select(args.sizes, SIZES, "size")
    wall = time.perf_counter()
    device = torch.device("cuda", 0)
    props = torch.cuda.get_device_properties(device)
    l2_bytes = getattr(props, "L2_cache_size", 0) or (50 << 20)
    clock_khz = getattr(props, "clock_rate", 0) or 2_000_000
    clock_hz = clock_khz * 1e3
    print(
        f"device: {props.name}, L2 {l2_bytes / 1e6:.0f} MB, torch {torch.__version__}, "
        f"{args.repeat} repetitions",
        flush=True,
    )

    source = torch.full((COPY_BYTES,), 0x5A, dtype=torch.uint8, device=device)
    destination = torch.empty_like(source)
    copy_bytes = 2 * COPY_BYTES
    copy_call = [lambda: destination.copy_(source)]
    copy_start = measure(copy_call, args.repeat, clock_hz)

    records = []
    failures = 0
    for kernel in kernels:
        for size in sizes:
            try:
                records.append(measure_case(kernel, size, device, l2_bytes, clock_hz, args))
            except Exception as error:  # report and go on: the other cases still count
                failures += 1
                print(
                    f"  {kernel:<16} {size:<8} FAILED: {type(error).__name__}: {error}", flush=True
                )
            torch.cuda.empty_cache()
    copy_end = measure(copy_call, args.repeat, clock_hz)
    copy_gbps = max(copy_bytes / (copy_start[0] * 1e3), copy_bytes / (copy_end[0] * 1e3))
    for record in records:
        record["gbps"] = record["bytes"] / (record["median_us"] * 1e3)
        record["copy_fraction"] = record["gbps"] / copy_gbps

    print(
        f"\n{'kernel':<16} {'size':<8} {'tokens':>8} {'active':>7} {'MB':>10} {'sets':>4} "
        f"{'median_us':>10} {'min_us':>10} {'GB/s':>8} {'copy%':>7}"
    )
    for r in records:
        print(
            f"{r['kernel']:<16} {r['size']:<8} {r['tokens']:>8} "
            f"{str(r.get('active_tokens', '-')):>7} {r['bytes'] / 1e6:>10.3f} "
            f"{r['input_sets']:>4} {r['median_us']:>10.2f} {r['min_us']:>10.2f} "
            f"{r['gbps']:>8.1f} {100 * r['copy_fraction']:>6.1f}%"
        )
    for label, (median_us, min_us) in (("start", copy_start), ("end", copy_end)):
        print(
            f"{'d2d_copy':<16} {'1GiB':<8} {'-':>8} {'-':>7} {copy_bytes / 1e6:>10.3f} "
            f"{1:>4} {median_us:>10.2f} {min_us:>10.2f} "
            f"{copy_bytes / (median_us * 1e3):>8.1f}  ({label})"
        )
    print(f"copy roofline: {copy_gbps:.1f} GB/s (the faster of the two copies)")
    if args.json:
        result = {
            "impl": "torch_eager",
            "device": props.name,
            "torch": torch.__version__,
            "l2_bytes": l2_bytes,
            "repetitions": args.repeat,
            "copy": {
                "bytes": copy_bytes,
                "median_us_start": copy_start[0],
                "median_us_end": copy_end[0],
                "gbps_start": copy_bytes / (copy_start[0] * 1e3),
                "gbps_end": copy_bytes / (copy_end[0] * 1e3),
            },
            "copy_gbps": copy_gbps,
            "records": records,
        }
        with open(args.json, "w") as file:
            json.dump(result, file, indent=2)
            file.write("\n")
        print(f"wrote {args.json}")
    print(
        f"total {time.perf_counter() - wall:.1f} s"
        + (f"; {failures} case(s) FAILED (see above)" if failures else "")
    )
    return 1 if failures else 0


# --- dry run: no GPU, reduced sizes, self-checks -------------------------------------------


def dry_run(args):
    """Runs every composite once on the CPU at reduced sizes and checks a few properties that
    a wrong layout or rounding would break. Timings are not taken."""
    device = torch.device("cpu")
    failures = []

    def check(condition, what):
        if not condition:
            failures.append(what)

    for kernel in select(args.kernels, KERNELS, "kernel"):
        for size in select(args.sizes, SIZES, "size"):
            b = Builder(device, seed_of(kernel, size), 64)
            inp, meta = make_case(b, kernel, size)
            result = COMPOSITES[kernel](inp)
            label = f"{kernel}/{size}"
            if kernel == "indexer_q_fp8":
                q_fp8, weights_out = result
                x = indexer_rope(inp).float()
                decoded = q_fp8.view(torch.float8_e4m3fn).float()
                weights = inp["weights"].float()
                usable = weights != 0  # the scale is read back from the weight fold
                fold = weights_out / torch.where(usable, weights * INDEXER_SCALE, 1.0)
                error = (decoded * fold.unsqueeze(-1) - x).abs().amax(-1)
                bound = x.abs().amax(-1) / 8 + 2.0**-126
                check(bool((error <= bound)[usable].all()), f"{label}: fp8 decode")
                check(
                    bool((fold[usable] == torch.exp2(torch.round(torch.log2(fold[usable])))).all()),
                    f"{label}: fp8 scales are powers of two",
                )
            elif kernel == "indexer_q_mxfp4":
                packed, q_scale, _ = result
                x = indexer_rope(inp).float()
                table = torch.tensor([0, 0.5, 1, 1.5, 2, 3, 4, 6])
                nib = torch.stack((packed & 15, packed >> 4), dim=-1).flatten(-2).long()
                value = table[nib & 7] * torch.where(nib >= 8, -1.0, 1.0)
                scale = torch.exp2(q_scale.float() - 127).repeat_interleave(32, dim=-1)
                error = (value * scale - x).abs()
                check(bool((error <= scale + 1e-30).all()), f"{label}: mxfp4 decode")
                check(bool((q_scale >= 1).all()), f"{label}: mxfp4 scale >= 1")
            elif kernel in ("c4_store", "c128_store"):
                # The rows written decode back (dequant-gather's math) to the normed rows.
                cache, block = inp["k_cache"], inp["cache_block"]
                data_view, scale_view = ds_mla_views(cache, block)
                kv = inp["kv_slot_mapping"].index_select(0, inp["active"])
                data = data_view[kv // block, kv % block]
                scales = scale_view[kv // block, kv % block]
                nope = data[:, :NOPE].view(torch.float8_e4m3fn).float().view(-1, 7, 64)
                nope = nope * torch.exp2(scales[:, :7].float() - 127).unsqueeze(-1)
                check(bool((scales[:, 7] == 0).all()), f"{label}: pad byte")
                check(
                    bool(torch.isfinite(nope).all()) and nope.numel() > 0, f"{label}: decoded rows"
                )
                changed = (cache != SENTINEL).sum().item()  # a code may equal the sentinel
                check(
                    0.9 * kv.numel() * 584 <= changed <= kv.numel() * 584,
                    f"{label}: bytes written outside the active rows",
                )
            elif kernel in ("c4_store_full", "c128_store_full"):
                written = (inp["k_cache"].view(torch.uint8) != SENTINEL).any(-1).sum().item()
                check(written == meta["active_tokens"], f"{label}: rows written")
            elif kernel == "c128_compress":
                rows = inp["compressed_kv"].index_select(0, inp["active"])
                check(bool(torch.isfinite(rows).all()), f"{label}: pooled rows")
                check(
                    int(torch.isnan(inp["compressed_kv"]).any(-1).sum())
                    == meta["tokens"] - meta["active_tokens"],
                    f"{label}: inactive rows untouched",
                )
            elif kernel == "dequant_gather":
                out = inp["out"]
                lens = inp["seq_lens"].tolist()
                for r, n in enumerate(lens):
                    rows = out[r].view(torch.uint8)
                    check(
                        bool((rows[:n] != SENTINEL).any(-1).all()),
                        f"{label}: request {r} rows written",
                    )
                    check(
                        bool((rows[n:] == SENTINEL).all()),
                        f"{label}: request {r} rows past L untouched",
                    )
            elif kernel == "dcp_pack":
                packed = result
                local = inp["topk_indices"]
                expected = torch.where(local >= 0, (local // 1) * 2 + 1, -1).float()
                check(torch.equal(packed[..., 1], expected), f"{label}: global ids")
                check(
                    bool(torch.isneginf(packed[..., 0][local < 0]).all()),
                    f"{label}: padding scores",
                )
            print(
                f"  {label:<26} tokens {meta['tokens']:>7} bytes {meta['bytes']:>12} ok", flush=True
            )
    for failure in failures:
        print("FAILED:", failure)
    print("dry run:", "all checks passed" if not failures else f"{len(failures)} failed")
    return 1 if failures else 0


def main():
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--json", default="", help="write the records to this JSON file")
    parser.add_argument(
        "--kernels", default="all", help="comma-separated kernels, or all: " + " ".join(KERNELS)
    )
    parser.add_argument(
        "--sizes", default="all", help="comma-separated sizes, or all: " + " ".join(SIZES)
    )
    parser.add_argument(
        "--repeat", type=int, default=50, help="timed repetitions per case (median and min)"
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="no GPU: run each composite once on the CPU at reduced sizes, "
        "with self-checks, and time nothing",
    )
    args = parser.parse_args()
    with torch.inference_mode():
        return dry_run(args) if args.dry_run else run(args)


if __name__ == "__main__":
    sys.exit(main())
