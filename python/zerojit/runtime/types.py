"""zerojit's element types and tensor descriptors, as the Python kernel owners see them (the
C++ core's DType and TensorDesc)."""

import enum
import sys
import typing

from zerojit import _core

__all__ = ["DType", "TensorDesc"]


def _is_torch(value):
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor)


class DType(str, enum.Enum):
    """zerojit's element types; the value is the name C++ keys print (``DType.f32 == "f32"``)."""

    boolean = "bool"
    i8 = "i8"
    i16 = "i16"
    i32 = "i32"
    i64 = "i64"
    u8 = "u8"
    u16 = "u16"
    u32 = "u32"
    u64 = "u64"
    f16 = "f16"
    bf16 = "bf16"
    f32 = "f32"
    f64 = "f64"
    e4m3 = "e4m3"
    e5m2 = "e5m2"
    e2m1x2 = "e2m1x2"
    ue8m0 = "ue8m0"

    def __str__(self):
        return self.value

    @classmethod
    def of(cls, value):
        """A DType from a DType, its name, or a ``torch.dtype``."""
        if isinstance(value, cls):
            return value
        if isinstance(value, str):
            try:
                return cls(value)
            except ValueError:
                raise ValueError(f"'{value}' is not a zerojit dtype name") from None
        found = _torch_dtypes().get(value)
        if found is None:
            raise ValueError(f"{value!r} has no zerojit dtype")
        return found


_TORCH_NAMES = {
    "bool": "bool",
    "int8": "i8",
    "int16": "i16",
    "int32": "i32",
    "int64": "i64",
    "uint8": "u8",
    "uint16": "u16",
    "uint32": "u32",
    "uint64": "u64",
    "float16": "f16",
    "bfloat16": "bf16",
    "float32": "f32",
    "float64": "f64",
    "float8_e4m3fn": "e4m3",
    "float8_e5m2": "e5m2",
    "float4_e2m1fn_x2": "e2m1x2",
    "float8_e8m0fnu": "ue8m0",
}
_torch_map = None


def _torch_dtypes():
    """torch.dtype -> DType, built once PyTorch is imported (never imports it itself)."""
    global _torch_map
    if _torch_map is None:
        torch = sys.modules.get("torch")
        if torch is None:
            return {}
        _torch_map = {
            getattr(torch, name): DType(ours)
            for name, ours in _TORCH_NAMES.items()
            if hasattr(torch, name)
        }
    return _torch_map


class TensorDesc(typing.NamedTuple):
    """What dispatch sees of a tensor: dtype, shape, strides (in elements) and the alignment
    of its base address in bytes (the largest power of two dividing it, at most 256), as the
    C++ TensorDesc. A tuple, so that building one per call costs little."""

    dtype: DType
    shape: tuple
    strides: tuple
    alignment: int = 256

    @classmethod
    def contiguous(cls, dtype, shape, alignment=256):
        shape = tuple(int(s) for s in shape)
        strides, step = [], 1
        for extent in reversed(shape):
            strides.append(step)
            step *= max(extent, 1)
        return cls(DType.of(dtype), shape, tuple(reversed(strides)), int(alignment))

    @classmethod
    def of(cls, tensor):
        """The descriptor of a tensor: a torch.Tensor, or anything with ``__dlpack__`` (a
        numpy array, a CuPy array, a JAX array...) or DLPack's exchange API of a zerojit dtype;
        a TensorDesc is returned as it is."""
        if isinstance(tensor, TensorDesc):
            return tensor
        dtype = _torch_dtypes().get(getattr(tensor, "dtype", None)) if _is_torch(tensor) else None
        if dtype is not None:
            pointer = tensor.data_ptr()
            alignment = 256 if pointer == 0 else min(pointer & -pointer, 256)
            return cls(dtype, tuple(tensor.shape), tuple(tensor.stride()), alignment)
        if not hasattr(tensor, "__dlpack__") and not hasattr(
            type(tensor), "__dlpack_c_exchange_api__"
        ):
            raise TypeError(
                f"cannot describe {type(tensor).__name__}: a tensor argument is a torch.Tensor, "
                "a DLPack producer (with __dlpack__) or a TensorDesc"
            )
        dtype, shape, strides, alignment = _core.describe_tensor(tensor)
        return cls(DType(dtype), tuple(shape), tuple(strides), alignment)

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def numel(self):
        count = 1
        for extent in self.shape:
            count *= extent
        return count

    def is_contiguous(self):
        """Row-major and packed (extents of 1 may have any stride), as the C++ check."""
        expected = 1
        for extent, stride in zip(reversed(self.shape), reversed(self.strides)):
            if extent != 1 and stride != expected:
                return False
            expected *= extent
        return True
