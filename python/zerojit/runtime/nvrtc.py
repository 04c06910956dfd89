"""NVRTC from PyTorch's CUDA wheels: where the ``nvidia`` namespace package (nvidia-cuda-nvrtc,
or the cu13 wheels' nvidia/cu13) carries libnvrtc, the core is pointed at it, so a pip
installation compiles without a CUDA toolkit. ``ZEROJIT_NVRTC_LIBRARY``, when set, wins."""

import glob
import importlib.util
import os

# Newest first: the core needs NVRTC 13 (libnvrtc.so.13) and takes 12 where it was built so.
_PATTERNS = (
    "cu13/lib/libnvrtc.so.13*",
    "cuda_nvrtc/lib/libnvrtc.so.13*",
    "cu12/lib/libnvrtc.so.12*",
    "cuda_nvrtc/lib/libnvrtc.so.12*",
)


def wheel_nvrtc():
    """The path of the newest libnvrtc in the ``nvidia`` wheels, or None."""
    try:
        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for pattern in _PATTERNS:
        for root in spec.submodule_search_locations:
            found = sorted(
                p
                for p in glob.glob(os.path.join(root, pattern))
                if "alt" not in os.path.basename(p)
            )
            if found:
                return found[0]
    return None


def configure():
    """Sets ZEROJIT_NVRTC_LIBRARY from the wheel unless the user set it; returns the path used."""
    if os.environ.get("ZEROJIT_NVRTC_LIBRARY"):
        return os.environ["ZEROJIT_NVRTC_LIBRARY"]
    path = wheel_nvrtc()
    if path is not None:
        os.environ["ZEROJIT_NVRTC_LIBRARY"] = path
    return path
