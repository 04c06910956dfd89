"""What the compile workers say when a Triton or CuTeDSL compile cannot happen (issue 39), without
a GPU: compiler messages reach reports as plain text (no terminal colours), a kernel module that
fails to import is named with the line that failed, and a compiler the workers' interpreter
cannot import is said to be missing from that interpreter. Also what the package exports and
what the README and docs/CONSUMING.md state against what the code has.

The warmups run in subprocesses, each with its own cache directory and its own modules written
to a temporary folder. Tests that compile need Triton or nvidia-cutlass-dsl (the environment
scripts/setup.sh makes has both) and skip, saying so, where they cannot be imported."""

import json
import os
import re
import subprocess
import sys
import tempfile
import unittest
import unittest.mock

import zerojit
from zerojit.languages import compile_worker

TESTS = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(TESTS))
sys.path.insert(0, TESTS)

import lang_support  # noqa: E402
from lang_support import NEEDS_DSL, NEEDS_TRITON  # noqa: E402

# A module that imports a package no environment has, on line 3.
BAD_IMPORT = """\
import triton
import triton.language as tl
import zerojit_test_no_such_package


@triton.jit
def copy(x_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offsets, tl.load(x_ptr + offsets, mask=offsets < n), mask=offsets < n)
"""

# A CuTeDSL program that fails to trace: the DSL's message comes in terminal colours.
BAD_CUTE = """\
import cuda.bindings.driver as cuda
import cutlass.cute as cute


@cute.jit
def bad(mA: cute.Tensor, stream: cuda.CUstream):
    undefined_name_in_the_program + 1
"""

OWNERS = """\
import dataclasses

import zerojit
from zerojit import CuteKernel, CuteProgram, CuteTensor, DType, TritonKernel, TritonProgram


@dataclasses.dataclass(frozen=True)
class Key:
    block: int


class BadImport(TritonKernel):
    name, fn, Key = "tests.reliability.bad_import", "reliability_bad_import:copy", Key

    def dispatch(self, n):
        return Key(256)

    def program(self, key):
        return TritonProgram({"x_ptr": "*fp32", "n": "i32"}, {"BLOCK": key.block})

    def grid(self, key, n):
        return (1,)

    def warmup_space(self):
        return zerojit.Space(lambda p: {"n": p["n"]}).choices("n", [1000])


@dataclasses.dataclass(frozen=True)
class CuteKey:
    dtype: DType


class BadCute(CuteKernel):
    name, fn, Key = "tests.reliability.bad_cute", "reliability_bad_cute:bad", CuteKey

    def dispatch(self, mA):
        return CuteKey(mA.dtype)

    def program(self, key):
        return CuteProgram({"mA": CuteTensor(key.dtype, (None,))})

    def warmup_space(self):
        return zerojit.Space(
            lambda p: {"mA": zerojit.TensorDesc.contiguous(p["dtype"], (64,))}
        ).choices("dtype", [DType.f32])
"""

# Makes the compile workers' interpreter (never the parent, which has the compiler) lack a
# package, as an interpreter without it would: sitecustomize runs at every interpreter's start.
SITECUSTOMIZE = """\
import os
import sys

if os.environ.get("ZEROJIT_COMPILE_WORKER") == "1":

    class _Missing:
        def find_spec(self, name, path=None, target=None):
            if name.partition(".")[0] == {package!r}:
                raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
            return None

    sys.meta_path.insert(0, _Missing())
"""

# The keys of one kernel, compile-only for sm_90a, failures reported and not raised.
WARM = """
zerojit.register(owners.{kernel})
report = zerojit.warmup_kernels(cache_dir={cache!r}, compile_only=True, arch="sm_90a",
                                raise_on_failure=False)
print(json.dumps(report["keys"]))
"""


def warm_one(kernel, owners, files=None):
    """The key reports of a compile-only warmup of `kernel` (a class of the module `owners`), in
    a fresh interpreter with `files` ({name: text}) written to a folder first on its path."""
    with tempfile.TemporaryDirectory() as folder:
        for name, text in (files or {}).items():
            with open(os.path.join(folder, name), "w") as handle:
                handle.write(text)
        cache = os.path.join(folder, "cache")
        path = [folder, TESTS, *os.environ.get("PYTHONPATH", "").split(os.pathsep)]
        return lang_support.run_python(
            owners,
            WARM.format(kernel=kernel, cache=cache),
            env={
                "PYTHONPATH": os.pathsep.join(p for p in path if p),
                "ZEROJIT_CACHE_READONLY_DIRS": "",
            },
        )


def failed_errors(test, keys):
    test.assertTrue(keys, "the warmup had no key")
    for key in keys:
        test.assertTrue(key["error"], f"{key['kernel']} [{key['key']}] did not fail")
    return [key["error"] for key in keys]


# A language's compile module (as the table names one) whose compiler colours its error.
COLOURED_COMPILE = r"""
def compile(request, worker):
    raise ValueError(
        "\x1b[91m\x1b[1merror:\x1b[0m NameError in `bad` \x1b]8;;file:///k.py\x1b\\k.py"
        "\x1b]8;;\x1b\\:6"
    )
"""


class PlainText(unittest.TestCase):
    """Finding 1: a compiler's message reaches the report without terminal escape sequences."""

    def test_a_failure_reply_has_no_escape_sequences_in_its_error_or_log(self):
        with tempfile.TemporaryDirectory() as folder:
            coloured = os.path.join(folder, "coloured_compile.py")
            with open(coloured, "w") as handle:
                handle.write(COLOURED_COMPILE)
            reply = compile_worker._serve({"compile": coloured})
        self.assertFalse(reply["ok"])
        self.assertEqual(reply["error"], "error: NameError in `bad` k.py:6")
        self.assertNotIn("\x1b", reply["log"])
        self.assertIn("NameError in `bad`", reply["log"])

    @NEEDS_DSL
    def test_a_cutedsl_program_that_fails_to_trace_is_reported_in_plain_text(self):
        errors = failed_errors(
            self,
            warm_one(
                "BadCute",
                "reliability_owners",
                {"reliability_owners.py": OWNERS, "reliability_bad_cute.py": BAD_CUTE},
            ),
        )
        for error in errors:
            self.assertNotIn("\x1b", error)
            # The first line, which a WarmupError's summary shows, says what went wrong.
            self.assertIn("undefined_name_in_the_program", error.splitlines()[0])


class KernelModuleImport(unittest.TestCase):
    """Finding 2: a kernel module that fails to import is named, with the line that failed."""

    def test_the_error_names_the_module_and_keeps_the_failing_line(self):
        with tempfile.TemporaryDirectory() as folder:
            with open(os.path.join(folder, "reliability_bad_import.py"), "w") as handle:
                handle.write(BAD_IMPORT)
            sys.path.insert(0, folder)
            try:
                with self.assertRaises(compile_worker.RequestError) as caught:
                    compile_worker.kernel_function(
                        {"module": "reliability_bad_import", "qualname": "copy", "file": None}
                    )
            finally:
                sys.path.remove(folder)
                sys.modules.pop("reliability_bad_import", None)
        message = str(caught.exception)
        self.assertIn("reliability_bad_import", message)
        self.assertIn("No module named 'zerojit_test_no_such_package'", message)
        self.assertIn("reliability_bad_import.py:3", message)
        self.assertIn("import zerojit_test_no_such_package", message)
        self.assertIn("Traceback", caught.exception.log)

    @NEEDS_TRITON
    def test_a_triton_key_whose_module_fails_to_import_says_which_module_and_line(self):
        errors = failed_errors(
            self,
            warm_one(
                "BadImport",
                "reliability_owners",
                {"reliability_owners.py": OWNERS, "reliability_bad_import.py": BAD_IMPORT},
            ),
        )
        for error in errors:
            self.assertIn("tests.reliability.bad_import", error)
            self.assertIn("importing the kernel's module reliability_bad_import failed", error)
            self.assertIn("No module named 'zerojit_test_no_such_package'", error)
            self.assertRegex(error, r"reliability_bad_import\.py:3: import zerojit_test_no_such")


@NEEDS_TRITON
class ToolAdvice(unittest.TestCase):
    """Finding 6: `python -m zerojit warmup` gives a Triton key that failed Triton's advice (its
    error above, the kernel's module, Triton installed for the workers), not NVRTC's."""

    def test_a_failed_triton_key_gets_tritons_advice_not_nvrtcs(self):
        files = {
            "reliability_owners.py": OWNERS,
            "reliability_bad_import.py": BAD_IMPORT,
            "reliability_registered.py": "import zerojit\nfrom reliability_owners import "
            "BadImport\n\nzerojit.register(BadImport)\n",
        }
        with tempfile.TemporaryDirectory() as folder:
            for name, text in files.items():
                with open(os.path.join(folder, name), "w") as handle:
                    handle.write(text)
            path = [folder, TESTS, *os.environ.get("PYTHONPATH", "").split(os.pathsep)]
            env = lang_support.environment(
                {"PYTHONPATH": os.pathsep.join(p for p in path if p), "NO_COLOR": "1"}
            )
            cache = os.path.join(folder, "cache")
            arguments = ["warmup", "--module", "reliability_registered", "--compile-only"]
            done = subprocess.run(
                [sys.executable, "-m", "zerojit", *arguments, "--cache-dir", cache],
                capture_output=True,
                text=True,
                timeout=600,
                env=env,
            )
        self.assertEqual(done.returncode, 3, done.stdout + done.stderr)  # keys failed to compile
        self.assertIn("for the Triton keys, read Triton's error above", done.stderr)
        self.assertIn("check that Triton is installed for the interpreter", done.stderr)
        self.assertNotIn("NVRTC log", done.stderr)


class CompilerMissingInTheWorkers(unittest.TestCase):
    """Finding 3: a compiler the workers' interpreter cannot import is named as missing there,
    with the interpreter, not as a zygote that did not fork."""

    def assert_says_missing(self, errors, compiler, install):
        for error in errors:
            self.assertIn(f"{compiler} is not installed for {sys.executable}", error)
            self.assertIn("the interpreter the compile workers run", error)
            self.assertIn(install, error)
            self.assertNotIn("did not fork", error)

    @NEEDS_TRITON
    def test_triton_missing_for_the_workers_interpreter_is_said_so(self):
        keys = warm_one(
            "PdlScale",
            "triton_test_owners",
            {"sitecustomize.py": SITECUSTOMIZE.format(package="triton")},
        )
        self.assert_says_missing(failed_errors(self, keys), "Triton", "pip install triton")

    @NEEDS_DSL
    def test_cutedsl_missing_for_the_workers_interpreter_is_said_so(self):
        keys = warm_one(
            "ScaledAdd",
            "cute_test_owners",
            {"sitecustomize.py": SITECUSTOMIZE.format(package="cutlass")},
        )
        self.assert_says_missing(
            failed_errors(self, keys), "CuTeDSL", "pip install nvidia-cutlass-dsl"
        )

    def test_a_compiler_that_fails_inside_its_import_keeps_its_failing_line(self):
        try:
            exec(compile("import json\nraise RuntimeError('broken')\n", "fake.py", "exec"), {})
        except RuntimeError as error:
            failure = error
        # The zygote is told its compiler's name and install hint by the parent (the table).
        hint = json.dumps(["Triton", "pip install triton==3.6.0"])
        with unittest.mock.patch.dict(os.environ, {"ZEROJIT_WORKER_COMPILER": hint}):
            text = compile_worker._preload_failure("triton.compiler", failure)
        self.assertIn(f"Triton cannot be imported by {sys.executable}", text)
        self.assertIn("import triton.compiler failed: RuntimeError: broken", text)
        self.assertIn("(at fake.py:2)", text)


class Exports(unittest.TestCase):
    """Finding 5: the documented zerojit.SUPPORTED_TRITON is the package's."""

    def test_supported_triton_is_exported(self):
        self.assertIn("SUPPORTED_TRITON", zerojit.__all__)
        self.assertEqual(zerojit.SUPPORTED_TRITON, ("3.5", "3.6"))


def _document(path):
    full = os.path.join(ROOT, path)
    if not os.path.isfile(full):
        raise unittest.SkipTest(f"{path} is not beside these tests (an installed copy)")
    with open(full, encoding="utf-8") as handle:
        return handle.read()


class Documents(unittest.TestCase):
    """Finding 7: what the README and docs/CONSUMING.md state is what the code has."""

    def test_the_readme_states_the_default_manifests_key_count(self):
        stated = re.search(r"serving\s+defaults: (\d+) specializations", _document("README.md"))
        self.assertIsNotNone(stated, "README.md no longer states the default's key count")
        self.assertEqual(int(stated.group(1)), len(zerojit.manifest()))

    def test_consuming_lists_every_device_header(self):
        listed = re.findall(
            r'^\| `"zerojit/device/([\w.]+)"` \|', _document("docs/CONSUMING.md"), re.M
        )
        headers = os.listdir(os.path.join(ROOT, "include", "zerojit", "device"))
        self.assertTrue(headers)
        self.assertEqual(sorted(listed), sorted(headers))


if __name__ == "__main__":
    unittest.main()
