#!/usr/bin/env python3
"""Host cost of one call of a Python-defined kernel, per language and per argument count, on the
CPU: the whole call path (descriptors, the dispatch memo, the executor lookup, the checks, the
language's argument packer and the launch call) with the stub CUDA driver
(tests/support/stub_driver.cpp) in place of libcuda, which records each launch and returns.

Method: one kernel per language (a CUDA C++ zerojit.Kernel, a Triton kernel, a CuTeDSL kernel)
for each argument count (N pointer arguments and a size), generated here, warmed (compiled and
loaded on the stub's device), then timed: rounds alternate between every row (so drift of the
host hits them alike), each round N_CALLS back-to-back calls; the table gives the median over
rounds of the mean per call. Yardsticks in the same rounds: an empty Python function of the same
arguments (the interpreter's own share), zerojit's C++ hit path and the raw driver launch of the
example empty kernel (both timed in C++, on the stub). The stub only counts the launches here
(ZEROJIT_STUB_COUNT_ONLY), a few nanoseconds of its own; the count is checked against the calls
made. CPU timings: compare rows of one run only (docs/BENCHMARKS.md).

    python3 bench/host_cost_cpu.py --stub build/tests/libzerojit_stub_driver.so \\
        [--counts 3,6,12] [--rounds 9] [--calls 2000] [--json OUT.json]

Run it with an interpreter that has Triton and the CuTeDSL for their rows (the test environment
scripts/setup.sh makes); a language that is missing is left out, saying so.
"""

import argparse
import ctypes
import dataclasses
import functools
import importlib.util
import json
import os
import statistics
import sys
import tempfile
import textwrap
import time

TESTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python", "tests")


def arguments(count):
    return [f"a{i}" for i in range(count)]


@dataclasses.dataclass(frozen=True)
class Block:
    """Every benchmark kernel's key: one specialization each."""

    block: int


def space(zerojit, name):
    return zerojit.Space(
        lambda p: {name: zerojit.TensorDesc.contiguous(zerojit.DType.f32, (1024,))}
    ).choices("n", [1024])


class EmptyKernel:
    """What the benchmark kernel of every language has the same, mixed in before the language's
    zerojit class: the one key, dispatched from a0, and the warmup space that reaches it."""

    Key = Block

    def dispatch(self, a0):
        return Block(128)

    def warmup_space(self):
        import zerojit  # main() imports it, once the stub stands in for the driver

        return space(zerojit, "a0")


def language_module(folder, language, count, source):
    """Writes the module of a kernel the language loads by name (`folder` is on sys.path);
    returns its function's name as the kernel class's `fn` gives it."""
    module = f"bench_{language}_{count}"
    with open(os.path.join(folder, module + ".py"), "w", encoding="utf-8") as handle:
        handle.write(textwrap.dedent(source))
    return f"{module}:k"


def cuda_kernel(zerojit, count):
    names = arguments(count)
    source = (
        'extern "C" __global__ void k('
        + ", ".join(f"float* {name}" for name in names)
        + ", long long n) {}"
    )

    class Empty(EmptyKernel, zerojit.Kernel):
        name = f"bench.cuda.empty{count}"
        params = tuple((name, "tensor") for name in names) + (("n", "i64"),)

        def program(self, key):
            return zerojit.Program(source=source, function="k", key_as="none")

        def geometry(self, key, n):
            return zerojit.Geometry(grid=-(-n // key.block), block=key.block)

    return Empty


def triton_kernel(zerojit, count, folder):
    names = arguments(count)
    source = f"""
        import triton
        import triton.language as tl

        @triton.jit
        def k({", ".join(names)}, n, BLOCK: tl.constexpr):
            i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(a{count - 1} + i, tl.load(a0 + i, mask=i < n), mask=i < n)
        """
    function = language_module(folder, "triton", count, source)

    class Empty(EmptyKernel, zerojit.TritonKernel):
        name = f"bench.triton.empty{count}"
        fn = function

        def program(self, key):
            return zerojit.TritonProgram(
                signature={**{name: "*fp32" for name in names}, "n": "i32"},
                constexprs={"BLOCK": key.block},
            )

        def grid(self, key, n):
            return (-(-n // key.block),)

    return Empty


def cute_kernel(zerojit, count, folder):
    names = arguments(count)
    source = f"""
        import cuda.bindings.driver as cuda
        import cutlass
        import cutlass.cute as cute

        @cute.kernel
        def _copy(src: cute.Tensor, dst: cute.Tensor):
            i, _, _ = cute.arch.thread_idx()
            if i < cute.size(src):
                dst[i] = src[i]

        @cute.jit
        def k({", ".join(f"{n}: cute.Tensor" for n in names)}, n: cutlass.Int32,
              stream: cuda.CUstream):
            _copy(a0, a{count - 1}).launch(grid=[1, 1, 1], block=[32, 1, 1], stream=stream)
        """
    function = language_module(folder, "cute", count, source)

    class Empty(EmptyKernel, zerojit.CuteKernel):
        name = f"bench.cute.empty{count}"
        fn = function

        def program(self, key):
            vector = zerojit.CuteTensor(zerojit.DType.f32, (None,))
            return zerojit.CuteProgram({**{name: vector for name in names}, "n": "i32"})

    return Empty


def timed(call, calls):
    start = time.perf_counter()
    for _ in range(calls):
        call()
    return (time.perf_counter() - start) / calls * 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stub", required=True, help="the stub driver's shared library")
    parser.add_argument("--counts", default="3,6,12")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--json")
    options = parser.parse_args()
    stub = os.path.abspath(options.stub)
    # Before zerojit loads the driver: the stub in place of libcuda and of the CuTeDSL runtime.
    os.environ["ZEROJIT_TESTING_CUDA_DRIVER"] = stub
    os.environ["ZEROJIT_CUTE_DSL_RUNTIME"] = stub
    os.environ["ZEROJIT_STUB_COUNT_ONLY"] = "1"  # launches counted, not recorded
    sys.path.insert(0, TESTS)  # the stub's DLPack tensors (python/tests/stub_support.py)
    import stub_support
    import zerojit

    folder = tempfile.mkdtemp(prefix="zerojit-host-cost-")
    sys.path.insert(0, folder)
    rows, kernels = {}, []
    have = {
        "triton": importlib.util.find_spec("triton") is not None,
        "cutedsl": importlib.util.find_spec("cutlass") is not None,
    }
    for language, there in have.items():
        if not there:
            print(f"{language}: not installed in this interpreter, its rows are left out")
    for count in (int(c) for c in options.counts.split(",")):
        tensors = [stub_support.StubTensor((1024,)) for _ in range(count)]
        arguments_ = (*tensors, 1024)
        makers = [("CUDA C++", cuda_kernel(zerojit, count))]
        if have["triton"]:
            makers.append(("Triton", triton_kernel(zerojit, count, folder)))
        if have["cutedsl"]:
            makers.append(("CuTeDSL", cute_kernel(zerojit, count, folder)))
        for language, kernel_class in makers:
            kernels.append(kernel_class)
            kernel = kernel_class()
            rows[f"{language}, {count} tensors + n"] = functools.partial(kernel, *arguments_)

        def empty(*args):
            return None

        rows[f"empty Python function, {count} tensors + n"] = functools.partial(empty, *arguments_)
    for kernel_class in kernels:
        zerojit.register(kernel_class)
    report = zerojit.warmup_kernels(kernels, devices=[0], cache_dir="off", jobs=2)
    if not report["ok"]:
        print(report["summary"])
        return 1
    for name, call in rows.items():
        call()  # the first call fills the memo
    loop = zerojit._core.benchmark.launch_loop
    rows["C++ hit path, empty kernel (in C++)"] = None
    rows["raw driver launch, empty kernel (in C++)"] = None
    samples = {name: [] for name in rows}
    for _ in range(options.rounds):
        for name, call in rows.items():
            if call is None:
                through = "zerojit" if name.startswith("C++") else "driver"
                samples[name].append(loop(through, options.calls, 0, 0) * 1e6)
            else:
                samples[name].append(timed(call, options.calls))
    launched = ctypes.CDLL(stub).zerojit_stub_counted
    launched.restype = ctypes.c_ulonglong
    # Every timed call of a kernel row launched (the C++ rows launch besides).
    expected = len(kernels) * options.rounds * options.calls
    if launched() < expected:
        print(f"the stub counted {launched()} launches, fewer than the {expected} calls timed")
        return 1
    medians = {name: statistics.median(values) for name, values in samples.items()}
    width = max(len(name) for name in medians)
    print(f"{'row':<{width}}  us/call (median of {options.rounds} rounds)")
    for name, value in medians.items():
        print(f"{name:<{width}}  {value:7.3f}")
    if options.json:
        with open(options.json, "w", encoding="utf-8") as handle:
            json.dump({"median_us": medians, "samples_us": samples}, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
