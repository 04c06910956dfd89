#!/usr/bin/env python3
"""What a process pays to have the CuTeDSL test kernels' keys ready (python/tests/
cute_test_owners.py and the engine-style kernels of cute_engine_owners.py: 14 keys), each in a
fresh process, side by side in one run:

* `cute.compile` of every key in the process, as every serving process (every rank, every
  restart) does without zerojit: the DSL's import and the compiles (an engine whose kernel
  modules import the DSL pays the import before its warmup: the compiles alone);
* zerojit's warmup on a cold cache, with 1 and N compile workers: in a fresh process (the
  workers' interpreter imports the DSL when warmup starts), and in an engine's process after
  its model was built (the interpreter started when the kernels were registered, as
  registration does in a process with a GPU that has imported the DSL; `--model-seconds`
  stands for the build): compare the latter with the compiles alone;
* zerojit's warmup from its disk cache: what every later process pays (no compile, no DSL
  import).

Compile-only for sm_90a (no GPU needed, so it runs on the development machine; with a GPU the
from-disk row also loads each object).

    python3 bench/cutedsl_bench.py [--workers N] [--repeat R] [--model-seconds S] [--json F]

Exit codes: 0 measured; 77 no CuTeDSL.
"""

import argparse
import importlib.util
import json
import os
import statistics
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
    for cls in KERNELS:
        kernel = cls()
        for key in kernel.expand().keys:
            fields = [(f, k, getattr(key, f).value if k == "dtype" else getattr(key, f))
                      for f, k in kernel._fields]
            text = ", ".join(f"{f}={v}" for f, _, v in fields)
            request, _ = cute_kernels._specialize(kernel.name, text, kernel._source,
                                                  kernel.program(key))
            request = dict(json.loads(request), module=kernel._source.module,
                           qualname=kernel._source.qualname)
            fn = cute_compile._entry(request, compile_worker.Worker, cutlass)
            fakes = cute_compile._cute_fakes(request, cutlass, cute, runtime)
            cute.compile(fn, *fakes, options="--gpu-arch sm_90a")
    end = time.perf_counter()
    print(json.dumps({"seconds": end - start, "import_seconds": imported - start}))
"""

ZEROJIT = """
    import time
    start = time.perf_counter()
    for kernel in KERNELS:
        zerojit.register(kernel)
    if MODEL_SECONDS:
        zerojit.cute_kernels.prestart("sm_90a")
        time.sleep(MODEL_SECONDS)
        start = time.perf_counter()
    report = zerojit.warmup_kernels(cache_dir=CACHE, compile_only=True, arch="sm_90a",
                                    jobs=JOBS)
    print(json.dumps({"seconds": time.perf_counter() - start, "totals": report["totals"],
                      "dsl_imported": sys.modules.get("cutlass") is not None}))
"""


# Both owner modules, every key; the code run in each fresh process starts with this.
PRELUDE = """
import cute_engine_owners, cute_test_owners
KERNELS = cute_test_owners.KERNELS + cute_engine_owners.KERNELS
"""


def run(code):
    return lang_support.run_python(None, PRELUDE + textwrap.dedent(code))


def one_round(workers, model_seconds, scratch):
    """Every row once, in fresh processes: {row: its result}."""
    rows = {"cute.compile of every key, in the process": run(DIRECT)}

    def zerojit_row(jobs, cache, model=0):
        return run(
            f"CACHE, JOBS, MODEL_SECONDS = {cache!r}, {jobs}, {model}\n" + textwrap.dedent(ZEROJIT)
        )

    for jobs in (1, workers):
        rows[f"zerojit warmup, cold cache, {jobs} workers"] = zerojit_row(
            jobs, tempfile.mkdtemp(dir=scratch)
        )
    for jobs in (1, workers):
        rows[f"the same after the model's build, {jobs} workers"] = zerojit_row(
            jobs, tempfile.mkdtemp(dir=scratch), model_seconds
        )
    rows["zerojit warmup from the disk cache (a later process)"] = zerojit_row(
        workers, os.path.join(scratch, sorted(os.listdir(scratch))[0])
    )
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument(
        "--repeat", type=int, default=1, help="rounds of every row, interleaved (medians shown)"
    )
    parser.add_argument(
        "--model-seconds", type=float, default=3.0, help="the engine's model build (s)"
    )
    parser.add_argument("--json")
    args = parser.parse_args()
    if importlib.util.find_spec("cutlass") is None:
        print("cutedsl_bench: nvidia-cutlass-dsl is not installed", file=sys.stderr)
        return 77
    rounds = []
    with tempfile.TemporaryDirectory() as scratch:
        for _ in range(max(1, args.repeat)):
            rounds.append(one_round(args.workers, args.model_seconds, scratch))
    for name, row in rounds[0].items():
        seconds = sorted(r[name]["seconds"] for r in rounds)
        extra = ""
        if "import_seconds" in row:
            imports = sorted(r[name]["import_seconds"] for r in rounds)
            compiles = sorted(r[name]["seconds"] - r[name]["import_seconds"] for r in rounds)
            extra = (
                f"  (DSL import {statistics.median(imports):.2f} s, compiles "
                f"{statistics.median(compiles):.2f} s)"
            )
        elif "totals" in row:
            totals = row["totals"]
            extra = (
                f"  ({totals['compiled']} compiled, {totals['from_disk']} from disk; DSL "
                f"imported: {row['dsl_imported']})"
            )
        spread = f" [{seconds[0]:.2f}-{seconds[-1]:.2f}]" if len(seconds) > 1 else ""
        print(f"  {name:54s} {statistics.median(seconds):6.2f} s{spread}{extra}")
    if args.json:
        with open(args.json, "w") as out:
            json.dump(rounds, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
