"""The stub CUDA driver from Python (tests/support/stub_driver.cpp): the call path's tests run with
ZEROJIT_TESTING_CUDA_DRIVER (and ZEROJIT_CUTE_DSL_RUNTIME) naming it, so that warmups load on a
"device" and calls launch; this module reads what the stub recorded, and makes CUDA tensors that
it never dereferences."""

import ctypes
import json
import os
import tempfile
import unittest

from fake_dlpack import KDL_CUDA, KDL_FLOAT, VersionedProducer

STUB = os.environ.get("ZEROJIT_TESTING_CUDA_DRIVER")
NEEDS_STUB = unittest.skipUnless(
    STUB and os.path.isfile(STUB),
    "the stub CUDA driver is not configured (ctest sets ZEROJIT_TESTING_CUDA_DRIVER)",
)


def _library():
    # The same file the driver loader opened: the same handle, the same recorded events.
    library = ctypes.CDLL(STUB)
    library.zerojit_stub_events.restype = ctypes.c_size_t
    library.zerojit_stub_events.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    library.zerojit_stub_mark.argtypes = [ctypes.c_char_p]
    library.zerojit_stub_set_capturing.argtypes = [ctypes.c_int]
    library.zerojit_stub_exchange_api.restype = ctypes.c_void_p
    library.zerojit_stub_register_tensor.argtypes = [
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_uint8,
        ctypes.c_uint8,
        ctypes.c_int32,
        ctypes.POINTER(ctypes.c_int64),
    ]
    library.zerojit_stub_forget_tensor.argtypes = [ctypes.c_void_p]
    return library


def events(kind=None):
    """What the stub recorded in this process, in order: dicts with "event" and its fields."""
    library = _library()
    size = library.zerojit_stub_events(None, 0)
    buffer = ctypes.create_string_buffer(size)
    library.zerojit_stub_events(buffer, size)
    recorded = [json.loads(line) for line in buffer.value.decode().splitlines()]
    return [e for e in recorded if kind is None or e["event"] == kind]


def clear():
    _library().zerojit_stub_clear()


def mark(text):
    _library().zerojit_stub_mark(text.encode())


def capturing(flag):
    """Every stream reports an active CUDA-graph capture while `flag` is true."""
    _library().zerojit_stub_set_capturing(1 if flag else 0)


def cuda_tensor(shape, dtype=(KDL_FLOAT, 32, 1)):
    """A CUDA tensor on device 0 through the capsule protocol (its storage is host memory the
    stub never reads)."""
    return VersionedProducer(shape, dtype, device=(KDL_CUDA, 0))


_next_address = [0x7F0000000000]


class StubTensor:
    """A compact CUDA tensor on device 0 read through DLPack's exchange API, as PyTorch's are
    (the stub lends the table): a call imports it with no capsule and no Python, so timings
    show the call path's own cost. Its data pointer is an address nobody dereferences."""

    def __init__(self, shape, dtype=(KDL_FLOAT, 32, 1)):
        self.shape = tuple(shape)
        self.data = _next_address[0]
        _next_address[0] += 1 << 20
        extents = (ctypes.c_int64 * len(self.shape))(*self.shape)
        self._library = _library()
        self._library.zerojit_stub_register_tensor(
            id(self), self.data, dtype[0], dtype[1], len(self.shape), extents
        )

    def __del__(self):
        self._library.zerojit_stub_forget_tensor(id(self))


def _install_exchange_api():
    if STUB and os.path.isfile(STUB):
        StubTensor.__dlpack_c_exchange_api__ = _library().zerojit_stub_exchange_api()


_install_exchange_api()


def little_endian(value, size):
    """`value`'s bytes as the stub prints a parameter (hex, little-endian)."""
    return (value % (1 << (8 * size))).to_bytes(size, "little").hex()


class StubTestCase(unittest.TestCase):
    """A test of the call path on the stub: a fresh cache folder, no registrations, the monitor
    off and disarmed, no capture and no recorded events; all put back after the test."""

    def setUp(self):
        import zerojit  # here: the module is imported only by the tests that use the stub

        self.cache = tempfile.TemporaryDirectory()
        zerojit.clear_registrations()
        zerojit.monitor.set_mode("off")
        zerojit.monitor.disarm()
        capturing(False)
        clear()

    def tearDown(self):
        import zerojit

        capturing(False)
        zerojit.monitor.disarm()
        zerojit.monitor.set_mode("off")
        zerojit.clear_registrations()
        self.cache.cleanup()
