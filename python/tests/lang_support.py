"""What the kernel-language tests share: a fresh interpreter that imports zerojit and a test
kernels' owner module, and the compile-only warmup run in one, reporting its totals, the compiles
the owners counted and whether the compiler was imported."""

import contextlib
import importlib.util
import json
import os
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest

TESTS = os.path.dirname(os.path.abspath(__file__))

HAVE_TRITON = importlib.util.find_spec("triton") is not None
NEEDS_TRITON = unittest.skipUnless(
    HAVE_TRITON,
    "Triton is not installed in this interpreter (scripts/setup.sh installs the "
    "pinned one in <build>/python-test-env)",
)
HAVE_DSL = importlib.util.find_spec("cutlass") is not None
NEEDS_DSL = unittest.skipUnless(
    HAVE_DSL,
    "nvidia-cutlass-dsl is not installed in this interpreter (scripts/setup.sh installs "
    "the pinned one in <build>/python-test-env)",
)


def environment(env=None):
    """This environment with the tests' folder first on PYTHONPATH, and `env` on top."""
    out = dict(os.environ)
    out["PYTHONPATH"] = os.pathsep.join(
        [TESTS, *[p for p in out.get("PYTHONPATH", "").split(os.pathsep) if p]]
    )
    out.update(env or {})
    return out


def run_python(owners, code, env=None, timeout=900):
    """`code` in a fresh interpreter where `owners` (a module name; None: none) is imported as
    `owners`; its result is the JSON document it prints last."""
    prelude = "import json, sys, zerojit\n" + (f"import {owners} as owners\n" if owners else "")
    done = subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=environment(env),
    )
    if done.returncode != 0:
        raise AssertionError(
            f"subprocess failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
        )
    return json.loads(done.stdout.strip().splitlines()[-1])


WARMUP = """
owners.register_all()
report = zerojit.warmup_kernels(cache_dir=CACHE, compile_only=True, arch=ARCH, jobs=JOBS)
compiled = sum(zerojit.monitor.counters()[k.name]["compiles"] for k in owners.KERNELS)
print(json.dumps({"totals": report["totals"], "compiles": compiled, "keys": report["keys"],
                  "compiler_imported": sys.modules.get(COMPILER) is not None}))
"""


def manifest_keys(register_all):
    """This process's manifest after ``register_all()``: its keys by kernel, and the manifest
    (the registrations cleared before and after)."""
    import zerojit  # here only: the rest of this module runs zerojit in subprocesses

    zerojit.clear_registrations()
    register_all()
    try:
        manifest = zerojit.kernel_manifest()
    finally:
        zerojit.clear_registrations()
    by_kernel = {}
    for entry in manifest["entries"]:
        by_kernel.setdefault(entry["kernel"], []).append(entry["key"])
    return by_kernel, manifest


def warmup_code(compiler, cache, arch, jobs=2, prelude=""):
    """A compile-only warmup of every kernel of `owners` into `cache`, for run_python."""
    return (
        prelude + f"CACHE, ARCH, JOBS, COMPILER = {cache!r}, {arch!r}, {jobs}, "
        f"{compiler!r}\n" + WARMUP
    )


GUARD = """
out = {}
compile_foreign()  # before warmup: allowed, counted
zerojit.monitor.set_mode("error")
zerojit.monitor.arm()
try:
    compile_foreign()
    out["refused"] = None
except zerojit.RuntimeJitError as error:
    out["refused"] = str(error)
zerojit.monitor.GUARD(False)
compile_foreign()  # the guard off: allowed
out["counters"] = zerojit.monitor.counters()[COUNTER]
print(json.dumps(out))
"""


def guard_code(define_compile, guard, counter):
    """For run_python: `define_compile` (code defining compile_foreign(), a compile zerojit
    does not own) run before warmup, refused once the monitor is armed in error mode, and let
    through with the guard (zerojit.monitor.<guard>) off; prints what was refused and the
    guard's counters."""
    return (
        textwrap.dedent(define_compile) + f"COUNTER = {counter!r}\n" + GUARD.replace("GUARD", guard)
    )


def assert_guard_refused(test, result, function):
    """What guard_code printed: one refusal naming `function`, two compiles counted."""
    test.assertIsNotNone(result["refused"])
    test.assertIn(function, result["refused"])
    # The advice fits a kernel zerojit does not own: it has no warmup space to widen.
    test.assertIn("not zerojit's", result["refused"])
    test.assertNotIn("warmup space of this kernel", result["refused"])
    test.assertEqual(result["counters"]["compiles"], 2)
    test.assertEqual(result["counters"]["runtime_jit"], 1)


def assert_invalid_argument(test, kernel, call, argument, words):
    """`call()` raises InvalidArgument naming `kernel` and `argument`, its message holding each
    of `words`."""
    import zerojit  # here, not above: the GPU tests import this module before they know it loads

    with test.assertRaises(zerojit.InvalidArgument) as caught:
        call()
    test.assertEqual(caught.exception.kernel, kernel.name)
    test.assertEqual(caught.exception.argument, argument)
    for word in words:
        test.assertIn(word, str(caught.exception))


def warm_in_process(owners):
    """Warms every kernel `owners` registers into a fresh temporary cache in this process,
    with the monitor off and not armed: Triton's own launches compile in this process too, which
    the guard of an armed monitor would refuse. Returns the cache (a TemporaryDirectory)."""
    import zerojit  # here, not above: the GPU tests import this module before they know it loads

    cache = tempfile.TemporaryDirectory()
    zerojit.monitor.set_mode("off")
    zerojit.clear_registrations()
    owners.register_all()
    zerojit.warmup_kernels(cache_dir=cache.name, jobs=8, arm_monitor=False)
    return cache


def torch_with_cuda():
    """(torch or None, whether it has a CUDA device)."""
    try:
        import torch
    except ImportError:
        return None, False
    return torch, torch.cuda.is_available()


def torch_for_triton_gpu():
    """(torch or None, why the Triton GPU tests cannot run here: empty where they can)."""
    torch, have_cuda = torch_with_cuda()
    if not have_cuda:
        return torch, "needs PyTorch with a CUDA device"
    return torch, "" if HAVE_TRITON else "needs Triton"


@contextlib.contextmanager
def redis_server():
    """A redis-server on a free loopback port for the duration (its port), stopped after."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [
            "redis-server",
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        yield port
    finally:
        server.kill()
        server.wait()
