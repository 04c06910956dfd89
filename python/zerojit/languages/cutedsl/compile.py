"""CuTeDSL's compile, in a compile worker (zerojit.languages.compile_worker): one key's fakes
built, compiled with cute.compile for the arch the worker's DSL was imported for, exported with
export_to_c, and the export's header checked against the argument layout zerojit fills."""

import os
import re
import tempfile
import time

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


def _check_header(header, request, error):
    """The exported structs must be what the parent computed the call's layout from."""
    structs = {m.group(6): m for m in _TENSOR_STRUCT.finditer(header)}
    for name, spec in request["arguments"].items():
        if spec["kind"] != "tensor":
            continue
        found = structs.get(name)
        if found is None:
            raise error(f"the export declares no struct for tensor '{name}'")
        shapes = int(found.group(2) or 0)
        strides = int(found.group(4) or 0)
        expected_shapes = sum(1 for extent in spec["shape"] if extent < 0)
        if (
            (shapes, strides) != (expected_shapes, len(spec["dynamic_strides"]))
            or (shapes and found.group(1) != f"int{8 * spec['shape_bytes']}_t")
            or (strides and found.group(3) != f"int{8 * spec['stride_bytes']}_t")
        ):
            raise error(
                f"the export's struct of '{name}' ({found.group(0)!r}) is not the "
                "layout zerojit fills (this CuTeDSL's export ABI differs)"
            )


def compile(request, worker):
    """One key compiled: (image, entry, record, seconds, log) as a reply's fields; `worker`
    gives RequestError (a request this worker cannot serve) and kernel_function."""
    RequestError = worker.RequestError  # noqa: N806
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

    fn = worker.kernel_function(request)
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
    _check_header(header, request, RequestError)
    record = {"prefix": prefix, "dsl_version": version, "abi": "cute-dsl-export-c-1"}
    return {"image": image, "entry": prefix, "record": record, "seconds": seconds, "log": ""}
