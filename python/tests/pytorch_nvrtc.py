"""On a host without a CUDA toolkit zerojit finds no NVRTC, but PyTorch's CUDA wheels ship one
(site-packages/nvidia/.../libnvrtc.so.*). Importing this module points zerojit at it, unless
the environment already says where NVRTC is. Import it before zerojit first looks for NVRTC."""

import glob
import importlib.util
import os


def use_the_nvrtc_pytorch_ships():
    if any(os.environ.get(name) for name in ("ZEROJIT_NVRTC_LIBRARY", "CUDA_HOME", "CUDA_PATH")):
        return
    if glob.glob("/usr/local/cuda*/lib64/libnvrtc.so*"):
        return
    spec = importlib.util.find_spec("torch")  # its location only: torch is not imported
    if spec is None or not spec.origin:
        return
    site = os.path.dirname(os.path.dirname(spec.origin))
    for soname in ("libnvrtc.so.13", "libnvrtc.so.12"):
        found = sorted(glob.glob(os.path.join(site, "nvidia", "**", soname), recursive=True))
        if found:
            os.environ["ZEROJIT_NVRTC_LIBRARY"] = found[0]
            return


use_the_nvrtc_pytorch_ships()
