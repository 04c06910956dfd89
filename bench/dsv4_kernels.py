"""The DSv4 kernels the bandwidth benchmarks measure, in the order their tables and figures list
them (bench_kernels' names): one list for torch_composite_ops.py, which times them with PyTorch,
and plot_bandwidth.py, which draws them and must not need PyTorch to."""

KERNELS = [
    "indexer_q_fp8",
    "indexer_q_mxfp4",
    "dequant_gather",
    "c4_store",
    "c4_store_full",
    "c128_compress",
    "c128_store",
    "c128_store_full",
    "dcp_pack",
]
