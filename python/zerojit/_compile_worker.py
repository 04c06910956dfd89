"""The compile workers' side (zerojit._workers): a zygote that imports the compilers once and
forks workers, each answering requests on its own socket until it closes. Runs in its own
interpreter, never in a serving process.

A request is a dict whose "op" names the language ("triton"); a reply is a dict with "ok" and
either the result or "error" (with the exception's type name and any compiler log).
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
import tempfile
import time
import traceback

_HEADER = struct.Struct("<Q")
_PID = struct.Struct("<q")

# Triton's parameters after its own (3.5 and 3.6 append a global and a profile scratch
# pointer to every kernel); another minor version may differ, so it is refused by name.
_SUPPORTED_TRITON = ("3.5", "3.6")
_SCRATCH_POINTERS = 2


class RequestError(Exception):
    """A request this worker cannot serve; the message says why, `log` (when set) the traceback
    behind it."""

    def __init__(self, message, log=""):
        super().__init__(message)
        self.log = log


# The compilers a zygote preloads, by top-level module: what messages call them and how to
# install them.
_COMPILERS = {
    "triton": ("Triton", "pip install triton==3.6.0"),
    "cutlass": ("CuTeDSL (nvidia-cutlass-dsl)", "pip install nvidia-cutlass-dsl==4.8.1"),
}

# Terminal escape sequences (CSI such as colours, OSC such as links, and the short ones), which
# compilers put in their messages (CuTeDSL colours its errors even into a pipe): reports, logs
# and JSON documents keep plain text.
_ESCAPES = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[ -/]*[0-~])")


def _plain(text):
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


def _function(request):
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


def _compile_triton(request):
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    if not triton.__version__.startswith(_SUPPORTED_TRITON):
        raise RequestError(
            f"Triton {triton.__version__} is not supported (zerojit launches "
            f"Triton {', '.join(_SUPPORTED_TRITON)})"
        )
    if triton.__version__ != request["triton_version"]:
        raise RequestError(
            f"this worker imports Triton {triton.__version__}, the parent "
            f"identified Triton {request['triton_version']}"
        )
    fn = _function(request)
    if not isinstance(fn, triton.runtime.jit.JITFunction):
        raise RequestError(
            f"{request['module']}:{request['qualname']} is not a @triton.jit "
            f"function (it is a {type(fn).__name__})"
        )
    signature = request["signature"]
    if list(signature) != list(fn.arg_names):
        raise RequestError(
            f"the function's parameters are {list(fn.arg_names)}, the key's "
            f"program names {list(signature)}"
        )
    attrs = {
        (fn.arg_names.index(name),): [["tt.divisibility", 16]] for name in request["divisible"]
    }
    source = ASTSource(fn, signature, request["constexprs"], attrs)
    target = GPUTarget("cuda", request["capability"], 32)
    start = time.perf_counter()
    compiled = triton.compile(source, target=target, options=request["options"])
    seconds = time.perf_counter() - start
    metadata = compiled.metadata
    params = [signature[name] for name in fn.arg_names if signature[name] != "constexpr"]
    record = {
        "entry": metadata.name,
        "block_threads": 32 * metadata.num_warps,
        "shared_bytes": metadata.shared,
        "cluster_ctas": getattr(metadata, "num_ctas", 1),
        "programmatic_serialization": bool(getattr(metadata, "launch_pdl", False)),
        "cooperative": bool(getattr(metadata, "launch_cooperative_grid", False)),
        "params": params,
        "scratch_pointers": _SCRATCH_POINTERS,
        "global_scratch_bytes": getattr(metadata, "global_scratch_size", 0),
        "profile_scratch_bytes": getattr(metadata, "profile_scratch_size", 0),
        "tensor_descriptors": len(getattr(metadata, "tensordesc_meta", None) or []),
    }
    if record["global_scratch_bytes"] or record["profile_scratch_bytes"]:
        raise RequestError(
            f"the compiled kernel needs {record['global_scratch_bytes']} bytes of "
            "global scratch a program, which zerojit does not allocate yet"
        )
    if record["tensor_descriptors"]:
        raise RequestError(
            "the compiled kernel takes host TMA descriptors, which zerojit does not build yet"
        )
    return {
        "image": compiled.asm["cubin"],
        "entry": metadata.name,
        "record": record,
        "seconds": seconds,
        "log": "",
    }


# CuTeDSL's element types, by zerojit dtype name.
_CUTE_TYPES = {
    "f16": "Float16",
    "bf16": "BFloat16",
    "f32": "Float32",
    "f64": "Float64",
    "i8": "Int8",
    "i16": "Int16",
    "i32": "Int32",
    "i64": "Int64",
    "u8": "Uint8",
    "u16": "Uint16",
    "u32": "Uint32",
    "u64": "Uint64",
    "bool": "Boolean",
    "e4m3": "Float8E4M3FN",
    "e5m2": "Float8E5M2",
    "ue8m0": "Float8E8M0FNU",
}
_CUTE_SCALARS = {
    "i32": "Int32",
    "i64": "Int64",
    "f32": "Float32",
    "f64": "Float64",
    "bool": "Boolean",
}
# A tensor's struct in an exported header: typedef struct { void *data; intN_t
# dynamic_shapes[k]; intN_t dynamic_strides[m]; } <prefix>_Tensor_<name>_t;
_TENSOR_STRUCT = re.compile(
    r"typedef struct \{\s*void \*data;\s*(?:(int32_t|int64_t) dynamic_shapes\[(\d+)\];)?\s*"
    r"(?:(int32_t|int64_t) dynamic_strides\[(\d+)\];)?\s*\} (\w+)_Tensor_(\w+)_t;"
)


def _cute_fakes(request, cutlass, cute, runtime):
    """The fake arguments of the @cute.jit function, in its parameter order."""
    fakes = []
    for name, kind in request["params"]:
        if kind == "stream":
            fakes.append(runtime.make_fake_stream())
        elif kind == "constexpr":
            fakes.append(request["constexprs"][name])
        else:
            spec = request["arguments"][name]
            if spec["kind"] == "scalar":
                fakes.append(getattr(cutlass, _CUTE_SCALARS[spec["type"]])(0))
                continue
            shape = tuple(
                extent
                if extent >= 0
                else cute.sym_int(8 * spec["shape_bytes"], divisibility=spec["divisibility"])
                for extent in spec["shape"]
            )
            fakes.append(
                runtime.make_fake_compact_tensor(
                    getattr(cutlass, _CUTE_TYPES[spec["dtype"]]),
                    shape,
                    stride_order=tuple(spec["stride_order"]),
                    assumed_align=spec["assumed_align"],
                )
            )
    return fakes


def _check_header(header, request):
    """The exported structs must be what the parent computed the call's layout from."""
    structs = {m.group(6): m for m in _TENSOR_STRUCT.finditer(header)}
    for name, spec in request["arguments"].items():
        if spec["kind"] != "tensor":
            continue
        found = structs.get(name)
        if found is None:
            raise RequestError(f"the export declares no struct for tensor '{name}'")
        shapes = int(found.group(2) or 0)
        strides = int(found.group(4) or 0)
        expected_shapes = sum(1 for extent in spec["shape"] if extent < 0)
        if (
            (shapes, strides) != (expected_shapes, len(spec["dynamic_strides"]))
            or (shapes and found.group(1) != f"int{8 * spec['shape_bytes']}_t")
            or (strides and found.group(3) != f"int{8 * spec['stride_bytes']}_t")
        ):
            raise RequestError(
                f"the export's struct of '{name}' ({found.group(0)!r}) is not the "
                "layout zerojit fills (this CuTeDSL's export ABI differs)"
            )


def _compile_cutedsl(request):
    import importlib.metadata

    if os.environ.get("CUTE_DSL_ARCH") != request["arch"]:
        raise RequestError(
            f"this worker's CUTE_DSL_ARCH is {os.environ.get('CUTE_DSL_ARCH')}, "
            f"the request is for {request['arch']}"
        )
    version = importlib.metadata.version("nvidia-cutlass-dsl")
    if version != request["dsl_version"]:
        raise RequestError(
            f"this worker imports nvidia-cutlass-dsl {version}, the parent "
            f"identified {request['dsl_version']}"
        )
    import cutlass
    import cutlass.cute as cute
    from cutlass.cute import runtime

    fn = _function(request)
    fakes = _cute_fakes(request, cutlass, cute, runtime)
    options = f"--gpu-arch {request['arch']} {request['options']}".strip()
    start = time.perf_counter()
    compiled = cute.compile(fn, *fakes, options=options)
    seconds = time.perf_counter() - start
    prefix = request["prefix"]
    with tempfile.TemporaryDirectory() as folder:
        compiled.export_to_c(folder, "entry", function_prefix=prefix)
        with open(os.path.join(folder, "entry.o"), "rb") as handle:
            image = handle.read()
        with open(os.path.join(folder, "entry.h"), encoding="utf-8") as handle:
            header = handle.read()
    _check_header(header, request)
    record = {"prefix": prefix, "dsl_version": version, "abi": "cute-dsl-export-c-1"}
    return {"image": image, "entry": prefix, "record": record, "seconds": seconds, "log": ""}


_OPERATIONS = {"triton": _compile_triton, "cutedsl": _compile_cutedsl}


def _serve(request):
    operation = _OPERATIONS.get(request.get("op"))
    if operation is None:
        return {"ok": False, "type": "RequestError", "error": f"unknown request {request!r}"}
    try:
        return {"ok": True, **operation(request)}
    except RequestError as error:
        return {
            "ok": False,
            "type": "RequestError",
            "error": _plain(str(error)),
            "log": _plain(error.log),
        }
    except Exception as error:  # the compiler's own failure, reported with its traceback
        return {
            "ok": False,
            "type": type(error).__name__,
            # Stripped too: CuTeDSL's text starts with a newline, and a report's one-line
            # summary (WarmupError's) is the first line.
            "error": _plain(str(error) or repr(error)).strip(),
            "log": _plain(traceback.format_exc()),
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
    compiler, install = _COMPILERS.get(root, (root, f"install {root}"))
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
    (zerojit._workers), until the parent closes the control socket."""
    control = socket.socket(fileno=fd)
    failure = None
    for name in json.loads(os.environ.get("ZEROJIT_WORKER_PRELOAD", "[]")):
        try:
            importlib.import_module(name)
        except Exception as error:
            failure = _plain(_preload_failure(name, error)).encode("utf-8", "replace")
            break
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
            # text), which zerojit._workers raises, and the zygote stays to answer the next.
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
        return zygote(int(argv[2]))
    sys.stderr.write("zerojit._compile_worker: started by zerojit._workers only\n")
    return 2


if __name__ == "__main__":
    os.environ.setdefault("ZEROJIT_COMPILE_WORKER", "1")
    sys.exit(main(sys.argv))
