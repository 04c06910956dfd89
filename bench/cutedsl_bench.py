#!/usr/bin/env python3
"""What a process pays to have the CuTeDSL test kernels' keys (python/tests/cute_test_owners.py)
ready, each in a fresh process, side by side in one run:

* `cute.compile` of every key in the process, as every serving process (every rank, every
  restart) does without zerojit: the DSL's import and the compiles;
* zerojit's warmup on a cold cache, with 1 and N compile workers;
* zerojit's warmup from its disk cache: what every later process pays (no compile, no DSL
  import).

Compile-only for sm_90a (no GPU needed, so it runs on the development machine; with a GPU the
from-disk row also loads each object).

    python3 bench/cutedsl_bench.py [--workers N] [--json OUT.json]

Exit codes: 0 measured; 77 no CuTeDSL.
"""

import argparse
import importlib.util
import json
import os
import sys
import tempfile
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.join(os.path.dirname(HERE), "python", "tests")
sys.path[:0] = [TESTS]

import lang_support  # noqa: E402

# Every key with cute.compile in this process, as zerojit's worker compiles it (the same fakes).
DIRECT = """
    import os, time
    start = time.perf_counter()
    os.environ["CUTE_DSL_ARCH"] = "sm_90a"
    import cutlass, cutlass.cute as cute
    from cutlass.cute import runtime
    from zerojit import cute_kernels
    from zerojit.languages import compile_worker
    from zerojit.languages.cutedsl import compile as cute_compile
    imported = time.perf_counter()
    for cls in owners.KERNELS:
        kernel = cls()
        for key in kernel.expand().keys:
            fields = [(f, k, getattr(key, f).value if k == "dtype" else getattr(key, f))
                      for f, k in kernel._fields]
            text = ", ".join(f"{f}={v}" for f, _, v in fields)
            request, _ = cute_kernels._specialize(kernel.name, text, kernel._source,
                                                  kernel.program(key))
            fn = compile_worker.kernel_function({"module": kernel._source.module,
                                            "qualname": kernel._source.qualname})
            fakes = cute_compile._cute_fakes(json.loads(request), cutlass, cute, runtime)
            cute.compile(fn, *fakes, options="--gpu-arch sm_90a")
    end = time.perf_counter()
    print(json.dumps({"seconds": end - start, "import_seconds": imported - start}))
"""

ZEROJIT = """
    import time
    start = time.perf_counter()
    owners.register_all()
    report = zerojit.warmup_kernels(cache_dir=CACHE, compile_only=True, arch="sm_90a",
                                    jobs=JOBS)
    print(json.dumps({"seconds": time.perf_counter() - start, "totals": report["totals"],
                      "dsl_imported": sys.modules.get("cutlass") is not None}))
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--json")
    args = parser.parse_args()
    if importlib.util.find_spec("cutlass") is None:
        print("cutedsl_bench: nvidia-cutlass-dsl is not installed", file=sys.stderr)
        return 77
    rows = {
        "cute.compile of every key, in the process": lang_support.run_python(
            "cute_test_owners", DIRECT
        )
    }
    with tempfile.TemporaryDirectory() as scratch:
        for workers in (1, args.workers):
            cache = os.path.join(scratch, f"cache-{workers}")
            code = f"CACHE, JOBS = {cache!r}, {workers}\n" + textwrap.dedent(ZEROJIT)
            rows[f"zerojit warmup, cold cache, {workers} workers"] = lang_support.run_python(
                "cute_test_owners", code
            )
        code = f"CACHE, JOBS = {cache!r}, {args.workers}\n" + textwrap.dedent(ZEROJIT)
        rows["zerojit warmup from the disk cache (a later process)"] = lang_support.run_python(
            "cute_test_owners", code
        )
    for name, row in rows.items():
        extra = ""
        if "import_seconds" in row:
            extra = f"  (DSL import {row['import_seconds']:.2f} s)"
        elif "totals" in row:
            totals = row["totals"]
            extra = (
                f"  ({totals['compiled']} compiled, {totals['from_disk']} from disk; DSL "
                f"imported: {row['dsl_imported']})"
            )
        print(f"  {name:58s} {row['seconds']:7.2f} s{extra}")
    if args.json:
        with open(args.json, "w") as out:
            json.dump(rows, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
