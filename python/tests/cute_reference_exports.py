#!/usr/bin/env python3
"""Exports each key of the tests' CuTeDSL kernels with CuTeDSL alone (cute.compile of the same
function with the same fakes, then export_to_c), without zerojit: the reference that
lang_gpu_cutedsl.py calls through NVIDIA's runtime directly, beside zerojit's call of its own
entries. Also builds zerojit's pack of the same keys. Run where the DSL is installed (no GPU
needed):

    python3 python/tests/cute_reference_exports.py OUT_DIR [ARCH]

OUT_DIR/pack is zerojit's cache root; OUT_DIR/reference/<prefix>.{o,h} the reference objects,
and OUT_DIR/reference/keys.json what each was compiled for."""

import json
import os
import sys

TESTS = os.path.dirname(os.path.abspath(__file__))


def main():
    out, arch = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 else "sm_90a")
    os.environ["CUTE_DSL_ARCH"] = arch  # before the DSL is imported, as zerojit's workers do
    sys.path.insert(0, TESTS)
    import cute_test_owners as owners
    import zerojit
    from zerojit import cute_kernels
    from zerojit.languages import compile_worker
    from zerojit.languages.cutedsl import compile as cute_compile

    owners.register_all()
    report = zerojit.warmup_kernels(
        cache_dir=os.path.join(out, "pack"), compile_only=True, arch=arch
    )
    reference = os.path.join(out, "reference")
    os.makedirs(reference, exist_ok=True)
    keys = []
    for kernel_class in owners.KERNELS:
        kernel = kernel_class()
        for key in kernel.expand().keys:
            fields = [
                (f, k, getattr(key, f) if k != "dtype" else getattr(key, f).value)
                for f, k in kernel._fields
            ]
            key_text = ", ".join(f"{f}={v}" for f, _, v in fields)
            request, _ = cute_kernels._specialize(
                kernel.name, key_text, kernel._source, kernel.program(key)
            )
            message = json.loads(request)
            import cutlass
            import cutlass.cute as cute
            from cutlass.cute import runtime

            source = kernel._source
            # The entry as the compile worker builds it (a function, or a configured object's
            # method).
            fn = cute_compile._entry(
                dict(message, module=source.module, qualname=source.qualname, file=source.file),
                compile_worker.Worker,
                cutlass,
            )
            fakes = cute_compile._cute_fakes(message, cutlass, cute, runtime)
            compiled = cute.compile(fn, *fakes, options=f"--gpu-arch {arch}")
            compiled.export_to_c(reference, message["prefix"], function_prefix=message["prefix"])
            keys.append(
                {
                    "kernel": kernel.name,
                    "key": key_text,
                    "prefix": message["prefix"],
                    "arguments": message["arguments"],
                    "params": message["params"],
                }
            )
    with open(os.path.join(reference, "keys.json"), "w") as handle:
        json.dump(keys, handle, indent=1)
    print(report["summary"])
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
