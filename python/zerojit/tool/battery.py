"""``python -m zerojit run --module M``: the runtime calls a module's battery makes, checked
against the warmup manifest (and, on a GPU, launched after warmup with the monitor armed), as
the C++ families' ``run`` does (docs/TOOL.md, "`run` for your family").

A battery is ``fn(step)``, registered with ``zerojit.register_battery(fn)``: each step makes the
calls serving makes, through ``step.call(kernel, *args, **options)``. Without a GPU (or with
``--dispatch-only``) only the key of each call is computed (dispatch over what it reads: pass
``TensorDesc``s or tensors); on a GPU the call is also launched on ``step.stream`` (pass real
tensors: ``step.launching`` tells which run this is)."""

from zerojit.runtime.types import TensorDesc

__all__ = ["register_battery", "battery", "Step"]

_batteries = []


def register_battery(fn):
    """Registers ``fn(step)`` as a battery of runtime calls for ``run``; returns ``fn`` (so it
    can decorate). Registering one function twice keeps it once; several run in order."""
    if not callable(fn):
        raise TypeError(f"a battery is a function of one step, got {type(fn).__name__}")
    if fn not in _batteries:
        _batteries.append(fn)
    return fn


def clear_batteries():
    _batteries.clear()


def battery():
    """The registered batteries as one function of the core's step, or None (for the tool)."""
    if not _batteries:
        return None
    batteries = list(_batteries)

    def run(handle):
        step = Step(handle)
        for fn in batteries:
            fn(step)

    return run


class Step:
    """One step of ``run``: ``index`` (0 to --steps - 1), ``seed`` (its own, from --seed),
    ``launching`` (on a GPU: calls launch), ``device`` (-1 without one), ``stream`` (a CUstream
    handle on it) and ``call``."""

    def __init__(self, handle):
        self._handle = handle

    @property
    def index(self):
        return self._handle.index

    @property
    def seed(self):
        return self._handle.seed

    @property
    def launching(self):
        return self._handle.launching

    @property
    def device(self):
        return self._handle.device

    @property
    def stream(self):
        return self._handle.stream

    def call(self, kernel, *args, **options):
        """One runtime call of ``kernel`` (a zerojit kernel class or instance): its key is the
        kernel's dispatch of ``args`` and ``options`` (the call options), which must be in the
        warmup manifest; on a GPU the call is then made on the step's stream."""
        kernel = kernel() if isinstance(kernel, type) else kernel
        if hasattr(kernel, "call_key"):
            key_text = kernel.key_text(kernel.call_key(*args, **options))
        else:  # zerojit.Kernel (CUDA C++): its own memo's resolve
            key_text = kernel._core.slot_text(kernel._resolve(args)[0])
        names = getattr(kernel, "runtime_params", None) or [f"arg{i}" for i in range(len(args))]
        described = [f"{n}: {_describe(v)}" for n, v in zip(names, args)]
        described += [f"{n}={v!r}" for n, v in options.items()]
        launch = None
        if self._handle.launching:

            def launch(stream):
                kernel(*args, stream=stream, **options)

        self._handle.check(kernel._core, key_text, ", ".join(described), launch)


def _describe(value):
    if value is None or isinstance(value, (bool, int, float, str)):
        return repr(value)
    desc = TensorDesc.of(value)
    return f"{desc.dtype.value}{list(desc.shape)} strides={list(desc.strides)}"
