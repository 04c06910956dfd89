"""What the owners of Python-defined kernel functions share (zerojit.TritonKernel,
zerojit.CuteKernel): the function's source read once, ``program(key)`` checked and interned
with the compile request the language makes of it, the call arguments dispatch (and grid) take
by name, and the compile of a key in a worker process.

A language's owner sets the class attributes below and defines ``_specialize(key_text,
program)`` (the request and the call's argument specs, which the base hands to the call path)
and ``_resolve(args)`` (a new call's slot and geometry).
"""

import inspect
import json

from zerojit import _core, languages
from zerojit.languages import kernel_source as _kernel_source
from zerojit.languages import workers as _workers
from zerojit.languages.owner import KernelOwner
from zerojit.runtime.errors import CompileError, InvalidArgument
from zerojit.runtime.types import TensorDesc

__all__ = [
    "FunctionKernel",
    "check_constexpr_values",
    "check_program_names",
    "compile_in_worker",
    "is_scalar",
]


class FunctionKernel(KernelOwner):
    """Base of the owners whose program is a decorated Python function."""

    fn = None

    _language = ""  # the core's name of the language: "triton", "cutedsl"
    _decorator = ""  # how the function is written, for messages: "@triton.jit"
    _program_type = None  # what program() returns: TritonProgram, CuteProgram
    _methods = False  # whether fn may be a method of a class ("module:Class.method")

    def _read_source(self):
        name = self.name
        if self.fn is None:
            raise InvalidArgument(
                f"kernel {name}: set `fn` to the {self._decorator} function or "
                "to 'package.module:function'",
                name,
                "fn",
            )
        module, qualname = _kernel_source.locate(self.fn, name)
        self._source = _kernel_source.read(module, qualname, name, self._methods)

    # --- What the owner writes ----------------------------------------------------------------
    def program(self, key):
        raise NotImplementedError(f"kernel {self.name}: define program()")

    # --- What the base provides ----------------------------------------------------------------
    __call__ = _core.kernel_call_method

    @property
    def runtime_params(self):
        """The call's parameters: the function's parameters but its constexprs (and stream)."""
        return self._source.runtime_params

    def _call_names(self, method, what, skip=0):
        """The call arguments a method (dispatch, grid) takes, by its parameter names after
        `skip` leading ones; each must be a runtime parameter of the function."""
        kernel, runtime = self.name, self._source.runtime_params
        names = []
        for param in list(inspect.signature(method).parameters.values())[skip:]:
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise InvalidArgument(
                    f"kernel {kernel}: {what}() must name the arguments it takes (no *args or "
                    f"**kwargs): each parameter is a runtime parameter of the {self._decorator} "
                    "function",
                    kernel,
                    what,
                )
            if param.name not in runtime:
                raise InvalidArgument(
                    f"kernel {kernel}: {what}() takes '{param.name}', which is no runtime "
                    f"parameter of the {self._decorator} function ({', '.join(runtime)})",
                    kernel,
                    what,
                )
            names.append(param.name)
        return tuple(names)

    def _make_launcher(self, seen_names):
        """The kernel's call path: its call takes the runtime parameters in order, and the
        ones in `seen_names` (what dispatch and the geometry read) key its memo."""
        runtime = list(self._source.runtime_params)
        self._seen_names = tuple(seen_names)
        self._launcher = _core.kernel_call(
            self._core,
            self._language,
            runtime,
            len(runtime),
            [param in seen_names for param in runtime],
            self._resolve,
        )

    def _seen(self, args):
        """The call arguments dispatch and the geometry read: tensors as TensorDesc."""
        return {
            param: value if is_scalar(value) else TensorDesc.of(value)
            for param, value in zip(self._source.runtime_params, args)
            if param in self._seen_names
        }

    def _intern(self, key, fields):
        program = self.program(key)
        if not isinstance(program, self._program_type):
            raise InvalidArgument(
                f"kernel {self.name}: program() returned {type(program).__name__}, not "
                f"zerojit.{self._program_type.__name__}",
                self.name,
                "program",
            )
        key_text = ", ".join(f"{field}={value}" for field, _, value in fields)
        request, spec = self._specialize(key_text, program)
        source = self._source
        slot = self._core.intern_language(
            fields,
            self._language,
            f"{source.module}:{source.qualname}",
            source.text,
            source.qualname,
            request,
        )
        self._set_spec(slot, spec)
        return slot

    def _specialize(self, key_text, program):
        """(the compile request, bytes of the identity; the call's argument specs)."""
        raise NotImplementedError

    def _set_spec(self, slot, spec):
        _core.kernel_call_set_spec(self._launcher, slot, json.dumps(spec))


def is_scalar(value):
    """Whether a call value reaches dispatch as itself (else, a DLPack producer, as a
    TensorDesc): None, bools, ints, floats and numpy's scalars."""
    return not hasattr(value, "__dlpack__")


def check_program_names(fail, source, named, constexprs, constexpr_kind):
    """Every name a program gives is a parameter of the function, and every constexpr
    parameter (written `constexpr_kind`) has a value."""
    params = [name for name, _ in source.params]
    for name in list(named) + list(constexprs):
        if name not in params:
            fail(
                name,
                f"the program names '{name}', which is no parameter of "
                f"{source.qualname} ({', '.join(params)})",
            )
    for name in source.constexpr_params:
        if name not in constexprs:
            fail(
                name,
                f"the {constexpr_kind} parameter '{name}' has no value in the program's constexprs",
            )


def check_constexpr_values(fail, constexprs):
    for name, value in constexprs.items():
        if not (value is None or isinstance(value, (bool, int, float, str))):
            fail(
                name, f"constexpr '{name}' = {value!r}: a value is an int, float, bool, str or None"
            )


def compile_in_worker(owner_type, kernel, key_text, arch, message, env=None):
    """One key compiled in a worker process by its language's compile module (the table in
    zerojit.languages): (image, entry, record, log, seconds). `message` is what the worker needs
    beyond the function's location and the request."""
    language = languages.row(owner_type._language)
    owner = KernelOwner.named(kernel)
    if not isinstance(owner, owner_type):
        raise CompileError(
            f"kernel {kernel} [{key_text}]: no zerojit.{owner_type.__name__} of "
            "this name is defined in this process",
            kernel,
            key_text,
        )
    source = owner._source
    message = {
        "compile": language.compile_file,
        "module": source.module,
        "qualname": source.qualname,
        "file": source.file,
        **message,
    }
    try:
        reply = _workers.run(message, language, env=env)
    except _workers.WorkerFailure as failure:
        raise type(failure)(
            f"kernel {kernel} [{key_text}] for {arch}: {failure}", kernel, key_text, failure.log
        ) from None
    if not reply["ok"]:
        raise CompileError(
            f"kernel {kernel} [{key_text}] for {arch}: {language.compiler} failed: "
            f"{reply['error']}",
            kernel,
            key_text,
            reply.get("log"),
        )
    return (
        reply["image"],
        reply["entry"],
        json.dumps(reply["record"]),
        reply["log"],
        reply["seconds"],
    )
