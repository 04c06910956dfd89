"""A DLPack producer written with ctypes, for testing how zerojit consumes capsules without
depending on any array library: it records what it was asked for (stream, max_version), and
whether the consumer renamed the capsule and called the deleter."""

import ctypes

KDL_CPU = 1
KDL_CUDA = 2
KDL_INT = 0
KDL_UINT = 1
KDL_FLOAT = 2
KDL_BFLOAT = 4
KDL_COMPLEX = 5


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", DELETER)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [
        ("version", DLPackVersion),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", DELETER),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", DLTensor),
    ]


_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_capsule_name = ctypes.pythonapi.PyCapsule_GetName
_capsule_name.restype = ctypes.c_char_p
_capsule_name.argtypes = [ctypes.py_object]

# Capsule names must outlive the capsules: module constants.
LEGACY_NAME = b"dltensor"
VERSIONED_NAME = b"dltensor_versioned"


def capsule_name(capsule):
    return _capsule_name(capsule).decode()


class FakeTensor:
    """A tensor over a ctypes buffer, exported through DLPack: C-contiguous, or with the strides
    given (in elements, non-negative; the buffer covers them).

    dtype: (code, bits, lanes); device: (device_type, device_id); version: (major, minor) of the
    versioned protocol, or None for a producer that only knows the legacy one (its __dlpack__
    then takes no max_version, as in numpy < 2.1).
    """

    def __init__(
        self,
        shape,
        dtype=(KDL_FLOAT, 32, 1),
        device=(KDL_CPU, 0),
        version=(1, 0),
        read_only=False,
        strides=None,
    ):
        self.shape = tuple(shape)
        self.strides = None if strides is None else tuple(strides)
        self.dtype = dtype
        self.device = device
        self.version = version
        self.read_only = read_only
        count = 1
        for extent in self.shape:
            count *= extent
        if self.strides is not None and count:
            count = 1 + sum((e - 1) * s for e, s in zip(self.shape, self.strides))
        item_bytes = max(1, dtype[1] * dtype[2] // 8)
        # 256-byte aligned storage, as a CUDA allocation would be.
        self._storage = (ctypes.c_uint8 * (count * item_bytes + 256))()
        address = ctypes.addressof(self._storage)
        self.data = address + (-address % 256)
        self.requests = []  # (stream, max_version) of every __dlpack__ call
        self.capsules = []
        self.deleted = 0
        self._keep = []  # ctypes objects the capsules point into
        self._deleter = DELETER(self._on_delete)

    def _on_delete(self, _managed):
        self.deleted += 1

    def __dlpack_device__(self):
        return self.device

    def _tensor(self):
        shape = (ctypes.c_int64 * max(1, len(self.shape)))(*self.shape)
        self._keep.append(shape)
        tensor = DLTensor(
            data=self.data,
            device=DLDevice(*self.device),
            ndim=len(self.shape),
            dtype=DLDataType(*self.dtype),
            shape=shape,
            strides=None,
            byte_offset=0,
        )
        if self.strides is not None:
            strides = (ctypes.c_int64 * max(1, len(self.strides)))(*self.strides)
            self._keep.append(strides)
            tensor.strides = strides
        return tensor

    def _export(self, stream, max_version):
        self.requests.append((stream, max_version))
        if self.version is not None and max_version is not None:
            managed = DLManagedTensorVersioned(
                version=DLPackVersion(*self.version),
                manager_ctx=None,
                deleter=self._deleter,
                flags=1 if self.read_only else 0,
                dl_tensor=self._tensor(),
            )
            name = VERSIONED_NAME
        else:
            managed = DLManagedTensor(
                dl_tensor=self._tensor(), manager_ctx=None, deleter=self._deleter
            )
            name = LEGACY_NAME
        self._keep.append(managed)
        capsule = _capsule_new(ctypes.addressof(managed), name, None)
        self.capsules.append(capsule)
        return capsule


class VersionedProducer(FakeTensor):
    def __dlpack__(self, *, stream=None, max_version=None):
        return self._export(stream, max_version)


class LegacyProducer(FakeTensor):
    def __init__(self, *args, **kwargs):
        kwargs["version"] = None
        super().__init__(*args, **kwargs)

    def __dlpack__(self, stream=None):
        return self._export(stream, None)


class HostileProducer(VersionedProducer):
    """A producer that breaks the protocol: its DLTensor lies about the small buffer behind it.

    lie: a dict of what to put in the DLTensor instead of the truth: "shape" (a tuple declared
    in place of the real one), "strides" (a tuple), "byte_offset" (an int), "null_shape" (a null
    shape pointer with the real ndim), "null_data" (a null data pointer).
    """

    def __init__(self, shape, lie, dtype=(KDL_FLOAT, 32, 1)):
        super().__init__(shape, dtype)
        self.lie = lie

    def _tensor(self):
        tensor = super()._tensor()
        if "shape" in self.lie:
            declared = (ctypes.c_int64 * len(self.lie["shape"]))(*self.lie["shape"])
            self._keep.append(declared)
            tensor.shape = declared
            tensor.ndim = len(self.lie["shape"])
        if "strides" in self.lie:
            strides = (ctypes.c_int64 * len(self.lie["strides"]))(*self.lie["strides"])
            self._keep.append(strides)
            tensor.strides = strides
        if "byte_offset" in self.lie:
            tensor.byte_offset = self.lie["byte_offset"]
        if self.lie.get("null_shape"):
            tensor.shape = ctypes.POINTER(ctypes.c_int64)()
        if self.lie.get("null_data"):
            tensor.data = None
        return tensor
