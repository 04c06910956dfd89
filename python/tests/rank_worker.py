"""One rank of test_cpu_ranks.py's groups, run as its own process:

    python rank_worker.py SCENARIO RANK WORLD STORE ODD_RANK TIMEOUT

STORE: a directory (a zerojit.FileStore), "redis://host:port/db#prefix" (a zerojit.RedisStore
under that prefix) or "tcp://host:port" (a client of a torch.distributed TCPStore).

Prints one JSON line: {"ok": true} or the error the rank raised ({"error", "message",
"ranks", "missing"}); the "stop" scenario prints its rounds' times instead.

Scenarios: equal (every rank the same), arch (ODD_RANK compiles for sm_80), narrow (ODD_RANK
warms a narrower space), broken (a key of ODD_RANK's fails to compile), die (ODD_RANK dies
after its first key), late (ODD_RANK warms up after the others' timeout), abort (ODD_RANK's
warmup is interrupted), stop (ten rounds: in round i rank i % WORLD meets a runtime JIT while
the others sleep in the main thread, watched; each rank prints when it was stopped).
"""

import dataclasses
import json
import os
import sys
import time

import pytorch_nvrtc  # noqa: F401  (before zerojit)
import zerojit
from zerojit import DType, Program, Space, TensorDesc


@dataclasses.dataclass(frozen=True)
class RankKey:
    n: int


class RankKernel(zerojit.Kernel):
    """The smallest program NVRTC compiles: the group's checks are what is tested."""

    name = "test.rank_kernel"
    Key = RankKey
    params = (("x", "tensor"),)

    def dispatch(self, x):
        return RankKey(x.shape[0])

    broken = False  # the "broken" scenario's odd rank: n=32 does not compile

    def program(self, key):
        body = "this is not C++;" if self.broken and key.n == 32 else "x[0] = T_N;"
        return Program(
            source=f'extern "C" __global__ void k(float* x) {{ {body} }}',
            function="k",
            key_as="macros",
            macro_prefix="T_",
        )


def space(sizes):
    return Space(lambda p: (TensorDesc.contiguous(DType.f32, (p["n"],)),)).choices("n", sizes)


def warm(scenario, rank, odd, group):
    odd_here = rank == odd
    sizes = [16] if scenario == "narrow" and odd_here else [16, 32]
    zerojit.register(RankKernel, space(sizes))
    RankKernel.broken = scenario == "broken" and odd_here
    arch = "sm_80" if scenario == "arch" and odd_here else "sm_90a"
    on_key = None
    if scenario == "die" and odd_here:

        def on_key(*_):
            os._exit(3)  # mid-warmup, without a word to the group

    if scenario == "abort" and odd_here:

        def on_key(*_):
            raise KeyboardInterrupt  # Ctrl-C, or an engine that gives up

    if scenario == "late" and odd_here:
        time.sleep(group.timeout + 1.0)  # alive, but after the others' timeout
    zerojit.warmup_kernels(compile_only=True, arch=arch, jobs=1, group=group, on_key=on_key)


def stop_rounds(rank, world, store):
    """Ten rounds; returns [(round, stopped at, triggered at)] of the rounds this rank was
    stopped in (its own rounds it triggers)."""
    times = []
    for round_ in range(10):
        group = zerojit.RankGroup(rank, world, store, timeout=10, prefix=f"stop{round_}")
        zerojit.monitor.set_mode("error")
        zerojit.monitor.arm()
        group.watch(interval=0.05)
        try:
            # Every rank watches before any triggers (in the try: the stop may come at once).
            store.add(f"stop{round_}/ready", 1)
            if rank == round_ % world:
                while store.add(f"stop{round_}/ready", 0) < world:
                    time.sleep(0.005)
                store.set(f"stop{round_}/at", repr(time.time()))
                try:  # the Triton guard's path: a compile zerojit does not own, refused
                    zerojit._core.monitor_foreign_event(
                        "compile", "triton.foreign", "test.missed", f"round={round_}", ""
                    )
                except zerojit.RuntimeJitError:
                    pass
            else:
                time.sleep(30)  # serving, blocked: the watch must end the sleep
                times.append((round_, None, None))
        except zerojit.RankRuntimeJitError as error:
            stopped = time.time()
            assert (error.rank, error.key) == (round_ % world, f"round={round_}"), error
            times.append((round_, stopped, float(store.get(f"stop{round_}/at"))))
        group.unwatch()
        zerojit.monitor.disarm()
    return times


def open_store(path):
    if path.startswith("redis://"):
        url, _, prefix = path.partition("#")
        return zerojit.RedisStore(url, prefix=prefix, timeout=20)
    if path.startswith("tcp://"):  # a client of the test's torch.distributed TCPStore
        import datetime

        from torch.distributed import TCPStore

        host, _, port = path[len("tcp://") :].rpartition(":")
        timeout = datetime.timedelta(seconds=20)
        return TCPStore(host, int(port), None, False, timeout=timeout)
    return zerojit.FileStore(path, timeout=20)


def main():
    scenario, rank, world, path, odd, timeout = sys.argv[1:7]
    rank, world, odd = int(rank), int(world), int(odd)
    store = open_store(path)
    if scenario == "stop":
        print(json.dumps({"times": stop_rounds(rank, world, store)}), flush=True)
        return
    group = zerojit.RankGroup(rank, world, store, timeout=float(timeout))
    try:
        warm(scenario, rank, odd, group)
    except zerojit.RankAgreementError as error:
        out = {"error": "RankAgreementError", "message": str(error)}
        out.update(ranks=error.ranks, missing=error.missing)
        print(json.dumps(out), flush=True)
        return
    except BaseException as error:
        print(json.dumps({"error": type(error).__name__, "message": str(error)}), flush=True)
        return
    print(json.dumps({"ok": True}), flush=True)


if __name__ == "__main__":
    main()
