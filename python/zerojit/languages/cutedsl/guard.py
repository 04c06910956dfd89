"""The CuTeDSL guard: ``cute.compile`` calls for kernels zerojit does not own (another library's
``@cute.jit`` functions) seen by zerojit's JIT monitor.

CuTeDSL keeps no cache: every ``cute.compile`` compiles, so after warmup each one is a stall.
Once the monitor is armed, each is a monitor event (a warning in warn mode, a
``RuntimeJitError`` naming the function in error mode, raised before anything is compiled),
counted under the pseudo-kernel ``"cutedsl.foreign"`` of ``zerojit.monitor.counters()``. Every
spelling goes through the one compile method the guard wraps (``cute.compile(f, ...)``,
``cute.compile[options](f, ...)``, ``compile_to``). Installed when the DSL is imported (now, or
later by anyone); off with ``ZEROJIT_CUTE_GUARD=0`` or ``zerojit.monitor.cutedsl_guard(False)``.
zerojit's own CuTeDSL kernels compile in worker processes, where the guard is never installed.
"""

import functools
import os

from zerojit import _core
from zerojit.runtime import environment as _environment
from zerojit.runtime.after_import import call_after_import

__all__ = ["enable", "enabled", "install_when_imported"]

COUNTER = "cutedsl.foreign"
_COMPILER_MODULE = "cutlass.base_dsl.compiler"  # where CuTeDSL 4.x defines CompileCallable
_enabled = _environment.flag("ZEROJIT_CUTE_GUARD", True)


def enabled():
    return _enabled


def enable(value=True):
    """Turns the guard on or off (the wrapper stays, and passes through when off)."""
    global _enabled
    _enabled = bool(value)


def _function_name(function):
    target = getattr(function, "__func__", function)  # a bound method: its function
    module = getattr(target, "__module__", None) or "?"
    name = getattr(target, "__qualname__", None) or type(target).__qualname__
    return f"{module}.{name}"


def _install(compiler):
    callable_type = getattr(compiler, "CompileCallable", None)
    original = getattr(callable_type, "_compile", None)
    if original is None or getattr(original, "zerojit_guard", False):
        return  # a DSL without the method (another version), or already wrapped

    @functools.wraps(original)
    def _compile(self, function, *args, **kwargs):
        if _enabled:
            _core.monitor_foreign_event(
                "compile",
                COUNTER,
                _function_name(function),
                "cute.compile",
                "a CuTeDSL compile of a kernel zerojit does not own",
            )
        return original(self, function, *args, **kwargs)

    _compile.zerojit_guard = True
    callable_type._compile = _compile


def install_when_imported():
    """Installs the guard now if CuTeDSL is imported, else when it is (never in a compile
    worker, where zerojit's own compiles run)."""
    if not os.environ.get("ZEROJIT_COMPILE_WORKER"):
        call_after_import(_COMPILER_MODULE, _install)
