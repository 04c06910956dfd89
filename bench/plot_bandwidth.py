#!/usr/bin/env python3
"""Draws achieved bandwidth against bytes moved, one panel per DSv4 kernel, from the JSON of
bench_kernels (zerojit) and of torch_composite.py (PyTorch eager), with the device-to-device
copy roofline measured in the same run as a horizontal line (and 85 % of it, the target).

    python3 bench/plot_bandwidth.py ZEROJIT.json [TORCH.json] -o docs/kernel_bandwidth.png

Each JSON file holds {"impl", "device", "copy_gbps", "records": [{"kernel", "size", "bytes",
"gbps", ...}, ...]}; every file is one series, labelled by its "impl".
"""

import argparse
import json
import math
import sys

import matplotlib

from dsv4_kernels import KERNELS as KERNEL_ORDER

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)

STYLE = {
    "zerojit": {"color": "tab:blue", "marker": "o", "label": "zerojit"},
    "torch_eager": {"color": "tab:orange", "marker": "s", "label": "PyTorch eager"},
}
TARGET_FRACTION = 0.85


def load(path):
    with open(path) as file:
        data = json.load(file)
    if "records" not in data or "copy_gbps" not in data:
        sys.exit(f"plot_bandwidth.py: {path} has no 'records' or 'copy_gbps'")
    data.setdefault("impl", path)
    return data


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("inputs", nargs="+", help="JSON files (bench_kernels, torch_composite.py)")
    parser.add_argument("-o", "--output", required=True, help="PNG to write")
    parser.add_argument("--linear-y", action="store_true", help="linear bandwidth axis")
    parser.add_argument("--title", default="", help="figure title (default: the device)")
    args = parser.parse_args()

    series = [load(path) for path in args.inputs]
    roofline = series[0]["copy_gbps"]  # the first file's copy (zerojit's run) is the line
    kernels = [
        k for k in KERNEL_ORDER if any(r["kernel"] == k for s in series for r in s["records"])
    ]
    kernels += sorted({r["kernel"] for s in series for r in s["records"]} - set(kernels))
    if not kernels:
        sys.exit("plot_bandwidth.py: no records to draw")

    columns = min(3, len(kernels))
    rows = math.ceil(len(kernels) / columns)
    figure, axes = plt.subplots(rows, columns, figsize=(5.2 * columns, 4.0 * rows), squeeze=False)
    for index, kernel in enumerate(kernels):
        ax = axes[index // columns][index % columns]
        for data in series:
            points = sorted(
                (r["bytes"], r["gbps"], r["size"])
                for r in data["records"]
                if r["kernel"] == kernel and r.get("gbps", 0) > 0
            )
            if not points:
                continue
            style = STYLE.get(data["impl"], {"label": data["impl"]})
            ax.plot(
                [p[0] for p in points], [p[1] for p in points], linewidth=1.5, markersize=5, **style
            )
            for moved, gbps, size in points:
                ax.annotate(
                    size,
                    (moved, gbps),
                    textcoords="offset points",
                    xytext=(4, -10),
                    fontsize=7,
                    color=style.get("color", "black"),
                )
        ax.axhline(roofline, color="gray", linewidth=1.2, label=f"d2d copy {roofline:.0f} GB/s")
        ax.axhline(
            TARGET_FRACTION * roofline,
            color="gray",
            linewidth=0.8,
            linestyle="--",
            label=f"{TARGET_FRACTION:.0%} of copy",
        )
        for data in series[1:]:
            other = data["copy_gbps"]
            if abs(other - roofline) > 0.02 * roofline:
                ax.axhline(
                    other,
                    color=STYLE.get(data["impl"], {}).get("color", "gray"),
                    linewidth=0.8,
                    linestyle=":",
                    label=f"copy in the {data['impl']} run {other:.0f} GB/s",
                )
        ax.set_xscale("log")
        if args.linear_y:
            ax.set_ylim(bottom=0, top=1.1 * roofline)
        else:
            ax.set_yscale("log")
            ax.set_ylim(top=1.6 * roofline)
        ax.set_title(kernel, fontsize=11)
        ax.set_xlabel("bytes moved per call")
        ax.set_ylabel("achieved GB/s")
        ax.grid(True, which="both", linewidth=0.3, alpha=0.6)
        if index == 0:
            ax.legend(fontsize=7, loc="lower right")
    for index in range(len(kernels), rows * columns):
        axes[index // columns][index % columns].axis("off")
    device = series[0].get("device", "")
    figure.suptitle(args.title or f"DSv4 kernel bandwidth on {device}".strip(), fontsize=13)
    figure.tight_layout()
    figure.savefig(args.output, dpi=130)
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
