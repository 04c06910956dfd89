"""What the owners of Python-defined kernel functions share (zerojit.TritonKernel,
zerojit.CuteKernel): the function's source read once, ``program(key)`` checked and interned
with the compile request the language makes of it, the call arguments dispatch (and grid) take
by name, and the compile of a key in a worker process.

A language's owner sets the class attributes below and defines ``_specialize(key_text,
program)`` (the request and the call's argument specs, which the base hands to the call path)
and ``_resolve(args, options)`` (a new call's slot and geometry).

Call options are what an engine's launcher decides a kernel's specialization from without
passing it to the kernel (Triton's meta-parameters, ``kernel[grid](..., BLOCK=...)``, and the
configuration values behind them: a compress ratio, FP4 or not, the SM count behind a split
count). The owner declares them (``call_options``); a call passes them by keyword, and
dispatch and grid read them by name as they read the arguments, memoized with them.
"""

import collections.abc
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
    """Base of the owners whose program is a decorated Python function.

    ``call_options``: the keywords a call takes besides ``stream`` and passes to dispatch (and
    grid) only: a sequence of names (each must be given) and ``(name, default)`` pairs (may be
    left out), or a dict of name -> default."""

    fn = None
    call_options = ()

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

    @property
    def option_names(self):
        """The call options, in declaration order."""
        return self._options

    def _read_options(self):
        """The declared call options: names, and the defaults of those that have one."""
        kernel, declared = self.name, self.call_options
        if isinstance(declared, collections.abc.Mapping):
            entries = list(declared.items())
        elif isinstance(declared, str) or not isinstance(declared, collections.abc.Iterable):
            entries = None
        else:
            entries = [(e, _REQUIRED) if isinstance(e, str) else e for e in declared]
        if entries is None or not all(isinstance(e, tuple) and len(e) == 2 for e in entries):
            raise InvalidArgument(
                f"kernel {kernel}: call_options is a sequence of names and (name, default) "
                f"pairs, or a dict of name -> default; got {declared!r}",
                kernel,
                "call_options",
            )
        self._options, self._option_defaults = (), {}
        for name, default in entries:
            if not isinstance(name, str) or not name.isidentifier():
                raise InvalidArgument(
                    f"kernel {kernel}: call option {name!r} is no Python identifier",
                    kernel,
                    "call_options",
                )
            clash = (
                "is a runtime parameter of the function (it is passed as an argument)"
                if name in self._source.runtime_params
                else "is the call's stream"
                if name == "stream"
                else "is declared twice"
                if name in self._options
                else None
            )
            if clash:
                raise InvalidArgument(
                    f"kernel {kernel}: call option '{name}' {clash}", kernel, "call_options"
                )
            self._options += (name,)
            if default is not _REQUIRED:
                self._option_defaults[name] = default

    def _call_names(self, method, what, skip=0):
        """The call values a method (dispatch, grid) takes, by its parameter names after
        `skip` leading ones; each is a runtime parameter of the function or a call option."""
        kernel, runtime = self.name, self._source.runtime_params
        names = []
        for param in list(inspect.signature(method).parameters.values())[skip:]:
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise InvalidArgument(
                    f"kernel {kernel}: {what}() must name the arguments it takes (no *args or "
                    f"**kwargs): each parameter is a runtime parameter of the {self._decorator} "
                    "function or a call option",
                    kernel,
                    what,
                )
            if param.name not in runtime and param.name not in self._options:
                options = f"; call options: {', '.join(self._options)}" if self._options else ""
                raise InvalidArgument(
                    f"kernel {kernel}: {what}() takes '{param.name}', which is no runtime "
                    f"parameter of the {self._decorator} function ({', '.join(runtime)}) "
                    f"and no call option{options} (declare it in call_options)",
                    kernel,
                    what,
                )
            names.append(param.name)
        return tuple(names)

    def _make_launcher(self, seen_names, defaults=False):
        """The kernel's call path: its call takes the runtime parameters in order (with
        `defaults`, a trailing run of them that have defaults in the function may be left out)
        and the call options by keyword; the parameters in `seen_names` (what dispatch and the
        geometry read) and every option key its memo."""
        kernel, runtime = self.name, list(self._source.runtime_params)
        for option in self._options:
            if option not in seen_names:
                raise InvalidArgument(
                    f"kernel {kernel}: call option '{option}' is read by no method "
                    "(dispatch or grid takes it by name)",
                    kernel,
                    "call_options",
                )
        self._seen_names = tuple(seen_names)
        self._runtime_defaults = {}
        if defaults:
            for name in reversed(runtime):
                found = self._source.defaults.get(name)
                if found is None or not found.readable or not _scalar_default(found.value):
                    break
                self._runtime_defaults[name] = found.value
        optional = [n for n in runtime if n in self._runtime_defaults]
        self._launcher = _core.kernel_call(
            self._core,
            self._language,
            runtime,
            len(runtime) - len(optional),
            [param in seen_names for param in runtime],
            self._resolve,
            defaults=[self._runtime_defaults[n] for n in optional],
            options=[
                (n, n in self._option_defaults, self._option_defaults.get(n)) for n in self._options
            ],
        )

    def _seen(self, args, options=None):
        """The call values dispatch and the geometry read: tensors as TensorDesc, the
        function's defaults for arguments left out, and the call options."""
        values = dict(self._runtime_defaults)
        values.update(zip(self._source.runtime_params, args))
        values.update(options or {})
        return {
            name: value if is_scalar(value) else TensorDesc.of(value)
            for name, value in values.items()
            if name in self._seen_names
        }

    def call_key(self, *args, **options):
        """The key a call with these arguments and call options takes (dispatch over what it
        reads, as the call path runs it), launching nothing; tensors may be given as
        TensorDesc. What ``run``'s batteries check against the manifest."""
        kernel, runtime = self.name, self._source.runtime_params
        required = len(runtime) - len(self._runtime_defaults)
        if not required <= len(args) <= len(runtime):
            optional = len(runtime) - required
            raise InvalidArgument(
                f"kernel {kernel}: a call takes {len(runtime)} arguments ({', '.join(runtime)})"
                f"{f', the last {optional} optional' if optional else ''}, got {len(args)}",
                kernel,
                "args",
            )
        for name in options:
            if name not in self._options:
                raise InvalidArgument(
                    f"kernel {kernel}: '{name}' is no call option of this kernel "
                    f"({', '.join(self._options) or 'it has none'})",
                    kernel,
                    name,
                )
        chosen = {**self._option_defaults, **options}
        for name in self._options:
            if name not in chosen:
                raise InvalidArgument(
                    f"kernel {kernel}: call option '{name}' has no default: pass {name}=...",
                    kernel,
                    name,
                )
        seen = self._seen(args, chosen)
        return self.dispatch(**{n: seen[n] for n in self._dispatch_names})

    def _point_values(self, arguments):
        """A warmup space's point as a call's values: it may describe any runtime parameter
        and call option (what grid reads too, as a call passes it); options and arguments it
        leaves out take their defaults."""
        kernel = self.name
        known = set(self._source.runtime_params) | set(self._options)
        options = f" ({', '.join(self._options)})" if self._options else ""
        for name in arguments:
            if name not in known:
                raise InvalidArgument(
                    f"kernel {kernel}: the warmup space describes '{name}', which is no "
                    f"argument of the call ({', '.join(self._source.runtime_params)}) and no "
                    f"call option{options}",
                    kernel,
                    str(name),
                )
        values = {**self._runtime_defaults, **self._option_defaults, **arguments}
        return {n: v if is_scalar(v) else TensorDesc.of(v) for n, v in values.items()}

    def _point_call(self, method, what, names, values, leading=()):
        missing = [n for n in names if n not in values]
        if missing:
            raise InvalidArgument(
                f"kernel {self.name}: the warmup space's point describes no "
                f"{', '.join(repr(n) for n in missing)}, which {what}() reads",
                self.name,
                missing[0],
            )
        return method(*leading, **{n: values[n] for n in names})

    def _dispatch_point(self, point_arguments):
        if not isinstance(point_arguments, dict):
            return self.dispatch(*point_arguments)
        values = self._point_values(point_arguments)
        return self._point_call(self.dispatch, "dispatch", self._dispatch_names, values)

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


_REQUIRED = object()  # a call option without a default


def _scalar_default(value):
    """Whether a default can be passed as a call value (what a call's argument may be)."""
    return value is None or isinstance(value, (bool, int, float))


def is_scalar(value):
    """Whether a call value reaches dispatch as itself (else, a DLPack producer, as a
    TensorDesc): None, bools, ints, floats and numpy's scalars."""
    return not (hasattr(value, "__dlpack__") or hasattr(type(value), "__dlpack_c_exchange_api__"))


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
