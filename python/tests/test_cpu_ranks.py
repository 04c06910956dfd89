"""CPU tests of ranks that agree (zerojit.RankGroup): the warmup of a group of 8 processes
(rank_worker.py) over a zerojit.FileStore passes when the ranks are equal and fails on every
rank, naming the odd one, when one compiles for another arch, warms a narrower space, dies
mid-warmup (named after the timeout) or raises; the comparison's causes (configuration,
compiler); the stores (zerojit.RedisStore against a redis-server, with groups over it too); and
the watch, which stops every rank within a second of one rank's runtime JIT (the median
time-to-stop of 10 rounds is printed: docs/BENCHMARKS.md). NVRTC compiles the one tiny kernel;
no GPU, no PyTorch (torch's TCPStore is used where torch is, groups of 8 over it too).
"""

import importlib.util
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import unittest

os.environ.setdefault("ZEROJIT_CACHE_DIR", tempfile.mkdtemp(prefix="zerojit-ranks-test-"))
os.environ.pop("ZEROJIT_MONITOR", None)

import pytorch_nvrtc  # noqa: E402,F401  (before zerojit)
import zerojit  # noqa: E402
from lang_support import redis_server  # noqa: E402
from zerojit.runtime import agreement  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "rank_worker.py")
WORLD = 8
ODD = 5
needs_nvrtc = unittest.skipUnless(zerojit.nvrtc_available(), "NVRTC is not available")
needs_torch = unittest.skipUnless(
    importlib.util.find_spec("torch"), "torch is not installed: no TCPStore"
)


def run_ranks(scenario, timeout=20.0, world=WORLD, store=None):
    """Runs every rank of a group as a process; returns each rank's JSON line (rank -> dict;
    None for a rank that printed none). store: rank_worker.py's STORE (default: a fresh
    directory)."""
    store = store or tempfile.mkdtemp(prefix="zerojit-ranks-store-")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([HERE, *sys.path]))
    processes = [
        subprocess.Popen(
            [sys.executable, WORKER, scenario, str(r), str(world), store, str(ODD), str(timeout)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for r in range(world)
    ]
    out = {}
    for rank, process in enumerate(processes):
        stdout, stderr = process.communicate(timeout=120)
        lines = [line for line in stdout.splitlines() if line.startswith("{")]
        out[rank] = json.loads(lines[-1]) if lines else None
        if out[rank] is None and scenario != "die":
            raise AssertionError(f"rank {rank} printed nothing:\n{stderr}")
    return out


def assert_every_rank_names_the_odd_one(test, results, *texts, skip=()):
    for rank, result in results.items():
        if rank in skip:
            continue
        test.assertEqual(result.get("error"), "RankAgreementError", (rank, result))
        test.assertIn(ODD, result["ranks"], result)
        for text in texts:
            test.assertIn(text, result["message"], (rank, result["message"]))
    messages = {r["message"] for rank, r in results.items() if rank not in skip}
    test.assertEqual(len(messages), 1, "every rank raises the same message")


NARROWED = (
    "a narrowed warmup space: rank 5 lacks 1 keys of test.rank_kernel",
    "test.rank_kernel [n=32] on sm_90a: only on rank 0",
)


@needs_nvrtc
class RankWarmupTest(unittest.TestCase):
    def test_rank_equal_ranks_agree(self):
        results = run_ranks("equal")
        self.assertEqual(results, {rank: {"ok": True} for rank in range(WORLD)})

    def test_rank_with_another_arch_fails_every_rank(self):
        results = run_ranks("arch")
        assert_every_rank_names_the_odd_one(
            self, results, "rank 5 differs from rank 0", "another arch: sm_80 on rank 5, sm_90a"
        )

    def test_rank_with_a_narrowed_space_fails_every_rank(self):
        assert_every_rank_names_the_odd_one(self, run_ranks("narrow"), *NARROWED)

    def test_rank_with_a_failed_key_fails_every_rank(self):
        results = run_ranks("broken")
        self.assertEqual(results[ODD]["error"], "WarmupError")  # its own, naming the key
        self.assertIn("test.rank_kernel [n=32]", results[ODD]["message"])
        assert_every_rank_names_the_odd_one(
            self, results, "rank 5 failed to compile 1 keys", skip=(ODD,)
        )

    def test_rank_that_dies_mid_warmup_is_named_after_the_timeout(self):
        started = time.monotonic()
        results = run_ranks("die", timeout=2.0)
        self.assertIsNone(results[ODD])
        assert_every_rank_names_the_odd_one(
            self, results, "rank 5 never published its warmup within 2 s", skip=(ODD,)
        )
        self.assertEqual({tuple(r["missing"]) for k, r in results.items() if k != ODD}, {(5,)})
        self.assertLess(time.monotonic() - started, 20)

    def test_rank_that_arrives_after_the_timeout_fails_too(self):
        results = run_ranks("late", timeout=2.0)
        self.assertEqual(results[ODD]["error"], "RankAgreementError")
        self.assertIn("rank 5 published after another rank's timeout", results[ODD]["message"])
        assert_every_rank_names_the_odd_one(
            self, results, "rank 5 never published its warmup within 2 s", skip=(ODD,)
        )

    def test_rank_whose_warmup_is_interrupted_is_named_at_once(self):
        results = run_ranks("abort", timeout=30.0)
        self.assertEqual(results[ODD]["error"], "KeyboardInterrupt")
        assert_every_rank_names_the_odd_one(
            self, results, "rank 5: its warmup raised: KeyboardInterrupt", skip=(ODD,)
        )


def record(rank, entries, archs=("sm_90a",), compilers=None, config=None):
    report = {"archs": list(archs)}
    compilers = compilers or {"cuda@sm_90a": "12.8"}
    made = agreement.make_record(rank, report, entries, compilers, config)
    return made


class RankAgreementTest(unittest.TestCase):
    ENTRIES = [("k", "n=16", "sm_90a", "a" * 32), ("k", "n=32", "sm_90a", "b" * 32)]

    def compare(self, records):
        return agreement.disagreement(dict(enumerate(records)), len(records))

    def test_rank_records_that_agree(self):
        self.assertIsNone(self.compare([record(r, self.ENTRIES) for r in range(4)]))

    def test_rank_configuration_field_is_the_cause(self):
        config = {"model": {"heads": 64}, "serving": {"block_size": 256}}
        other = {"model": {"heads": 64}, "serving": {"block_size": 128}}
        records = [record(r, self.ENTRIES, config=config) for r in range(4)]
        records[2] = record(2, self.ENTRIES[:1], config=other)
        message, ranks, missing, differences = self.compare(records)
        self.assertEqual((ranks, missing), ([2], []))
        self.assertIn(
            "another configuration: serving.block_size = 128 on rank 2, 256 on rank 0", message
        )
        self.assertNotIn("narrowed", message)  # the configuration explains the keys
        self.assertEqual(differences[0]["keys"][0]["key"], "n=32")

    def test_rank_dsv4_configuration_in_the_record(self):
        # What warmup(group=) records of a DSv4 configuration: the validated config, so a
        # serving option that differs is named as such.
        from zerojit.runtime import ranks

        report = {"archs": ["sm_90a"], "keys": []}
        records = [
            ranks.warmup_record(report, [], {}, {"serving_json": json.dumps(serving)})
            for serving in ({"block_size": 256}, {"block_size": 256}, {"block_size": 64})
        ]
        for rank, made in enumerate(records):
            made["rank"] = rank
        message = self.compare(records)[0]
        self.assertIn(
            "another configuration: serving.block_size = 64 on rank 2, 256 on rank 0", message
        )

    def test_rank_compiler_and_program_causes(self):
        records = [record(r, self.ENTRIES) for r in range(3)]
        records[1] = record(1, self.ENTRIES, compilers={"cuda@sm_90a": "12.4"})
        message = self.compare(records)[0]
        self.assertIn("another compiler: cuda@sm_90a 12.4 on rank 1, 12.8 on rank 0", message)
        changed = [("k", "n=16", "sm_90a", "c" * 32), self.ENTRIES[1]]
        records[1] = record(1, changed)
        message = self.compare(records)[0]
        self.assertIn("other programs for the same keys", message)
        self.assertIn("k [n=16] on sm_90a: identity " + "c" * 32, message)

    def test_rank_ranges_in_messages(self):
        # 13 ranks: 0-2, 4 and 6-7 warmed another arch than the 7 others.
        records = [
            record(r, self.ENTRIES, archs=("sm_80",) if r in (0, 1, 2, 4, 6, 7) else ("sm_90a",))
            for r in range(13)
        ]
        message = self.compare(records)[0]
        self.assertIn("ranks 0-2, 4, 6-7 differ from rank 3 (ranks 3, 5, 8-12 agree)", message)

    def test_rank_records_digest_as_cs_records_do(self):
        # The digest ignores the rank and the order of keys, archs and compilers.
        a = record(0, self.ENTRIES, compilers={"cuda@sm_90a": "12.8", "triton@sm_90a": "3.6"})
        b = record(5, self.ENTRIES[::-1], compilers={"triton@sm_90a": "3.6", "cuda@sm_90a": "12.8"})
        self.assertEqual(a["digest"], b["digest"])
        self.assertNotEqual(a["digest"], record(0, self.ENTRIES[:1])["digest"])


def check_store_semantics(test, store):
    """What RankGroup relies on of a zerojit store (torch.distributed's semantics): values whole
    and binary, add(key, 0) a read that creates nothing, adds atomic, bounded waits naming the
    keys. `store`: fresh, its timeout short."""
    store.set("a/b", "x\0y")
    test.assertEqual(store.get("a/b"), b"x\0y")
    test.assertEqual(store.add("n", 0), 0)
    test.assertFalse(store.check(["n"]), "add(key, 0) created the key")
    counts = []
    threads = [threading.Thread(target=lambda: counts.append(store.add("n", 1))) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    test.assertEqual(sorted(counts), list(range(1, 9)))
    test.assertTrue(store.check(["n", "a/b"]))
    with test.assertRaisesRegex(TimeoutError, "'never'"):
        store.get("never")
    with test.assertRaisesRegex(TimeoutError, "'gone'"):
        store.wait(["a/b", "gone"], timeout=0.05)
    test.assertTrue(store.delete_key("a/b"))
    test.assertFalse(store.check(["a/b"]))


class RankStoreTest(unittest.TestCase):
    def test_rank_file_store(self):
        store = zerojit.FileStore(tempfile.mkdtemp(), timeout=0.2)
        check_store_semantics(self, store)
        store.set("k" * 400, b"long")
        self.assertEqual(store.get("k" * 400), b"long")

    def test_rank_group_checks_its_arguments(self):
        with self.assertRaisesRegex(ValueError, "rank 8 is not in a group of 8"):
            zerojit.RankGroup(8, 8, zerojit.FileStore(tempfile.mkdtemp()))

        class NoAdd:
            def set(self, key, value):
                pass

            def get(self, key):
                return b""

        with self.assertRaisesRegex(TypeError, "has no add"):
            zerojit.RankGroup(0, 1, NoAdd())

    @needs_torch
    def test_rank_group_over_torch_tcp_store(self):
        from torch.distributed import TCPStore

        store = TCPStore("127.0.0.1", 0, 1, True, wait_for_workers=False)
        group = zerojit.RankGroup(0, 1, store, timeout=2)
        records = group.agree(record(0, RankAgreementTest.ENTRIES))
        self.assertEqual(list(records), [0])

    @needs_torch
    @needs_nvrtc
    def test_rank_groups_of_8_over_torch_tcp_store(self):
        from torch.distributed import TCPStore

        for scenario in ("equal", "narrow"):
            # A fresh store per job, as a rendezvous's: this process holds it, the ranks connect.
            server = TCPStore("127.0.0.1", 0, None, True, wait_for_workers=False)
            results = run_ranks(scenario, store=f"tcp://127.0.0.1:{server.port}")
            if scenario == "equal":
                self.assertEqual(results, {rank: {"ok": True} for rank in range(WORLD)})
            else:
                assert_every_rank_names_the_odd_one(self, results, *NARROWED)


needs_redis = unittest.skipIf(
    shutil.which("redis-server") is None,
    "redis-server is not installed (scripts/setup.sh installs it)",
)


@needs_redis
class RankRedisStoreTest(unittest.TestCase):
    """zerojit.RedisStore: the store's semantics, then the groups of 8 processes over it."""

    @classmethod
    def setUpClass(cls):
        cls.url = f"redis://127.0.0.1:{cls.enterClassContext(redis_server())}/0"

    def test_rank_redis_store_methods(self):
        check_store_semantics(self, zerojit.RedisStore(self.url, prefix="methods", timeout=0.2))

    def test_rank_redis_store_errors_name_the_cause_never_the_password(self):
        with self.assertRaisesRegex(ValueError, "ZEROJIT_REMOTE_CACHE"):
            saved = os.environ.pop("ZEROJIT_REMOTE_CACHE", None)
            try:
                zerojit.RedisStore()
            finally:
                if saved is not None:
                    os.environ["ZEROJIT_REMOTE_CACHE"] = saved
        with self.assertRaisesRegex(zerojit.Error, "url"):
            zerojit.RedisStore("http://example")
        with socket.socket() as closed:  # a port nothing listens on
            closed.bind(("127.0.0.1", 0))
            port = closed.getsockname()[1]
        store = zerojit.RedisStore(f"redis://:s3cret@127.0.0.1:{port}/0")
        self.assertNotIn("s3cret", repr(store))
        with self.assertRaises(zerojit.Error) as caught:
            store.set("warmup/1/0", "record")
        self.assertIn("SET of key 'warmup/1/0'", str(caught.exception))
        self.assertNotIn("s3cret", str(caught.exception))

    def ranks_over_redis(self, scenario, **kwargs):
        prefix = f"{scenario}-{time.monotonic_ns()}"  # a fresh store per job
        return run_ranks(scenario, store=f"{self.url}#{prefix}", **kwargs)

    @needs_nvrtc
    def test_rank_equal_ranks_agree_over_redis(self):
        results = self.ranks_over_redis("equal")
        self.assertEqual(results, {rank: {"ok": True} for rank in range(WORLD)})

    @needs_nvrtc
    def test_rank_with_a_narrowed_space_fails_every_rank_over_redis(self):
        assert_every_rank_names_the_odd_one(self, self.ranks_over_redis("narrow"), *NARROWED)

    @needs_nvrtc
    def test_rank_miss_stops_every_rank_over_redis(self):
        median = stop_median(self, self.ranks_over_redis("stop"), "a zerojit.RedisStore")
        self.assertLess(median, 1.0)


class RankWatchTest(unittest.TestCase):
    def setUp(self):
        zerojit.monitor.disarm()
        zerojit.monitor.set_mode("off")

    tearDown = setUp

    def test_rank_watch_calls_on_miss_and_chains_the_callback(self):
        store = zerojit.FileStore(tempfile.mkdtemp())
        seen, chained = [], []
        zerojit.hooks.set_monitor_callback(chained.append)
        try:
            watcher = zerojit.RankGroup(1, 2, store)
            with watcher.watch(on_miss=lambda *event: seen.append(event), interval=0.01):
                zerojit.monitor.set_mode("error")
                zerojit.monitor.arm()
                with self.assertRaises(zerojit.RuntimeJitError):  # this rank's own: published
                    zerojit._core.monitor_foreign_event(
                        "compile", "triton.foreign", "test.mine", "n=1", ""
                    )
                self.assertEqual(len(chained), 1)  # the callback in place still sees it
                zerojit.RankGroup(0, 2, store).report_miss("test.theirs", "n=2")
                deadline = time.monotonic() + 2
                while not seen and time.monotonic() < deadline:
                    time.sleep(0.01)
            self.assertEqual(seen, [(0, "test.theirs", "n=2")])
            self.assertEqual(watcher.miss["kernel"], "test.theirs")
            self.assertEqual(zerojit.hooks.monitor_callback(), chained.append)
            self.assertEqual(json.loads(store.get("zerojit/miss/1"))["kernel"], "test.mine")
        finally:
            zerojit.hooks.set_monitor_callback(None)

    def test_rank_watch_raises_in_the_main_thread_by_default(self):
        store = zerojit.FileStore(tempfile.mkdtemp())
        group = zerojit.RankGroup(1, 2, store)
        handler = signal.getsignal(signal.SIGINT)
        with group.watch(interval=0.01):
            threading.Timer(0.05, zerojit.RankGroup(0, 2, store).report_miss, ("k", "n=3")).start()
            with self.assertLogs("zerojit", "ERROR"):
                with self.assertRaises(zerojit.RankRuntimeJitError) as raised:
                    time.sleep(5)  # a blocking call: the signal ends it
        self.assertEqual((raised.exception.rank, raised.exception.key), (0, "n=3"))
        self.assertIn(
            "rank 0 of 2 met a runtime JIT (compile of kernel k [n=3])", str(raised.exception)
        )
        self.assertEqual(signal.getsignal(signal.SIGINT), handler)  # put back

    def test_rank_watch_stops_its_own_rank_in_fallback_mode(self):
        store = zerojit.FileStore(tempfile.mkdtemp())
        seen = []
        with zerojit.RankGroup(0, 2, store).watch(on_miss=lambda *e: seen.append(e), interval=0.01):
            zerojit.monitor.set_mode("fallback")
            zerojit.monitor.arm()
            with self.assertLogs("zerojit", "WARNING"):  # reported, as in warn mode
                zerojit._core.monitor_foreign_event("load", "triton.foreign", "test.f", "n=1", "")
            time.sleep(0.05)
            self.assertEqual(seen, [])  # a load in fallback mode is the background's result
            zerojit._core.monitor_foreign_event("compile", "triton.foreign", "test.f", "n=2", "")
            deadline = time.monotonic() + 2
            while not seen and time.monotonic() < deadline:
                time.sleep(0.01)
        self.assertEqual(seen, [(0, "test.f", "n=2")])


@needs_nvrtc
class RankStopTest(unittest.TestCase):
    def test_rank_miss_stops_every_rank_within_a_second(self):
        median = stop_median(self, run_ranks("stop"), "a zerojit.FileStore")
        self.assertLess(median, 1.0)


def stop_median(test, results, over):
    """The "stop" scenario's rounds checked (every other rank stopped in each) and its
    time-to-stop of the last rank, median of the 10 rounds, printed and returned (seconds)."""
    rounds = {}
    for rank, result in results.items():
        for round_, stopped, at in result["times"]:
            if stopped is None:
                test.fail(f"rank {rank} was not stopped in round {round_}")
            rounds.setdefault(round_, []).append(stopped - at)
    test.assertEqual(sorted(rounds), list(range(10)))
    test.assertEqual({len(times) for times in rounds.values()}, {WORLD - 1})
    slowest = [max(times) for times in rounds.values()]
    median = statistics.median(slowest)
    print(
        f"\ntime-to-stop of the last of {WORLD - 1} ranks over {over}, median of 10: "
        f"{median * 1000:.0f} ms (max {max(slowest) * 1000:.0f} ms)",
        file=sys.stderr,
    )
    return median


if __name__ == "__main__":
    unittest.main()
