"""CuTeDSL's compile, in a compile worker (zerojit.languages.compile_worker): one key's fakes
built, compiled with cute.compile for the arch the worker's DSL was imported for, exported with
export_to_c, and the export's header checked against the argument layout zerojit fills. The
request is what zerojit.languages.cutedsl.program made of the key's program."""

import os
import re
import tempfile
import time

# CuTeDSL's element types, by zerojit dtype name (also what a DType constexpr becomes).
CUTE_TYPES = {
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


# The entry's argument list: void *args[N] = {...};
_ARGS = re.compile(r"void \*args\[(\d+)\]")


def decode(value, cutlass):
    """A constexpr or constructor value as the owner gave it (program.encode_constant)."""
    if isinstance(value, dict):
        return getattr(cutlass, value["cutlass"])
    if isinstance(value, list):
        return tuple(decode(item, cutlass) for item in value)
    return value


def _fake_tensor(spec, named, cutlass, cute, runtime):
    """One tensor's fake: its named symbols are the program's shared cute.sym_int objects (the
    DSL tells a shared extent by the object's identity), every other dynamic entry its own."""

    def dynamic(symbol, width, divisibility):
        return named[symbol] if symbol >= 0 else cute.sym_int(width, divisibility=divisibility)

    dtype = getattr(cutlass, CUTE_TYPES[spec["dtype"]])
    shape = tuple(
        v if v >= 0 else dynamic(s, 8 * spec["shape_bytes"], d)
        for v, s, d in zip(spec["shape"], spec["shape_sym"], spec["shape_div"])
    )
    if spec["stride"] is None:
        return runtime.make_fake_compact_tensor(
            dtype,
            shape,
            stride_order=tuple(spec["stride_order"]),
            assumed_align=spec["assumed_align"],
        )
    stride = tuple(
        v if d not in spec["dynamic_strides"] else dynamic(s, 64, div)
        for d, (v, s, div) in enumerate(zip(spec["stride"], spec["stride_sym"], spec["stride_div"]))
    )
    return runtime.make_fake_tensor(
        dtype, shape, stride=stride, assumed_align=spec["assumed_align"]
    )


def _cute_fakes(request, cutlass, cute, runtime):
    """The fake arguments of the @cute.jit entry, in its parameter order."""
    named = [
        cute.sym_int(s["width"], divisibility=s["divisibility"], symbol=s["name"])
        for s in request.get("symbols", [])
    ]
    fakes = []
    for name, kind in request["params"]:
        if kind == "stream":
            fakes.append(runtime.make_fake_stream())
        elif kind == "constexpr":
            fakes.append(decode(request["constexprs"][name], cutlass))
        else:
            spec = request["arguments"][name]
            if spec["kind"] == "none":
                fakes.append(None)
            elif spec["kind"] == "scalar":
                fakes.append(getattr(cutlass, _CUTE_SCALARS[spec["type"]])(0))
            else:
                fakes.append(_fake_tensor(spec, named, cutlass, cute, runtime))
    return fakes


def _check_header(header, request, error):
    """The exported structs and argument count must be what the parent computed the call's
    layout from."""
    structs = {m.group(6): m for m in _TENSOR_STRUCT.finditer(header)}
    count = 1  # the return code
    for name, spec in request["arguments"].items():
        count += spec["kind"] != "none"
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
    count += sum(1 for _, kind in request["params"] if kind == "stream")
    declared = _ARGS.search(header)
    if declared is None or int(declared.group(1)) != count:
        raise error(
            f"the export's entry takes {declared.group(1) if declared else 'no'} arguments where "
            f"zerojit passes {count} (this CuTeDSL's export ABI differs)"
        )


def _export(compiled, prefix):
    """(the exported object, the header text the layout is checked against). export_to_c writes
    the object dump_to_object(prefix) returns and a header whose structs and argument list come
    from the compiled function's c_header_arguments (under a placeholder prefix): taken from
    there directly, the object is the same bytes, and the export's second copy of the module
    and its files (about a fifth of an export) are saved. A DSL without them exports to files."""
    declared = getattr(compiled, "c_header_arguments", None)
    if (
        declared
        and isinstance(getattr(declared, "declarations", None), list)
        and isinstance(getattr(declared, "packed_args", None), list)
        and callable(getattr(compiled, "dump_to_object", None))
    ):
        count = len(declared.packed_args) + 1  # and the return code
        return compiled.dump_to_object(prefix), "\n".join(
            declared.declarations + [f"void *args[{count}]"]
        )
    with tempfile.TemporaryDirectory() as folder:
        compiled.export_to_c(folder, "entry", function_prefix=prefix)
        with open(os.path.join(folder, "entry.o"), "rb") as handle:
            image = handle.read()
        with open(os.path.join(folder, "entry.h"), encoding="utf-8") as handle:
            return image, handle.read()


def _entry(request, worker, cutlass):
    """The @cute.jit entry: a function, or a method of an object built as the program says."""
    qualname = request["qualname"]
    if "." not in qualname:
        return worker.kernel_function(request)
    owner, method = qualname.split(".", 1)
    cls = worker.kernel_function(dict(request, qualname=owner))
    init = {name: decode(value, cutlass) for name, value in request.get("init", {}).items()}
    try:
        instance = cls(**init)
    except Exception as failure:
        raise worker.RequestError(
            f"{owner}(**{init!r}), the entry's object, could not be built: "
            f"{type(failure).__name__}: {failure}"
        ) from None
    return getattr(instance, method)


_engine_made = [False]  # whether this process has made a JIT engine (see _compile)


def prepare():
    """Run once by the workers' zygote after the DSL's import, before it forks workers: one
    trivial host-only compile, which makes the JIT engine whose native-target setup every
    export needs, so that each worker compiles without one from its first key (see _compile).
    Leaves no thread behind (checked on nvidia-cutlass-dsl 4.8.1), so the forks stay safe."""
    import cutlass
    import cutlass.cute as cute

    @cute.jit
    def zerojit_prepare(value: cutlass.Int32):
        pass

    cute.compile(zerojit_prepare, cutlass.Int32(0))
    _engine_made[0] = True


def _compile(cute, fn, fakes, options):
    """cute.compile, without the in-process JIT engine once the process has made one: the
    engine only serves a call in this process and is about half of a small kernel's compile,
    and the export (a separate object) is the same byte for byte (checked on
    nvidia-cutlass-dsl 4.8.1). A process must have made one engine first: the export's object
    writer needs the native target the engine sets up ("Failed to dump object file with PIC
    relocation" otherwise); prepare() made it in the zygote, else the first compile makes it. A
    DSL that does not take the option compiles with the engine."""
    if _engine_made[0]:
        try:
            return cute.compile(fn, *fakes, options=options, no_jit_engine=True)
        except TypeError as error:
            if "no_jit_engine" not in str(error):
                raise
    compiled = cute.compile(fn, *fakes, options=options)
    _engine_made[0] = True
    return compiled


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

    fn = _entry(request, worker, cutlass)
    fakes = _cute_fakes(request, cutlass, cute, runtime)
    options = f"--gpu-arch {request['arch']} {request['options']}".strip()
    start = time.perf_counter()
    compiled = _compile(cute, fn, fakes, options)
    seconds = time.perf_counter() - start
    image, header = _export(compiled, request["prefix"])
    _check_header(header, request, RequestError)
    prefix = request["prefix"]
    record = {"prefix": prefix, "dsl_version": version, "abi": "cute-dsl-export-c-1"}
    return {"image": image, "entry": prefix, "record": record, "seconds": seconds, "log": ""}
