"""Engine hooks: zerojit's log lines and monitor events in Python ``logging``, a monitor
callback, vLLM's ``--jit-monitor-mode`` values, and a warmup progress bar.

Library log lines (cache warnings, the monitor's reports, ...) go to the logger "zerojit" once
``install_logging()`` ran (``import zerojit`` runs it unless ``ZEROJIT_PYTHON_LOGGING=0``);
each record carries ``zerojit_component`` ("cache", "monitor", ...). They may come from warmup
worker threads: the bridge takes the GIL itself, and zerojit never calls it while holding a
lock that a thread holding the GIL could wait for.
"""

import atexit
import logging

from zerojit import _core

__all__ = [
    "install_logging",
    "uninstall_logging",
    "set_monitor_callback",
    "monitor_callback",
    "monitor_mode_from_vllm",
    "configure_from_vllm",
    "tqdm_progress",
    "LOGGER",
]

LOGGER = logging.getLogger("zerojit")

_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}
_monitor_callback = None


def _on_log(level, component, message):
    LOGGER.log(
        _LEVELS.get(level, logging.WARNING),
        "%s: %s",
        component,
        message,
        extra={"zerojit_component": component},
    )


def _on_event(kind, kernel, key, descriptors):
    LOGGER.debug(
        "monitor event: %s of %s [%s]%s",
        kind,
        kernel,
        key,
        f" ({descriptors})" if descriptors else "",
    )
    callback = _monitor_callback
    if callback is not None:
        callback({"kind": kind, "kernel": kernel, "key": key, "descriptors": descriptors})


def install_logging():
    """Routes zerojit's log lines and monitor events to the "zerojit" logger (instead of
    standard error)."""
    _core.set_log_bridge(_on_log)
    _core.set_event_bridge(_on_event)


def uninstall_logging():
    """Back to standard error; no Python is called from zerojit afterwards."""
    _core.set_log_bridge(None)
    _core.set_event_bridge(None)


# Before the interpreter goes away: a compile thread must not call into a finalizing Python.
atexit.register(uninstall_logging)


def set_monitor_callback(callback):
    """``callback(event)`` for every event the armed monitor sees (a dict: kind "compile" or
    "load", kernel, key, descriptors), on the launching thread, before an error-mode refusal is
    raised. None removes it. Needs install_logging() (the default)."""
    global _monitor_callback
    _monitor_callback = callback


def monitor_callback():
    """The callback set_monitor_callback installed (None if none), so that a second user can
    chain it rather than replace it (zerojit.RankGroup.watch does)."""
    return _monitor_callback


# vLLM's --jit-monitor-mode values (and the spellings engines use for them) -> zerojit's mode.
_VLLM_MODES = {
    None: "off",
    "": "off",
    "off": "off",
    "none": "off",
    "disabled": "off",
    "warn": "warn",
    "warning": "warn",
    "log": "warn",
    "error": "error",
    "raise": "error",
    "strict": "error",
    # zerojit's own: serve a miss with the kernel's fallback, compile it in the background (vLLM
    # has no such mode).
    "fallback": "fallback",
}


def monitor_mode_from_vllm(value):
    """zerojit's monitor mode for a ``--jit-monitor-mode`` value ("off", "warn", "error" and
    their aliases; None means off). Raises ValueError naming the value otherwise."""
    key = value.strip().lower() if isinstance(value, str) else value
    if key not in _VLLM_MODES:
        raise ValueError(
            f"--jit-monitor-mode={value!r} has no zerojit monitor mode (off, warn, error or "
            "fallback)"
        )
    return _VLLM_MODES[key]


def configure_from_vllm(jit_monitor_mode=None, jit_monitor_verbose=False):
    """Sets the monitor from vLLM's options; warmup arms it when it ends."""
    _core.set_monitor_mode(monitor_mode_from_vllm(jit_monitor_mode))
    _core.set_monitor_verbose(bool(jit_monitor_verbose))


def tqdm_progress(desc="zerojit warmup", **tqdm_kwargs):
    """An ``on_key`` for warmup() that draws a tqdm bar (tqdm must be installed). Call
    ``.close()`` on the returned object after warmup."""
    from tqdm import tqdm

    class _Bar:
        def __init__(self):
            self.bar = None

        def __call__(self, kernel, key, origin, seconds, error, done, total):
            if self.bar is None:
                self.bar = tqdm(total=total, desc=desc, **tqdm_kwargs)
            self.bar.set_postfix_str(f"{kernel} {origin}", refresh=False)
            self.bar.update(done - self.bar.n)

        def close(self):
            if self.bar is not None:
                self.bar.close()

    return _Bar()
