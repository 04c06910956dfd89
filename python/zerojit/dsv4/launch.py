"""What the DSv4 functions (zerojit.dsv4 and its compressors) share to launch: the fast path
and CPU reference of the core module, the choice between the fast path and the torch custom op
(``eager``, replaced by zerojit.pytorch.ops when it registers the ops), the default float8 scale and
the integer check of the C++ paths."""

import operator
import sys

from zerojit import _core
from zerojit.runtime import errors as _errors
from zerojit.runtime.tensors import torch_module

fast = _core.fast
cpu = _core.reference


def eager(anchor):
    """Whether a call on ``anchor`` takes the fast launch path. Under torch.compile (Dynamo
    folds ``is_dynamo_compiling`` to True) and for tensor subclasses such as FakeTensor, the
    call goes through the torch custom op instead (``torch.ops.zerojit``, zerojit.pytorch.ops),
    which tracing understands. Replaced by zerojit.pytorch.ops when it registers the ops."""
    return True


# One float32 [1] tensor of ones per device: vLLM's default per-tensor scale of a float8 cache.
_unit_scales = {}


def unit_scale(like, kernel="dsv4.compressor", argument="fp8_scale"):
    """A float32 ``[1]`` tensor of ones on ``like``'s device, made once per device: the default
    of an input declared ``unit_scale_when`` (``fp8_scale`` for a float8_e4m3fn cache), which
    the C++ launch path asks for when the caller passes None."""
    device = like.device
    scale = _unit_scales.get(device)
    if scale is None:
        torch = torch_module()
        if torch.cuda.is_current_stream_capturing():
            raise _errors.InvalidArgument(
                f"{kernel}: argument '{argument}': is None while a CUDA graph is being "
                f"captured; pass {argument}, or make one call before capturing",
                kernel,
                argument,
            )
        scale = torch.ones(1, dtype=torch.float32, device=device)
        _unit_scales[device] = scale
    return scale


def torch_ops():
    return sys.modules["torch"].ops.zerojit


def optional_integer(value, kernel, argument):
    """None, or ``value`` as ``integer`` takes it."""
    return None if value is None else integer(value, kernel, argument)


def integer(value, kernel, argument):
    """``value`` as an int, taken as the C++ paths take integers (python/src/arguments.hpp):
    anything with ``__index__`` (int, numpy integers). A float, a string or None is refused
    naming the argument, where ``int()`` would truncate 1.9 and parse "1"."""
    try:
        return operator.index(value)
    except TypeError:
        raise _errors.InvalidArgument(
            f"{kernel}: argument '{argument}': must be an integer, got {type(value).__name__}",
            kernel,
            argument,
        ) from None
