"""CuTeDSL kernels on zerojit without a GPU: exact manifests, compile-only warmups for sm_90a in
worker processes, entries stored and verified and served to a second process with zero compiles
(and no DSL imported), damaged and untrusted entries never loaded, host code kept out of the
Redis tier unless opted in, and every mistake in a program or a call named.

Needs nvidia-cutlass-dsl (python/tests/requirements.txt, in the environment scripts/setup.sh
makes); every test skips, saying so, where it cannot be imported."""

import os
import shutil
import stat
import tempfile
import textwrap
import unittest

import cute_test_owners as owners  # noqa: E402
import lang_support  # noqa: E402
import zerojit
from fake_dlpack import KDL_BFLOAT, KDL_CUDA, KDL_FLOAT, VersionedProducer  # noqa: E402
from lang_support import NEEDS_DSL  # noqa: E402

MANIFEST = {
    "tests.cute.scaled_add": [{"dtype": "f32"}, {"dtype": "bf16"}],
    "tests.cute.row_sum": [{"dtype": "bf16", "cols": 64}, {"dtype": "bf16", "cols": 128}],
    "tests.cute.tiled_scale": [{"tile": 128}, {"tile": 256}],
}
KEYS = sum(len(keys) for keys in MANIFEST.values())


def run_python(code, env=None):
    return lang_support.run_python("cute_test_owners", code, env)


def warmup(cache, env=None, prelude=""):
    return run_python(lang_support.warmup_code("cutlass", cache, "sm_90a", 2, prelude), env)


@NEEDS_DSL
class Warmup(unittest.TestCase):
    def test_the_manifest_is_exactly_the_keys_dispatch_gives_over_the_spaces(self):
        by_kernel, _ = lang_support.manifest_keys(owners.register_all)
        self.assertEqual(by_kernel, MANIFEST)

    def test_compiled_once_then_served_to_another_process_with_no_compile_and_no_dsl(self):
        with tempfile.TemporaryDirectory() as cache:
            cold = warmup(cache)
            self.assertEqual(cold["totals"]["failed"], 0, cold["keys"])
            self.assertEqual(cold["compiles"], KEYS)
            warm = warmup(cache)
            self.assertEqual(warm["totals"]["from_disk"], KEYS)
            self.assertEqual(warm["compiles"], 0)
            self.assertFalse(warm["compiler_imported"])
            entries = zerojit.cache.ls(cache)
            self.assertEqual({e["language"] for e in entries}, {"cutedsl"})
            self.assertTrue(all(e["compiler"].startswith("cutedsl-4.8") for e in entries))
            report = zerojit.cache.verify(cache)
            self.assertEqual(report["valid"], KEYS)

    def test_a_damaged_entry_is_never_loaded_and_is_compiled_again(self):
        with tempfile.TemporaryDirectory() as cache:
            warmup(cache)
            entries = os.path.join(cache, "entries")
            victim = os.path.join(entries, sorted(os.listdir(entries))[0])
            with open(victim, "r+b") as handle:  # one byte of the object, flipped
                handle.seek(os.path.getsize(victim) // 2)
                byte = handle.read(1)
                handle.seek(-1, os.SEEK_CUR)
                handle.write(bytes([byte[0] ^ 0xFF]))
            again = warmup(cache)
            self.assertEqual(again["compiles"], 1)
            self.assertEqual(again["totals"]["from_disk"], KEYS - 1)

    def test_a_root_others_may_write_serves_no_host_code(self):
        with tempfile.TemporaryDirectory() as cache:
            warmup(cache)
            os.chmod(cache, os.stat(cache).st_mode | stat.S_IWGRP | stat.S_IWOTH)
            shared = warmup(cache, env={"ZEROJIT_CACHE_ALLOW_SHARED": "1"})
            self.assertEqual(shared["totals"]["failed"], 0)
            self.assertEqual(shared["compiles"], KEYS)  # compiled here, the entries never loaded

    @unittest.skipIf(shutil.which("redis-server") is None, "redis-server is not installed")
    def test_host_code_crosses_redis_only_where_the_deployment_opts_in(self):
        with lang_support.redis_server() as port:
            remote = {"ZEROJIT_REMOTE_CACHE": f"redis://127.0.0.1:{port}/0"}
            opted = dict(remote, ZEROJIT_REMOTE_CACHE_HOST_CODE="1")
            with (
                tempfile.TemporaryDirectory() as a,
                tempfile.TemporaryDirectory() as b,
                tempfile.TemporaryDirectory() as c,
                tempfile.TemporaryDirectory() as d,
            ):
                warmup(a, env=remote)  # not opted in: nothing goes to Redis
                self.assertEqual(warmup(b, env=opted)["compiles"], KEYS)
                # b (opted in) stored its objects; a host that has not opted in takes none.
                self.assertEqual(warmup(c, env=remote)["compiles"], KEYS)
                self.assertEqual(warmup(d, env=opted)["compiles"], 0)


MATRIX = owners.TileKey(128)


def fake(shape, dtype=(KDL_FLOAT, 32, 1), offset=0):
    tensor = VersionedProducer(shape, dtype, device=(KDL_CUDA, 0))
    tensor.data += offset
    return tensor


# A compile of a kernel zerojit does not own: the guard tests' compile_foreign().
FOREIGN_COMPILE = """
import cutlass
import cutlass.cute as cute
from cutlass.cute import runtime
import cute_test_kernels as kernels

def compile_foreign():
    tensors = [runtime.make_fake_compact_tensor(cutlass.Float32, (1024,)) for _ in range(3)]
    return cute.compile(kernels.scaled_add, *tensors, cutlass.Float32(0),
                        runtime.make_fake_stream(), options="--gpu-arch sm_90a")
"""


@NEEDS_DSL
class Guard(unittest.TestCase):
    """cute.compile calls of kernels zerojit does not own, seen by the monitor once armed."""

    def test_a_foreign_compile_is_refused_in_error_mode_and_counted(self):
        # zerojit is imported first (run_python's prelude): the guard installs itself when the
        # DSL is imported afterwards, as in an engine that imports zerojit early.
        result = run_python(
            lang_support.guard_code(
                FOREIGN_COMPILE,
                "cutedsl_guard",
                "cutedsl.foreign",
            ),
            env={"CUTE_DSL_ARCH": "sm_90a"},
        )
        lang_support.assert_guard_refused(self, result, "scaled_add")

    def test_the_guard_is_installed_when_lookups_come_before_the_import(self):
        # zerojit's own code looks the DSL up (its version, its runtime library) without
        # importing it; the import that follows must still install the guard.
        result = lang_support.run_python(
            None,
            lang_support.guard_code(
                textwrap.dedent(
                    """
                import importlib.util
                zerojit.cute_kernels.cutedsl_version()
                zerojit.cute_kernels._runtime_library()
                assert importlib.util.find_spec("cutlass") is not None
                assert "cutlass" not in sys.modules
                """
                )
                + FOREIGN_COMPILE,
                "cutedsl_guard",
                "cutedsl.foreign",
            ),
            env={"CUTE_DSL_ARCH": "sm_90a"},
        )
        lang_support.assert_guard_refused(self, result, "scaled_add")

    def test_the_guard_can_be_turned_off_by_the_environment(self):
        result = run_python(
            """
            import cutlass.cute as cute
            print(json.dumps([zerojit.monitor.cutedsl_guard(),
                              getattr(type(cute.compile)._compile, "zerojit_guard", False)]))
        """,
            env={"ZEROJIT_CUTE_GUARD": "0"},
        )
        self.assertEqual(result, [False, True])  # installed, and passing through


@NEEDS_DSL
class Checks(unittest.TestCase):
    """Programs and calls are checked before anything compiles or runs: errors name the kernel,
    key and argument."""

    def refused_program(self, name, program, field, words):
        kernel = type(
            name.replace(".", "_"),
            (owners.TiledScale,),
            {"name": name, "program": lambda self, key: program},
        )()
        with self.assertRaises(zerojit.InvalidArgument) as caught:
            kernel.slot(MATRIX)
        self.assertEqual(caught.exception.argument, field)
        self.assertIn(name, str(caught.exception))
        for word in words:
            self.assertIn(word, str(caught.exception))

    def test_program_mistakes(self):
        matrix = zerojit.CuteTensor(zerojit.DType.f32, (None, None))
        self.refused_program(
            "bad.cute.constexpr",
            zerojit.CuteProgram({"mA": matrix, "mC": matrix, "scale": "f32"}),
            "TILE",
            ["Constexpr"],
        )
        self.refused_program(
            "bad.cute.missing",
            zerojit.CuteProgram({"mA": matrix, "scale": "f32"}, {"TILE": 128}),
            "mC",
            ["no fake"],
        )
        self.refused_program(
            "bad.cute.scalar",
            zerojit.CuteProgram({"mA": matrix, "mC": matrix, "scale": "f16"}, {"TILE": 128}),
            "scale",
            ["scalar"],
        )
        self.refused_program(
            "bad.cute.order",
            zerojit.CuteProgram(
                {
                    "mA": zerojit.CuteTensor("f32", (None, None), stride_order=(0, 0)),
                    "mC": matrix,
                    "scale": "f32",
                },
                {"TILE": 128},
            ),
            "mA",
            ["permutation"],
        )
        self.refused_program(
            "bad.cute.arch",
            zerojit.CuteProgram(
                {"mA": matrix, "mC": matrix, "scale": "f32"},
                {"TILE": 128},
                options="--gpu-arch sm_80",
            ),
            "options",
            ["--gpu-arch"],
        )

    def test_a_function_without_a_stream_is_refused(self):
        with self.assertRaises(zerojit.InvalidArgument) as caught:
            type(
                "NoStream",
                (owners.TiledScale,),
                {"name": "bad.cute.no_stream", "fn": "cute_test_kernels:_tiled_scale_kernel"},
            )()
        self.assertIn("stream", str(caught.exception))

    def refused_call(self, kernel, call, argument, words):
        with self.assertRaises(zerojit.InvalidArgument) as caught:
            call()
        self.assertEqual(caught.exception.argument, argument)
        for word in words:
            self.assertIn(word, str(caught.exception))

    def test_what_the_compiled_code_assumes_is_checked_at_every_call(self):
        add, rows = owners.ScaledAdd(), owners.RowSum()
        a, b, c = fake((1024,)), fake((1024,)), fake((1024,))
        self.refused_call(
            add, lambda: add(a, fake((1024,), (KDL_BFLOAT, 16, 1)), c, 2.0), "mB", ["bf16", "f32"]
        )
        self.refused_call(
            add, lambda: add(a, b, fake((1024,), offset=4), 2.0), "mC", ["16-byte aligned"]
        )
        odd = (fake((1022,)), fake((1022,)), fake((1022,)))
        self.refused_call(add, lambda: add(*odd, 2.0), "mA", ["multiple of 4"])
        x = fake((8, 64), (KDL_BFLOAT, 16, 1))
        self.refused_call(rows, lambda: rows(x, fake((8, 2))), "mOut", ["dimensions"])
        self.refused_call(rows, lambda: rows(x, fake((8,), (KDL_BFLOAT, 16, 1))), "mOut", ["bf16"])
        with self.assertRaises(zerojit.InvalidArgument) as caught:
            add(a, b)
        self.assertIn("mA, mB, mC, alpha", str(caught.exception))

    @unittest.skipIf(zerojit.driver_available(), "a CUDA driver is installed here")
    def test_a_valid_call_passes_every_check_and_stops_only_for_want_of_a_driver(self):
        add = owners.ScaledAdd()
        with self.assertRaises(zerojit.UnavailableError):
            add(fake((1024,)), fake((1024,)), fake((1024,)), 2.0)


if __name__ == "__main__":
    unittest.main()
