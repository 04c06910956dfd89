"""The Triton guard: Triton compiles and module loads of kernels zerojit does not own (another
library's ``@triton.jit`` functions, Inductor's direct ``triton.compile``) seen by zerojit's JIT
monitor.

Once the monitor is armed, each such compile is a monitor event (a warning in warn mode, a
``RuntimeJitError`` naming the Triton function in error mode, raised before anything is
compiled), counted under the pseudo-kernel ``"triton.foreign"`` of ``zerojit.monitor.counters()``.
A Triton module load while the current CUDA stream is capturing a graph is refused in every
mode, with zerojit's message instead of the driver's "operation not permitted when stream is
capturing". The hooks chain with any installed before them (they are called after zerojit's own
check, and their results are returned), are installed when Triton is imported (now, or later by
anyone), and can be turned off: ``ZEROJIT_TRITON_GUARD=0`` or
``zerojit.monitor.triton_guard(False)``.
Compiles in other processes (Inductor's compile workers) are not seen: no in-process hook sees
them.
"""

import os
import sys
import threading

from zerojit import _core
from zerojit.runtime import environment as _environment
from zerojit.runtime.after_import import call_after_import

__all__ = ["enable", "enabled", "install_when_imported"]

COUNTER = "triton.foreign"
_enabled = _environment.flag("ZEROJIT_TRITON_GUARD", True)
_installed = False
_lock = threading.Lock()
_reported_here = threading.local()  # a JIT compile already reported on this thread


def enabled():
    return _enabled


def enable(value=True):
    """Turns the guard on or off (the hooks stay chained, and pass through when off)."""
    global _enabled
    _enabled = bool(value)


def _report(kind, function, key, detail):
    if _enabled:
        _core.monitor_foreign_event(kind, COUNTER, function, key, detail)


def _capturing():
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available():
        return False
    try:
        return bool(torch.cuda.is_current_stream_capturing())
    except RuntimeError:
        return False


def _install(triton):
    """Chains zerojit's hooks into Triton's (triton.knobs, Triton 3.5 and 3.6)."""
    global _installed
    with _lock:
        if _installed:
            return
        knobs = getattr(triton, "knobs", None)
        runtime = getattr(knobs, "runtime", None)
        if runtime is None:
            return  # a Triton without knobs: nothing to hook
        _installed = True
    previous_jit = runtime.jit_cache_hook

    def jit_cache_hook(*, key, repr, fn, compile, is_manual_warmup, already_compiled):
        function = f"{getattr(fn, 'module', '?')}.{getattr(fn, 'name', '?')}"
        _reported_here.value = True
        _report("compile", function, repr, "a Triton JIT compile of a kernel zerojit does not own")
        if previous_jit is None:
            return False  # never truthy: that would skip the compile *and* the launch
        return previous_jit(
            key=key,
            repr=repr,
            fn=fn,
            compile=compile,
            is_manual_warmup=is_manual_warmup,
            already_compiled=already_compiled,
        )

    runtime.jit_cache_hook = jit_cache_hook

    previous_stages = runtime.add_stages_inspection_hook

    def add_stages_inspection_hook(*args, **kwargs):
        if getattr(_reported_here, "value", False):
            _reported_here.value = False  # the JIT path's compile, reported above
        else:
            _report(
                "compile",
                _compiled_name(),
                "triton.compile",
                "a direct triton.compile of a kernel zerojit does not own",
            )
        if previous_stages is not None:
            return previous_stages(*args, **kwargs)
        return None

    runtime.add_stages_inspection_hook = add_stages_inspection_hook

    def kernel_load_start_hook(module, function, name, metadata_group, hash):
        if not _enabled:
            return
        if _capturing():
            from zerojit.runtime.errors import RuntimeJitError

            raise RuntimeJitError(
                f"Triton is loading the module of kernel {name} while the current CUDA stream "
                "captures a graph (the driver refuses a module load during capture); run the "
                "kernel once before capturing, or put it on zerojit (zerojit.TritonKernel), "
                "whose warmup loads every kernel",
                name,
                "",
                "",
            )
        _report("load", name, "", "a Triton module load of a kernel zerojit does not own")

    hooks = runtime.kernel_load_start_hook
    if hasattr(hooks, "add"):
        hooks.add(kernel_load_start_hook)
    else:  # a single hook (older Triton): chained by hand

        def chained(*args):
            kernel_load_start_hook(*args)
            if hooks is not None:
                hooks(*args)

        runtime.kernel_load_start_hook = chained


def _compiled_name():
    """The name of the source a direct triton.compile call compiles (its `src` argument, a
    few frames up), or "triton.compile" when it cannot be seen."""
    frame = sys._getframe(1)
    for _ in range(8):
        frame = frame.f_back
        if frame is None:
            break
        source = frame.f_locals.get("src")
        name = getattr(source, "name", None)
        if isinstance(name, str):
            return name
    return "triton.compile"


def install_when_imported():
    """Installs the guard now if Triton is imported, else when it is (never in a compile
    worker, where zerojit's own compiles run)."""
    if not os.environ.get("ZEROJIT_COMPILE_WORKER"):
        call_after_import("triton", _install)
