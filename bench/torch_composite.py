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
import math
import statistics
import sys
import time

import torch

# The shapes, constants and composites (one function per kernel).
from torch_composite_ops import *  # noqa: F401,F403

# --- inputs (the distributions of tests/dsv4/support/inputs.hpp, sizes of bench/dsv4/) --------


class Builder:
    """Seeded random inputs: small metadata on the CPU, bulk values on the device."""

    def __init__(self, device, seed, shrink):
        self.device = device
        self.generator = torch.Generator(device="cpu").manual_seed(seed)
        self.device_generator = torch.Generator(device=device).manual_seed(seed + 1)
        self.shrink = shrink  # > 1: dry run, token counts divided (chunking kept)

    def randint(self, low, high, shape=()):
        """Uniform in [low, high] (inclusive), on the CPU."""
        return torch.randint(low, high + 1, shape, generator=self.generator)

    def uniform(self, low, high, shape, device=None):
        """Uniform in [low, high), on the device (or on `device`)."""
        if device is None or torch.device(device) == self.device:
            values = torch.rand(shape, generator=self.device_generator, device=self.device)
        else:
            values = torch.rand(shape, generator=self.generator)
        return low + (high - low) * values

    def levels(self, low, high, shape):
        """Integers in [low, high] as float32, on the device."""
        return torch.randint(
            low, high + 1, shape, generator=self.device_generator, device=self.device
        ).float()

    def tokens(self, count, chunk):
        if self.shrink > 1 and chunk > 0:
            count = max(chunk // 4, count // self.shrink)
            chunk = min(chunk, count)
        return count, chunk


def cos_sin_table(b, rows):
    angles = b.uniform(-math.pi, math.pi, (rows, ROPE_DIM // 2))
    return torch.cat((torch.cos(angles), torch.sin(angles)), dim=1).float().contiguous()


def indexer_inputs(b, size):
    tokens, chunk = b.tokens(
        *{"small": (32, 0), "serving": (8192, 2048), "large": (65536, 2048)}[size]
    )
    shape = (tokens, INDEX_HEADS, INDEX_HEAD_DIM)
    magnitude = torch.exp2(b.randint(-14, 8, (tokens, INDEX_HEADS, 1)).float()).to(b.device)
    q = (b.uniform(-1.0, 1.0, shape) * magnitude).to(torch.bfloat16)
    if chunk == 0:
        positions = b.randint(0, INDEXER_MAX_POSITION - 1, (tokens,))
    else:
        positions = torch.cat(
            [
                b.randint(0, INDEXER_MAX_POSITION - chunk, (1,))
                + torch.arange(min(chunk, tokens - first))
                for first in range(0, tokens, chunk)
            ]
        )
    return {
        "q": q,
        "positions": positions.to(b.device),
        "cos_sin": cos_sin_table(b, INDEXER_MAX_POSITION),
        "weights": b.uniform(-2.0, 2.0, (tokens, INDEX_HEADS)).to(torch.bfloat16),
        "e2m1_bounds": torch.tensor(E2M1_BOUNDS, device=b.device),
    }, tokens


def indexer_case(b, size, mxfp4):
    inp, tokens = indexer_inputs(b, size)
    h, d = INDEX_HEADS, INDEX_HEAD_DIM
    inputs = h * d * 2 + h * 2 + 8 + COS_SIN_ROW_BYTES
    outputs = h * d // 2 + h * d // 32 + h * 4 if mxfp4 else h * d + h * 4
    return inp, {"tokens": tokens, "bytes": tokens * (inputs + outputs)}


def dequant_gather_case(b, size):
    requests, rows = {"small": (2, 32), "serving": (2, 4096), "large": (64, 4096)}[size]
    if b.shrink > 1 and size != "small":
        rows = max(64, rows // b.shrink)
    lengths = [int(b.randint(rows - rows // 8, rows)) for _ in range(requests)]
    pages_of = [(n + GATHER_BLOCK - 1) // GATHER_BLOCK for n in lengths]
    num_pages = sum(pages_of) + 4
    page_stride = (GATHER_BLOCK * 584 + 575) // 576 * 576
    cache = torch.randint(
        0, 256, (num_pages, page_stride), dtype=torch.uint8, generator=b.generator
    ).to(b.device)
    data, scales = ds_mla_views(cache, GATHER_BLOCK)
    codes = data[:, :, :NOPE]
    codes[(codes & 0x7F) == 0x7F] ^= 1  # no NaN codes
    scales[:, :, :7] = b.randint(105, 140, scales[:, :, :7].shape).to(torch.uint8).to(b.device)
    scales[:, :, 7] = 0
    table = torch.full((requests, max(pages_of) + 2), -1, dtype=torch.int32)
    order = torch.randperm(num_pages, generator=b.generator).to(torch.int32)
    used = 0
    for r, count in enumerate(pages_of):
        table[r, :count] = order[used : used + count]
        used += count
    total = sum(lengths)
    inp = {
        "k_cache": cache,
        "block_table": table.to(b.device),
        "seq_lens": torch.tensor(lengths, dtype=torch.int32, device=b.device),
        "out": torch.full(
            (requests, max(lengths), HEAD * 2), SENTINEL, dtype=torch.uint8, device=b.device
        ).view(torch.bfloat16),
        "total_rows": total,
    }
    return inp, {
        "tokens": total,
        "bytes": total * (576 + 8 + HEAD * 2) + sum(pages_of) * 4 + requests * 4,
    }


def compressor_requests(b, tokens, chunk, ratio):
    """(first position, token count) per request: decode steps or prefill chunks."""
    if chunk == 0:
        boundaries = max(1, tokens // ratio)
        requests = []
        for r in range(tokens):
            position = int(b.randint(ratio * 2, MAX_FIRST_POSITION))
            if r < boundaries:
                position = position // ratio * ratio + ratio - 1
            requests.append((position, 1))
        return requests
    return [
        (int(b.randint(0, MAX_FIRST_POSITION)), min(chunk, tokens - first))
        for first in range(0, tokens, chunk)
    ]


def compressor_tokens(b, requests, ratio, kv_slots, drop=0.01):
    """Per-token metadata as make_compressor_tokens builds it (CPU tensors)."""
    positions = torch.cat([torch.arange(first, first + n) for first, n in requests])
    token_to_req = torch.cat(
        [torch.full((n,), r, dtype=torch.int32) for r, (_, n) in enumerate(requests)]
    )
    count = positions.numel()
    boundary = (positions + 1) % ratio == 0
    slots = torch.arange(count)
    kv = torch.where(
        b.uniform(0, 1, (count,), "cpu") < 0.5,
        b.randint(0, kv_slots - 1, (count,)),
        torch.full((count,), -1),
    )
    free = torch.randperm(kv_slots, generator=b.generator)
    kv[boundary] = free[: int(boundary.sum())]
    draw = b.uniform(0, 1, (count,), "cpu")
    slots[boundary & (draw < drop / 2)] = -1
    kv[boundary & (draw >= drop / 2) & (draw < drop)] = -1
    slots[~boundary & (draw < drop)] = -1
    return positions, token_to_req, slots, kv


def compressor_state(b, requests, block_size, width, pooled_rows):
    """State [blocks, Bs, 2*width] f32 (kv in [-2, 2), scores in [-4, 4)) and a permuted
    block table covering the rows each request's boundary tokens pool."""
    columns = []
    for first, n in requests:
        columns.append(
            (max(0, first - pooled_rows + 1) // block_size, (first + n - 1) // block_size)
        )
    used = sum(last - first + 1 for first, last in columns)
    num_blocks = used + 1
    table = torch.full((len(requests), max(last for _, last in columns) + 3), -1, dtype=torch.int32)
    order = torch.randperm(num_blocks, generator=b.generator).to(torch.int32)
    next_block = 0
    for r, (first, last) in enumerate(columns):
        table[r, first : last + 1] = order[next_block : next_block + last - first + 1]
        next_block += last - first + 1
    state = torch.empty((num_blocks, block_size, 2 * width), device=b.device)
    state[..., :width] = b.uniform(-2.0, 2.0, (num_blocks, block_size, width))
    state[..., width:] = b.uniform(-4.0, 4.0, (num_blocks, block_size, width))
    return state, table.to(b.device)


def compressor_size(b, kernel, size):
    c4 = kernel.startswith("c4")
    if size == "small":
        return (32 if c4 else 64), 0
    if size == "serving":
        return b.tokens(8192, 2048)
    if c4:
        return b.tokens(65536, 2048)
    return b.tokens(262144 if kernel.startswith("c128_store") else 131072, 4096)


def count_boundaries(requests, ratio):
    """Positions p with (p + 1) % ratio == 0 over the (first, count) chunks."""
    return sum(sum(1 for p in range(f, f + n) if (p + 1) % ratio == 0) for f, n in requests)


def k_cache(b, full, pages, block_size):
    if full:
        return torch.full(
            (pages, block_size, HEAD * 2), SENTINEL, dtype=torch.uint8, device=b.device
        ).view(torch.bfloat16)
    page_stride = (block_size * 584 + 575) // 576 * 576
    return torch.full((pages, page_stride), SENTINEL, dtype=torch.uint8, device=b.device)


def c4_case(b, size, full):
    tokens, chunk = compressor_size(b, "c4", size)
    requests = compressor_requests(b, tokens, chunk, 4)
    boundaries = count_boundaries(requests, 4)
    cache_block = 64
    pages = (boundaries + cache_block - 1) // cache_block + 2
    positions, token_to_req, slots, kv = compressor_tokens(b, requests, 4, pages * cache_block)
    active = (slots >= 0) & (kv >= 0) & ((positions + 1) % 4 == 0)
    ap = positions[active]
    first = (ap - 7).clamp_min(0)
    state_bytes = int(((ap - first + 1) * 4096).sum())
    table_bytes = int(((ap // 4 - first // 4 + 1) * 4).sum())
    n_active = int(active.sum())
    state, table = compressor_state(b, requests, 4, 1024, 8)
    row_out = FULL_BF16_ROW_BYTES if full else DS_MLA_ROW_BYTES
    inp = {
        "active": active.nonzero().squeeze(1).to(b.device),
        "positions": positions.to(b.device),
        "token_to_req": token_to_req.to(b.device),
        "slot_mapping": slots.to(b.device),
        "kv_slot_mapping": kv.to(b.device),
        "state": state,
        "state_block": 4,
        "block_table": table,
        "norm_weight": b.uniform(0.5, 1.5, (HEAD,)).to(torch.bfloat16),
        "cos_sin": cos_sin_table(b, int(positions.max()) + 1),
        "k_cache": k_cache(b, full, pages, cache_block),
        "cache_block": cache_block,
        "c4_row_offsets": torch.arange(-7, 1, device=b.device),
        "c4_halves": torch.arange(8, device=b.device) // 4,
    }
    count = positions.numel()
    return inp, {
        "tokens": count,
        "active_tokens": n_active,
        "bytes": count * 28
        + NORM_WEIGHT_BYTES
        + state_bytes
        + table_bytes
        + n_active * (COS_SIN_ROW_BYTES + row_out),
    }


def c128_compress_case(b, size):
    tokens, chunk = compressor_size(b, "c128_compress", size)
    requests = compressor_requests(b, tokens, chunk, 128)
    boundaries = count_boundaries(requests, 128)
    positions, token_to_req, slots, kv = compressor_tokens(b, requests, 128, boundaries + 1)
    active = (slots >= 0) & ((positions + 1) % 128 == 0)
    n_active = int(active.sum())
    state, table = compressor_state(b, requests, 8, 512, 128)
    count = positions.numel()
    inp = {
        "active": active.nonzero().squeeze(1).to(b.device),
        "positions": positions.to(b.device),
        "token_to_req": token_to_req.to(b.device),
        "slot_mapping": slots.to(b.device),
        "state": state,
        "state_block": 8,
        "block_table": table,
        "compressed_kv": torch.full((count, HEAD), float("nan"), device=b.device),
        "c128_row_offsets": torch.arange(-127, 1, device=b.device),
    }
    return inp, {
        "tokens": count,
        "active_tokens": n_active,
        "bytes": count * 20 + n_active * (128 * 4096 + 16 * 4 + HEAD * 4),
    }


def c128_store_case(b, size, full):
    tokens, chunk = compressor_size(b, "c128_store", size)
    requests = compressor_requests(b, tokens, chunk, 128)
    boundaries = count_boundaries(requests, 128)
    cache_block = 2
    pages = (boundaries + cache_block - 1) // cache_block + 2
    positions, _, slots, kv = compressor_tokens(b, requests, 128, pages * cache_block)
    active = (slots >= 0) & (kv >= 0) & ((positions + 1) % 128 == 0)
    n_active = int(active.sum())
    count = positions.numel()
    magnitude = torch.exp2(b.randint(-8, 8, (count, 1)).float()).to(b.device)
    row_out = FULL_BF16_ROW_BYTES if full else DS_MLA_ROW_BYTES
    inp = {
        "active": active.nonzero().squeeze(1).to(b.device),
        "positions": positions.to(b.device),
        "slot_mapping": slots.to(b.device),
        "kv_slot_mapping": kv.to(b.device),
        "compressed_kv": b.uniform(-2.0, 2.0, (count, HEAD)) * magnitude,
        "norm_weight": b.uniform(0.5, 1.5, (HEAD,)).to(torch.bfloat16),
        "cos_sin": cos_sin_table(b, int(positions.max()) + 1),
        "k_cache": k_cache(b, full, pages, cache_block),
        "cache_block": cache_block,
    }
    return inp, {
        "tokens": count,
        "active_tokens": n_active,
        "bytes": count * 24
        + NORM_WEIGHT_BYTES
        + n_active * (HEAD * 4 + COS_SIN_ROW_BYTES + row_out),
    }


def dcp_case(b, size):
    rows, width, requests = {
        "small": (32, 16384, 0),
        "serving": (8192, 8192, 4),
        "large": (65536, 2048, 2),
    }[size]
    if b.shrink > 1 and size != "small":
        rows = max(64, rows // b.shrink)
    span = width // requests if requests else width
    levels = b.levels(-16, 16, (rows, width)) * 0.25
    draw = b.uniform(0, 1, (rows, width))
    logits = torch.where(draw < 0.001, float("-inf"), levels)
    logits = torch.where((draw >= 0.001) & (draw < 0.0015), float("nan"), logits)
    # Distinct local positions in random order; 3 % of the rows have fewer than K candidates.
    order = b.uniform(0, 1, (rows, span)).argsort(dim=1)[:, : min(DCP_TOPK, span)].to(torch.int32)
    indices = torch.full((rows, DCP_TOPK), -1, dtype=torch.int32, device=b.device)
    indices[:, : order.shape[1]] = order
    short = b.uniform(0, 1, (rows,), "cpu") < 0.03
    valid_count = torch.where(
        short, b.randint(0, order.shape[1] - 1, (rows,)), torch.full((rows,), order.shape[1])
    ).to(b.device)
    indices[torch.arange(DCP_TOPK, device=b.device).unsqueeze(0) >= valid_count.unsqueeze(1)] = -1
    inp = {"logits": logits, "topk_indices": indices}
    if requests:
        inp["row_starts"] = (
            ((torch.arange(rows) * requests // rows) * span).to(torch.int32).to(b.device)
        )
    valid = int(valid_count.sum())
    return inp, {
        "tokens": rows,
        "bytes": rows * DCP_TOPK * (4 + 8) + valid * 4 + (rows * 4 if requests else 0),
    }


def make_case(b, kernel, size):
    if kernel.startswith("indexer_q"):
        return indexer_case(b, size, kernel == "indexer_q_mxfp4")
    if kernel == "dequant_gather":
        return dequant_gather_case(b, size)
    if kernel.startswith("c4_store"):
        return c4_case(b, size, kernel == "c4_store_full")
    if kernel == "c128_compress":
        return c128_compress_case(b, size)
    if kernel.startswith("c128_store"):
        return c128_store_case(b, size, kernel == "c128_store_full")
    return dcp_case(b, size)


def replicate(inp):
    return {k: (v.clone() if torch.is_tensor(v) else v) for k, v in inp.items()}


def allocated_bytes(inp):
    return sum(v.numel() * v.element_size() for v in inp.values() if torch.is_tensor(v))


def seed_of(kernel, size):
    seed = 0xC0FFEE
    for ch in kernel + size:
        seed = (seed * 131 + ord(ch)) % (1 << 63)
    return seed


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
