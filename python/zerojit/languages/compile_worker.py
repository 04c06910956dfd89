"""The compile workers' side (zerojit.languages.workers): a zygote that imports the compilers
once and forks workers, each answering requests on its own socket until it closes. Runs in its
own interpreter, never in a serving process.

A request is a dict whose "compile" names its language's compile module (a file: the table in
zerojit.languages), which compiles it. A reply is a dict with "ok" and either the result
or "error" (with the exception's type name and any compiler log).
"""

import importlib
import importlib.util
import json
import os
import pickle
import re
import signal
import socket
import struct
import sys
import traceback

_HEADER = struct.Struct("<Q")
_PID = struct.Struct("<q")


class RequestError(Exception):
    """A request this worker cannot serve; the message says why, `log` (when set) the traceback
    behind it."""

    def __init__(self, message, log=""):
        super().__init__(message)
        self.log = log


# Terminal escape sequences (CSI such as colours, OSC such as links, and the short ones), which
# compilers put in their messages (CuTeDSL colours its errors even into a pipe): reports, logs
# and JSON documents keep plain text.
_ESCAPES = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[ -/]*[0-~])")


def plain(text):
    return _ESCAPES.sub("", text) if text else text


def _where(error):
    """' (at file:line: code)' for the line an exception was raised at: the last frame of its
    traceback, or the line a SyntaxError names; '' when neither is known."""
    if isinstance(error, SyntaxError) and error.filename:
        file, line, code = error.filename, error.lineno, error.text
    else:
        frames = traceback.extract_tb(error.__traceback__)
        if not frames:
            return ""
        file, line, code = frames[-1].filename, frames[-1].lineno, frames[-1].line
    code = (code or "").strip()
    return f" (at {file}:{line}" + (f": {code}" if code else "") + ")"


def kernel_function(request):
    """The @triton.jit (or @cute.jit) function a request names, imported here."""
    module_name, qualname, file = request["module"], request["qualname"], request.get("file")
    if module_name == "__main__" and not file:
        raise RequestError("the kernel's module is __main__ and its file is unknown")
    try:
        if module_name == "__main__":
            # The parent's script, under another name: its `if __name__ == "__main__":` block
            # does not run here.
            spec = importlib.util.spec_from_file_location("__zerojit_main__", file)
            module = importlib.util.module_from_spec(spec)
            sys.modules["__zerojit_main__"] = module
            spec.loader.exec_module(module)
        else:
            module = importlib.import_module(module_name)
    except Exception as error:
        # Said as the module's failure, at the line that raised it: "No module named 'torch'"
        # alone does not say that it is the kernel's module that imports it.
        what = f"{module_name} ({file})" if module_name == "__main__" else module_name
        raise RequestError(
            f"importing the kernel's module {what} failed: {type(error).__name__}: "
            f"{error}{_where(error)}",
            traceback.format_exc(),
        ) from None
    try:
        return getattr(module, qualname)
    except AttributeError:
        raise RequestError(f"module {module_name} has no attribute {qualname}") from None


class Worker:
    """What a language's compile module may use of the worker it runs in."""

    RequestError = RequestError
    kernel_function = staticmethod(kernel_function)


_compilers = {}  # compile file -> its module, loaded once per worker


def _compiler(path):
    """A language's compile module, loaded from its file (the table in zerojit.languages):
    without importing zerojit, as the worker itself is run."""
    module = _compilers.get(path)
    if module is None:
        spec = importlib.util.spec_from_file_location(f"zerojit_compile_{len(_compilers)}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _compilers[path] = module
    return module


def _serve(request):
    path = request.get("compile")
    if not isinstance(path, str) or not os.path.isfile(path):
        return {"ok": False, "type": "RequestError", "error": f"unknown request {request!r}"}
    try:
        return {"ok": True, **_compiler(path).compile(request, Worker)}
    except RequestError as error:
        return {
            "ok": False,
            "type": "RequestError",
            "error": plain(str(error)),
            "log": plain(error.log),
        }
    except Exception as error:  # the compiler's own failure, reported with its traceback
        return {
            "ok": False,
            "type": type(error).__name__,
            # Stripped too: CuTeDSL's text starts with a newline, and a report's one-line
            # summary (WarmupError's) is the first line.
            "error": plain(str(error) or repr(error)).strip(),
            "log": plain(traceback.format_exc()),
        }


def _receive(channel, size):
    data = b""
    while len(data) < size:
        chunk = channel.recv(size - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def serve(channel):
    """Answers the requests of one socket until it closes."""
    while True:
        header = _receive(channel, _HEADER.size)
        if header is None:
            return
        body = _receive(channel, _HEADER.unpack(header)[0])
        if body is None:
            return
        reply = pickle.dumps(_serve(pickle.loads(body)), protocol=pickle.HIGHEST_PROTOCOL)
        channel.sendall(_HEADER.pack(len(reply)) + reply)


def _preload_failure(name, error):
    """Why a zygote cannot compile: the compiler module `name` did not import (`error`), said of
    the interpreter the workers run, which may not be the one the parent's checks looked at."""
    root = name.partition(".")[0]
    compiler, install = json.loads(os.environ.get("ZEROJIT_WORKER_COMPILER", "null")) or (
        root,
        f"install {root}",
    )
    interpreter = sys.executable or "this Python"
    if isinstance(error, ModuleNotFoundError) and error.name == root:
        return (
            f"{compiler} is not installed for {interpreter}, the interpreter the compile workers "
            f"run (import {name}: {error}); {install} into that interpreter"
        )
    return (
        f"{compiler} cannot be imported by {interpreter}, the interpreter the compile workers "
        f"run: import {name} failed: {type(error).__name__}: {error}{_where(error)}"
    )


def zygote(fd):
    """Imports the compilers once, then forks a worker for every socket the parent sends
    (zerojit.languages.workers), until the parent closes the control socket."""
    control = socket.socket(fileno=fd)
    failure = None
    for name in json.loads(os.environ.get("ZEROJIT_WORKER_PRELOAD", "[]")):
        try:
            importlib.import_module(name)
        except Exception as error:
            failure = plain(_preload_failure(name, error)).encode("utf-8", "replace")
            break
    prepare = os.environ.get("ZEROJIT_WORKER_PREPARE")
    if failure is None and prepare:
        # What every worker would do first, done once before the forks (a language's compile
        # module may define prepare()). Only an optimization: a failure leaves it to the workers.
        try:
            getattr(_compiler(prepare), "prepare", lambda: None)()
        except Exception:
            traceback.print_exc()
    scratch = os.environ.get("ZEROJIT_WORKER_SCRATCH") or "."
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # workers are reaped by the system
    while True:
        try:
            message, fds, _, _ = socket.recv_fds(control, 1, 1)
        except OSError:
            return 0
        if not message or not fds:
            return 0
        if failure is not None:
            # No worker can compile: every fork request is answered with why (pid -1, then the
            # text), which zerojit.languages.workers raises; the zygote stays for the next one.
            for descriptor in fds:
                os.close(descriptor)
            control.sendall(_PID.pack(-1) + _HEADER.pack(len(failure)) + failure)
            continue
        pid = os.fork()
        if pid == 0:
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the compilers wait for ptxas
            control.close()
            # Triton's own cache is private to the worker and removed with the zygote's scratch
            # folder: zerojit's tiers are the cache, and a compile that reaches a worker must
            # really compile.
            os.environ["TRITON_CACHE_DIR"] = os.path.join(scratch, f"triton-{os.getpid()}")
            try:
                serve(socket.socket(fileno=fds[0]))
            finally:
                os._exit(0)
        os.close(fds[0])
        control.sendall(_PID.pack(pid))


def main(argv):
    if len(argv) == 3 and argv[1] == "zygote":
        status = zygote(int(argv[2]))
        # The parent waits for the zygote at the end of every warmup: an interpreter that has
        # imported a compiler takes a tenth of a second or more to finalize (CuTeDSL's MLIR),
        # and the zygote has nothing to flush but its standard error.
        sys.stderr.flush()
        os._exit(status)
    sys.stderr.write(
        "zerojit.languages.compile_worker: started by zerojit.languages.workers only\n"
    )
    return 2


if __name__ == "__main__":
    os.environ.setdefault("ZEROJIT_COMPILE_WORKER", "1")
    sys.exit(main(sys.argv))
