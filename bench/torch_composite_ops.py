"""The DSv4 kernels' math as PyTorch eager composites, with the shapes and constants they share
with bench/torch_composite.py (which builds the inputs and times them): one function per kernel
of the spec, written the straightforward eager way."""

import torch

from dsv4_kernels import KERNELS  # noqa: F401  (exported with the shapes to torch_composite.py)

SIZES = ["small", "serving", "large"]

# DSv4-Flash shapes (spec 0.1).
INDEX_HEADS, INDEX_HEAD_DIM, ROPE_DIM = 64, 128, 64
HEAD = 512
NOPE = HEAD - ROPE_DIM  # 448
COS_SIN_ROW_BYTES = ROPE_DIM * 4
DS_MLA_ROW_BYTES = 584
FULL_BF16_ROW_BYTES = HEAD * 2
NORM_WEIGHT_BYTES = HEAD * 2
EPS = 1e-6
INDEXER_SCALE = float(128**-0.5 * 64**-0.5)
INDEXER_MAX_POSITION = 65536
MAX_FIRST_POSITION = 60000
GATHER_BLOCK = 64
DCP_TOPK, DCP_WORLD, DCP_RANK, DCP_INTERLEAVE = 512, 2, 1, 1

COLD_FOOTPRINT_IN_L2S = 4
MAX_INPUT_SETS = 16
MAX_SET_BYTES = 16 << 30
COPY_BYTES = 1 << 30
SENTINEL = 0xA5

# E2M1 rounding boundaries between the codes 0..7 (magnitudes 0, .5, 1, 1.5, 2, 3, 4, 6).
E2M1_BOUNDS = [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0]


# --- numerics ---------------------------------------------------------------------------------


def ceil_log2(s):
    """ceil(log2 s) exactly, for positive normal float32 s (what the UE8M0 scale takes)."""
    mantissa, exponent = torch.frexp(s)  # s = mantissa * 2^exponent, mantissa in [0.5, 1)
    return exponent - (mantissa == 0.5).to(exponent.dtype)


def rope_pairs(values, cos, sin):
    """GPT-J interleaved RoPE in f32 on the last dim of `values` (pairs 2j, 2j+1)."""
    pairs = values.float().unflatten(-1, (-1, 2))
    even, odd = pairs[..., 0], pairs[..., 1]
    return torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)


def rms_norm(x, weight):
    return x * torch.rsqrt(x.square().mean(dim=-1, keepdim=True) + EPS) * weight.float()


def ds_mla_rows(y, rotated):
    """fp8_ds_mla token bytes [n, 576] and scale bytes [n, 8] of normed rows y [n, 512] f32."""
    n = y.shape[0]
    q = y[:, :NOPE].to(torch.bfloat16).float().reshape(n, NOPE // 64, 64)
    exponent = ceil_log2(q.abs().amax(dim=-1).clamp_min(1e-4) / 448.0)  # [n, 7]
    codes = (q * torch.exp2(-exponent.float()).unsqueeze(-1)).clamp(-448.0, 448.0)
    codes = codes.to(torch.float8_e4m3fn).view(torch.uint8).view(n, NOPE)
    rope_bytes = rotated.to(torch.bfloat16).view(torch.uint8)  # [n, 128], real part first
    data = torch.cat((codes, rope_bytes), dim=1)
    scales = torch.cat(
        ((exponent + 127).to(torch.uint8), torch.zeros(n, 1, dtype=torch.uint8, device=y.device)),
        dim=1,
    )
    return data, scales


def ds_mla_views(cache, block_size):
    """The token-data and scale regions of a [pages, page_stride] uint8 fp8_ds_mla cache."""
    pages = cache.shape[0]
    data = cache[:, : block_size * 576].view(pages, block_size, 576)
    scales = cache[:, block_size * 576 : block_size * 584].view(pages, block_size, 8)
    return data, scales


def store_rows(inp, y, rotated, kv_slot, full):
    """Writes normed rows y and their rotated tail into the compressed K cache."""
    block = inp["cache_block"]
    page, row = kv_slot // block, kv_slot % block
    if full:
        inp["k_cache"][page, row] = torch.cat((y[:, :NOPE], rotated), dim=1).to(torch.bfloat16)
    else:
        data, scales = ds_mla_rows(y, rotated)
        data_view, scale_view = ds_mla_views(inp["k_cache"], block)
        data_view[page, row] = data
        scale_view[page, row] = scales


# --- composites ---------------------------------------------------------------------------


def indexer_rope(inp):
    q, cs = inp["q"], inp["cos_sin"].index_select(0, inp["positions"])  # [T, 64]
    half = ROPE_DIM // 2
    cos, sin = cs[:, None, :half], cs[:, None, half:]
    nope = INDEX_HEAD_DIM - ROPE_DIM
    rotated = rope_pairs(q[..., nope:], cos, sin).to(torch.bfloat16)
    return torch.cat((q[..., :nope], rotated), dim=-1)  # bf16 [T, H, D]


def indexer_q_fp8(inp):
    x = indexer_rope(inp)
    amax = x.abs().amax(dim=-1).float().clamp_min(1e-4)  # [T, H]
    exponent = ceil_log2(amax / 448.0)
    codes = (x.float() * torch.exp2(-exponent.float()).unsqueeze(-1)).clamp(-448.0, 448.0)
    q_fp8 = codes.to(torch.float8_e4m3fn).view(torch.uint8)
    weights_out = inp["weights"].float() * INDEXER_SCALE * torch.exp2(exponent.float())
    return q_fp8, weights_out


def indexer_q_mxfp4(inp):
    x = indexer_rope(inp)
    t, h, d = x.shape
    blocks = x.float().view(t, h, d // 32, 32)
    exponent = ceil_log2(blocks.abs().amax(dim=-1).clamp_min(6 * 2.0**-126) / 6.0)
    scaled = blocks * torch.exp2(-exponent.float()).unsqueeze(-1)
    magnitude = scaled.abs()
    below = torch.bucketize(magnitude, inp["e2m1_bounds"], right=False)  # ties: lower code
    above = torch.bucketize(magnitude, inp["e2m1_bounds"], right=True)  # ties: upper code
    code = torch.where(above % 2 == 0, above, below).to(torch.uint8)  # ties to even
    nibbles = code | (torch.signbit(scaled).to(torch.uint8) << 3)
    packed = (nibbles[..., 0::2] | (nibbles[..., 1::2] << 4)).view(t, h, d // 2)
    q_scale = (exponent + 127).to(torch.uint8)
    weights_out = inp["weights"].float() * INDEXER_SCALE
    return packed, q_scale, weights_out


def dequant_gather(inp):
    cache, table, lens = inp["k_cache"], inp["block_table"], inp["seq_lens"].long()
    out = inp["out"]
    requests, max_rows = out.shape[0], out.shape[1]
    total = inp["total_rows"]  # host-known, so that repeat_interleave does not sync
    request = torch.repeat_interleave(
        torch.arange(requests, device=cache.device), lens, output_size=total
    )
    first = torch.cumsum(lens, 0) - lens
    position = torch.arange(total, device=cache.device) - first[request]  # G = L: from 0
    page = table[request, position // GATHER_BLOCK].long()
    row = position % GATHER_BLOCK
    data_view, scale_view = ds_mla_views(cache, GATHER_BLOCK)
    data = data_view[page, row]  # [N, 576]
    scales = scale_view[page, row][:, : NOPE // 64]  # [N, 7]
    nope = data[:, :NOPE].view(torch.float8_e4m3fn).float().view(total, NOPE // 64, 64)
    nope = (nope * torch.exp2(scales.float() - 127.0).unsqueeze(-1)).view(total, NOPE)
    tail = data[:, NOPE:].view(torch.bfloat16)  # [N, 64], stored unquantized
    rows = torch.cat((nope.to(torch.bfloat16), tail), dim=1)
    out.view(requests * max_rows, HEAD).index_copy_(0, request * max_rows + position, rows)
    return out


def c4_store(inp, full):
    active = inp["active"]
    position = inp["positions"].index_select(0, active)
    request = inp["token_to_req"].index_select(0, active).long()
    kv_slot = inp["kv_slot_mapping"].index_select(0, active)
    rows = position.unsqueeze(1) + inp["c4_row_offsets"]  # [n, 8]: p-7 .. p
    present = rows >= 0
    rows = rows.clamp_min(0)
    block = inp["state_block"]
    blocks = inp["block_table"][request.unsqueeze(1), rows // block].long()
    # A state row is [kv (2 halves of 512) | score (2 halves of 512)]: rows 0..3 of the window
    # read the first halves, rows 4..7 the second.
    state = inp["state"].view(-1, block, 2, 2, HEAD)
    gathered = state[blocks, rows % block, :, inp["c4_halves"]]  # [n, 8, 2 (kv|score), 512]
    score = gathered[:, :, 1].masked_fill(~present.unsqueeze(-1), float("-inf"))
    x = (torch.softmax(score, dim=1) * gathered[:, :, 0]).sum(dim=1)  # [n, 512]
    y = rms_norm(x, inp["norm_weight"])
    cs = inp["cos_sin"].index_select(0, (position // 4) * 4)
    half = ROPE_DIM // 2
    rotated = rope_pairs(y[:, NOPE:], cs[:, :half], cs[:, half:])
    store_rows(inp, y, rotated, kv_slot, full)


def c128_compress(inp):
    active = inp["active"]
    position = inp["positions"].index_select(0, active)
    request = inp["token_to_req"].index_select(0, active).long()
    rows = position.unsqueeze(1) + inp["c128_row_offsets"]  # [n, 128]: p-127 .. p
    block = inp["state_block"]
    blocks = inp["block_table"][request.unsqueeze(1), rows // block].long()
    state = inp["state"].view(-1, block, 2, HEAD)
    gathered = state[blocks, rows % block]  # [n, 128, 2 (kv|score), 512]
    x = (torch.softmax(gathered[:, :, 1], dim=1) * gathered[:, :, 0]).sum(dim=1)
    inp["compressed_kv"].index_copy_(0, active, x)


def c128_store(inp, full):
    active = inp["active"]
    position = inp["positions"].index_select(0, active)
    kv_slot = inp["kv_slot_mapping"].index_select(0, active)
    y = rms_norm(inp["compressed_kv"].index_select(0, active), inp["norm_weight"])
    cs = inp["cos_sin"].index_select(0, (position // 128) * 128)
    half = ROPE_DIM // 2
    rotated = rope_pairs(y[:, NOPE:], cs[:, :half], cs[:, half:])
    store_rows(inp, y, rotated, kv_slot, full)


def dcp_pack(inp):
    logits, local = inp["logits"], inp["topk_indices"]
    valid = local >= 0
    column = local.long()
    if "row_starts" in inp:
        column = column + inp["row_starts"].long().unsqueeze(1)
    column = column.clamp(0, max(logits.shape[1] - 1, 0))  # clamp, not mask (spec 12.3)
    score = torch.where(valid, torch.gather(logits, 1, column), float("-inf"))
    local = local.clamp_min(0)
    global_id = (
        (local // DCP_INTERLEAVE) * (DCP_WORLD * DCP_INTERLEAVE)
        + DCP_RANK * DCP_INTERLEAVE
        + local % DCP_INTERLEAVE
    )
    ident = torch.where(valid, global_id.float(), -1.0)
    return torch.stack((score, ident), dim=-1)  # [R, K, 2]


COMPOSITES = {
    "indexer_q_fp8": indexer_q_fp8,
    "indexer_q_mxfp4": indexer_q_mxfp4,
    "dequant_gather": dequant_gather,
    "c4_store": lambda inp: c4_store(inp, False),
    "c4_store_full": lambda inp: c4_store(inp, True),
    "c128_compress": c128_compress,
    "c128_store": lambda inp: c128_store(inp, False),
    "c128_store_full": lambda inp: c128_store(inp, True),
    "dcp_pack": dcp_pack,
}
