"""What the CPU tests of the DSv4 functions share to call them. Imports no zerojit: a test module
sets its environment before zerojit loads."""

from fake_dlpack import KDL_INT, VersionedProducer


def dequant_gather_arguments():
    """Host tensors for dequantize_and_gather_k_cache: out [1, 16, 512] bf16, a K cache of 4
    pages of 64 fp8_ds_mla rows (uint8 [4, 64, 584]), seq_lens [1] and block_table [1, 4]
    int32, for the calls that the argument checks refuse."""
    out = VersionedProducer((1, 16, 512), (4, 16, 1))  # bf16
    cache = VersionedProducer((4, 64, 584), (1, 8, 1))  # uint8
    seq_lens = VersionedProducer((1,), (KDL_INT, 32, 1))
    table = VersionedProducer((1, 4), (KDL_INT, 32, 1))
    return out, cache, seq_lens, table


def refused_compressor_arguments(state_cache, positions, num_actual=1, state_width=512):
    """compress_norm_rope_store's eleven positional arguments for a call that its checks refuse
    before any kernel runs: the state cache, ``positions`` (a non-empty one, or the call returns
    at once), ``num_actual`` and ``state_width`` as given, block size 8, and None for every
    tensor the checks never reach."""
    return [state_cache, num_actual, None, positions, None, None, 8, state_width, None, None, None]
