"""Streams and output allocation for the kernel functions.

Nothing here imports PyTorch or numpy: a tensor of theirs can only reach zerojit if its library
is already imported, so it is looked up in ``sys.modules`` when needed.
"""

import sys

from zerojit.runtime import errors as _errors

# zerojit dtype names -> the attribute names of torch and numpy dtypes. numpy has no FP8 type,
# so FP8 outputs it allocates are uint8 (the kernels take either; the bytes are the same).
_TORCH_DTYPES = {"f32": "float32", "u8": "uint8", "i32": "int32", "e4m3": "float8_e4m3fn"}
_NUMPY_DTYPES = {"f32": "float32", "u8": "uint8", "i32": "int32", "e4m3": "uint8"}


def torch_module():
    """PyTorch, when the program has imported it, else None."""
    return sys.modules.get("torch")


def is_torch_tensor(value):
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor)


def empty(like, shape, dtype):
    """An uninitialized tensor of ``shape`` and zerojit ``dtype`` (f32, u8, i32, e4m3) on the
    device of ``like``: a torch tensor for a torch tensor, a numpy array for a numpy array."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(like, torch.Tensor):
        return torch.empty(shape, dtype=getattr(torch, _TORCH_DTYPES[dtype]), device=like.device)
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(like, numpy.ndarray):
        return numpy.empty(shape, dtype=getattr(numpy, _NUMPY_DTYPES[dtype]))
    raise TypeError(
        f"zerojit: cannot allocate an output like a {type(like).__qualname__}; pass the output "
        "tensor explicitly (outputs like torch tensors and numpy arrays are allocated "
        "automatically)"
    )


def ones(like, shape, dtype):
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(like, torch.Tensor):
        return torch.ones(shape, dtype=getattr(torch, _TORCH_DTYPES[dtype]), device=like.device)
    out = empty(like, shape, dtype)
    out.fill(1)
    return out


def shape_of(value, kernel, argument, ndim):
    """``value.shape`` as a tuple of ``ndim`` ints, for sizing outputs before the kernel's own
    validation runs; raises zerojit.InvalidArgument naming the argument otherwise."""
    shape = getattr(value, "shape", None)
    if shape is None:
        raise _errors.InvalidArgument(
            f"{kernel}: argument '{argument}': must be a tensor with a shape to size the outputs "
            f"from, got {type(value).__qualname__}",
            kernel,
            argument,
        )
    shape = tuple(int(extent) for extent in shape)
    if len(shape) != ndim:
        raise _errors.InvalidArgument(
            f"{kernel}: argument '{argument}': must have {ndim} dimensions, got shape {shape}",
            kernel,
            argument,
        )
    return shape
