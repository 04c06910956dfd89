"""The exceptions zerojit raises.

Each one mirrors a C++ exception of the library and carries its fields as attributes, so a
caller can act on the kernel, key or argument at fault without parsing the message.
"""


class Error(RuntimeError):
    """Base of every zerojit exception."""


class InvalidArgument(Error, ValueError):
    """A tensor or value a kernel cannot take. Nothing was launched.

    Attributes: ``kernel`` (e.g. ``"dsv4.dequant_gather"``) and ``argument`` (e.g. ``"logits"``).
    """

    def __init__(self, message, kernel=None, argument=None):
        super().__init__(message)
        self.kernel = kernel
        self.argument = argument


class ConfigError(Error, ValueError):
    """A malformed or inconsistent model or serving configuration; the message names the field."""


class UnavailableError(Error):
    """Something this process lacks: the CUDA driver, NVRTC, the CUDA headers, a GPU."""


class CudaError(Error):
    """A CUDA driver call failed. Attributes: ``call``, ``code``, ``error_name``."""

    def __init__(self, message, call=None, code=None, error_name=None):
        super().__init__(message)
        self.call = call
        self.code = code
        self.error_name = error_name


class CompileError(Error):
    """A kernel specialization did not compile (its compiler rejected it, or could not run).
    Attributes: ``kernel``, ``key``, ``log``."""

    def __init__(self, message, kernel=None, key=None, log=None):
        super().__init__(message)
        self.kernel = kernel
        self.key = key
        self.log = log


class RuntimeJitError(Error):
    """A compile or module load after warmup with the monitor in error mode, or one requested
    while the stream is capturing a CUDA graph (always an error).

    Attributes: ``kernel``, ``key`` and ``descriptors`` (the runtime tensors that asked for it).
    """

    def __init__(self, message, kernel=None, key=None, descriptors=None):
        super().__init__(message)
        self.kernel = kernel
        self.key = key
        self.descriptors = descriptors


class LaunchError(Error):
    """The packed arguments do not match the compiled kernel. Nothing was launched."""


# Shown as zerojit.<Name> in tracebacks: the package re-exports them all.
for _error_class in (
    Error,
    InvalidArgument,
    ConfigError,
    UnavailableError,
    CudaError,
    CompileError,
    RuntimeJitError,
    LaunchError,
):
    _error_class.__module__ = "zerojit"
del _error_class


class WarmupError(Error):
    """A warmup in which some keys failed; the message names every one, and the monitor was
    not armed (its later reports would blame the space for keys that never compiled).

    Attributes: ``failed`` (a list of ``{"kernel", "key", "arch", "error"}``) and ``report``
    (the whole warmup report, as ``warmup()`` returns it).
    """

    def __init__(self, message, failed=None, report=None):
        super().__init__(message)
        self.failed = failed or []
        self.report = report


class RankAgreementError(WarmupError):
    """The ranks of a group (``zerojit.RankGroup``) did not warm up the same kernels: a rank
    warmed other keys, other programs, for another arch or with another compiler, failed, or
    never published its warmup before the group's timeout. Raised on every rank, with the same
    message, so that no rank goes on to serve while another would compile.

    Attributes: ``ranks`` (the ranks at fault), ``missing`` (those that never published),
    ``differences`` (per group of equal ranks at fault: ``{"ranks", "reference", "cause",
    "keys"}``, ``keys`` every differing ``{"kernel", "key", "arch", "rank_identity",
    "reference_identity"}``, None where the key is absent)
    and ``report`` (this rank's warmup report).
    """

    def __init__(self, message, ranks=None, missing=None, differences=None, report=None):
        super().__init__(message, [], report)
        self.ranks = list(ranks or [])
        self.missing = list(missing or [])
        self.differences = list(differences or [])


class RankRuntimeJitError(RuntimeJitError):
    """Another rank of a watched group (``RankGroup.watch``) met a runtime JIT that stops it,
    so this rank stops too rather than wait in its next collective. Raised in the main thread,
    asynchronously (as a Ctrl-C is). Attributes: ``rank`` (the rank that missed), ``kernel``,
    ``key`` and ``kind`` ("compile", "load" or "specialization")."""

    def __init__(self, message, rank=None, kernel=None, key=None, kind=None):
        super().__init__(message, kernel, key)
        self.rank = rank
        self.kind = kind


for _error_class in (RankAgreementError, RankRuntimeJitError):
    _error_class.__module__ = "zerojit"
del _error_class
