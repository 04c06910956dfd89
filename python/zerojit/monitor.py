"""The JIT monitor: armed when warmup ends, it reports (``warn``) or refuses (``error``) every
later compile or module load, and counts everything it sees.

The mode starts from ``$ZEROJIT_MONITOR`` (off, warn, error; default off). A compile requested
while a stream captures a CUDA graph is refused in every mode.
"""

import json

from zerojit import _core
from zerojit.languages.cutedsl import guard as _cute_guard
from zerojit.languages.triton import guard as _triton_guard

__all__ = [
    "mode",
    "set_mode",
    "arm",
    "disarm",
    "armed",
    "verbose",
    "set_verbose",
    "counters",
    "events",
    "reset_events",
    "triton_guard",
    "cutedsl_guard",
]


def mode():
    """ "off", "warn" or "error"."""
    return _core.monitor_mode()


def set_mode(new_mode):
    """Sets the mode ("off", "warn" or "error"; a ValueError otherwise)."""
    _core.set_monitor_mode(new_mode)


def arm():
    """Arms the monitor (warmup does this when it ends)."""
    _core.monitor_arm()


def disarm():
    _core.monitor_disarm()


def armed():
    return _core.monitor_armed()


def verbose():
    return _core.monitor_verbose()


def set_verbose(value):
    """In warn mode, report every event rather than once per (kernel, key)."""
    _core.set_monitor_verbose(bool(value))


def counters():
    """Every kernel's counters: ``{kernel: {"hits", "misses", "compiles", "compile_seconds",
    "disk_loads", "loads", "runtime_jit"}}``."""
    snapshot = json.loads(_core.monitor_counters_json())
    return {
        entry["kernel"]: {name: value for name, value in entry.items() if name != "kernel"}
        for entry in snapshot["kernels"]
    }


def events():
    """The runtime JITs seen since the last reset: a list of ``{"kind": "compile" | "load",
    "kernel", "key", "descriptors"}``."""
    return [
        {"kind": kind, "kernel": kernel, "key": key, "descriptors": descriptors}
        for kind, kernel, key, descriptors in _core.monitor_events()
    ]


def reset_events():
    _core.monitor_reset_events()


def triton_guard(enabled=None):
    """Whether the Triton guard reports and refuses Triton compiles and loads of kernels zerojit
    does not own (on unless ``ZEROJIT_TRITON_GUARD=0``); ``triton_guard(False)`` turns it off,
    ``triton_guard(True)`` on. Returns the setting in force."""
    if enabled is not None:
        _triton_guard.enable(enabled)
    return _triton_guard.enabled()


def cutedsl_guard(enabled=None):
    """Whether the CuTeDSL guard reports and refuses ``cute.compile`` calls for kernels zerojit
    does not own (on unless ``ZEROJIT_CUTE_GUARD=0``); ``cutedsl_guard(False)`` turns it off,
    ``cutedsl_guard(True)`` on. Returns the setting in force."""
    if enabled is not None:
        _cute_guard.enable(enabled)
    return _cute_guard.enabled()
