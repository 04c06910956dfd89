"""Triton's compile, in a compile worker (zerojit.languages.compile_worker): one key's request
compiled with triton.compile for the named capability, and the launch record zerojit needs to
launch the cubin without Triton."""

import time

# Triton's parameters after its own (3.5 and 3.6 append a global and a profile scratch
# pointer to every kernel); another minor version may differ, so it is refused by name.
SUPPORTED_TRITON = ("3.5", "3.6")
SCRATCH_POINTERS = 2


def compile(request, worker):
    """One key compiled: (image, entry, record, seconds, log) as a reply's fields; `worker`
    gives RequestError (a request this worker cannot serve) and kernel_function."""
    RequestError = worker.RequestError  # noqa: N806
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    if not triton.__version__.startswith(SUPPORTED_TRITON):
        raise RequestError(
            f"Triton {triton.__version__} is not supported (zerojit launches "
            f"Triton {', '.join(SUPPORTED_TRITON)})"
        )
    if triton.__version__ != request["triton_version"]:
        raise RequestError(
            f"this worker imports Triton {triton.__version__}, the parent "
            f"identified Triton {request['triton_version']}"
        )
    fn = worker.kernel_function(request)
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
        "scratch_pointers": SCRATCH_POINTERS,
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
