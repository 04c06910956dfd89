"""The inputs of the PyTorch composites (bench/torch_composite.py): seeded random tensors with the
distributions of tests/dsv4/support/inputs.hpp at the sizes of bench/dsv4/, one case per kernel
and size."""

import math

import torch

# The shapes and constants the cases are built for.
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


def store_tokens(b, kernel, size, ratio, cache_block):
    """Tokens for a compressor that stores rows into the paged K cache (C4, the C128 store): the
    requests, the page count of a cache of `cache_block`-row pages that holds every boundary's
    row (two pages spare), and the per-token metadata on the CPU: positions, token_to_req,
    slots, kv slots, and the mask of the tokens that store a row."""
    tokens, chunk = compressor_size(b, kernel, size)
    requests = compressor_requests(b, tokens, chunk, ratio)
    pages = (count_boundaries(requests, ratio) + cache_block - 1) // cache_block + 2
    positions, token_to_req, slots, kv = compressor_tokens(b, requests, ratio, pages * cache_block)
    active = (slots >= 0) & (kv >= 0) & ((positions + 1) % ratio == 0)
    return requests, pages, (positions, token_to_req, slots, kv, active)


def store_inputs(b, full, tokens, pages, cache_block):
    """The inputs of the store into the K cache (C4 and the C128 store alike), `tokens` as
    store_tokens gives them. Drawn after the kernel's own inputs, as the cases always drew them
    (the same seed gives the same tensors)."""
    positions, _, slots, kv, active = tokens
    return {
        "active": active.nonzero().squeeze(1).to(b.device),
        "positions": positions.to(b.device),
        "slot_mapping": slots.to(b.device),
        "kv_slot_mapping": kv.to(b.device),
        "norm_weight": b.uniform(0.5, 1.5, (HEAD,)).to(torch.bfloat16),
        "cos_sin": cos_sin_table(b, int(positions.max()) + 1),
        "k_cache": k_cache(b, full, pages, cache_block),
        "cache_block": cache_block,
    }


def c4_case(b, size, full):
    cache_block = 64
    requests, pages, tokens = store_tokens(b, "c4", size, 4, cache_block)
    positions, token_to_req, _, _, active = tokens
    ap = positions[active]
    first = (ap - 7).clamp_min(0)
    state_bytes = int(((ap - first + 1) * 4096).sum())
    table_bytes = int(((ap // 4 - first // 4 + 1) * 4).sum())
    n_active = int(active.sum())
    state, table = compressor_state(b, requests, 4, 1024, 8)
    row_out = FULL_BF16_ROW_BYTES if full else DS_MLA_ROW_BYTES
    inp = {
        **store_inputs(b, full, tokens, pages, cache_block),
        "token_to_req": token_to_req.to(b.device),
        "state": state,
        "state_block": 4,
        "block_table": table,
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
    cache_block = 2
    _, pages, tokens = store_tokens(b, "c128_store", size, 128, cache_block)
    positions, _, _, _, active = tokens
    n_active = int(active.sum())
    count = positions.numel()
    magnitude = torch.exp2(b.randint(-8, 8, (count, 1)).float()).to(b.device)
    row_out = FULL_BF16_ROW_BYTES if full else DS_MLA_ROW_BYTES
    inp = {
        "compressed_kv": b.uniform(-2.0, 2.0, (count, HEAD)) * magnitude,
        **store_inputs(b, full, tokens, pages, cache_block),
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
