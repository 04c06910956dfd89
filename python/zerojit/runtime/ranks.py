"""Ranks that agree: a warmup that checks every rank of a group warmed the same kernels, and a
watch that stops every rank when one meets a runtime JIT (docs/PYTHON.md, "Ranks that agree").

Why: the ranks of a tensor-parallel group run the same kernels in lockstep. A rank that warmed
another arch, compiler, configuration or a narrower space compiles (or, in error mode, raises)
where the others do not, and the others then wait in their next collective until its timeout,
minutes later, naming nothing. Comparing the warmups once, at the end, turns that into one error
at start-up naming the rank and the keys; watching turns a miss on one rank into a stop of every
rank within a second.

The store is duck-typed, as torch.distributed's stores are: ``set(key, value)``, ``get(key) ->
bytes`` (only called for keys known to be set), ``add(key, n) -> int``. ``add(key, 0)`` reads a
counter without waiting, which is how a rank probes whether another has published, so that no
wait here is unbounded: torch's ``TCPStore`` and ``FileStore`` fit, and so does
``zerojit.FileStore``.
"""

import json
import logging
import signal
import threading
import time

from zerojit import _core
from zerojit.runtime import agreement
from zerojit.runtime.errors import RankAgreementError, RankRuntimeJitError

__all__ = ["RankGroup"]

LOGGER = logging.getLogger("zerojit")

# The runtime JITs that stop a rank (and so, watched, every rank), by monitor mode. In error
# mode every event is raised on its rank. In fallback mode a key with a fallback is served and
# never reaches the monitor; what does is a compile without a fallback (the rank stalls) or a
# call its key cannot serve; a load there is the background compile's result arriving. In warn
# and off mode the rank compiles and goes on, so no rank needs stopping.
STOPPING_KINDS = {
    "error": ("compile", "load", "specialization"),
    "fallback": ("compile", "specialization"),
}


class RankGroup:
    """The ranks of one group, and the store they share.

    rank, world_size: this rank and the group's size. store: a torch.distributed store or
    ``zerojit.FileStore`` (see the module's text). timeout: seconds a warmup waits for the other
    ranks' records before naming the ones missing. prefix: the store keys' prefix (one per
    group sharing a store; a store must be fresh per job, as a rendezvous store is, since a
    watched event stays in it).
    """

    def __init__(self, rank, world_size, store, timeout=300.0, prefix="zerojit"):
        world_size = int(world_size)
        rank = int(rank)
        if world_size < 1 or not 0 <= rank < world_size:
            raise ValueError(f"RankGroup: rank {rank} is not in a group of {world_size}")
        for method in ("set", "get", "add"):
            if not callable(getattr(store, method, None)):
                raise TypeError(
                    f"RankGroup: the store ({type(store).__name__}) has no {method}(); "
                    "set, get and add are needed (a torch.distributed store or "
                    "zerojit.FileStore)"
                )
        self.rank = rank
        self.world_size = world_size
        self.store = store
        self.timeout = float(timeout)
        self.prefix = str(prefix)
        self.miss = None  # the first runtime JIT a watch saw: {"rank", "kernel", "key", "kind"}
        self._rounds = 0
        self._watch = None
        self._published = False
        self._lock = threading.Lock()

    def __repr__(self):
        return (
            f"zerojit.RankGroup(rank={self.rank}, world_size={self.world_size}, "
            f"prefix={self.prefix!r})"
        )

    def _key(self, *parts):
        return "/".join([self.prefix, *(str(part) for part in parts)])

    # --- warmup agreement -------------------------------------------------------------------

    def publish(self, record):
        """Publishes this rank's record of the next round without waiting for the others (a
        rank whose warmup failed: the others name it at once)."""
        self._rounds += 1
        base = self._key("warmup", self._rounds)
        record = dict(record, rank=self.rank)
        self.store.set(f"{base}/{self.rank}", json.dumps(record))
        # The flag after the value: a rank that sees the flag can get the value without waiting.
        self.store.add(f"{base}/{self.rank}/set", 1)
        return base, record, self.store.add(f"{base}/arrived", 1)

    def agree(self, record, report=None):
        """Publishes this rank's warmup record and compares it with every other rank's; raises
        zerojit.RankAgreementError on every rank when they differ or one never publishes within
        the timeout. Warmup calls it; each call is one round, so every rank must warm up with
        the group the same number of times. Returns every rank's record."""
        base, record, arrived = self.publish(record)
        deadline = time.monotonic() + self.timeout
        pause = 0.005
        # One counter while waiting (one store call per poll whatever the group's size); each
        # rank's flag only once all arrived, or at the deadline to name the missing.
        while arrived < self.world_size and time.monotonic() < deadline:
            time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
            pause = min(pause * 2, 0.1)
            arrived = self.store.add(f"{base}/arrived", 0)
        records, missing = {}, []
        for other in range(self.world_size):
            if other == self.rank:
                records[other] = record
            elif self.store.add(f"{base}/{other}/set", 0) > 0:
                records[other] = json.loads(self.store.get(f"{base}/{other}"))
            else:
                missing.append(other)
        found = agreement.disagreement(records, self.world_size, missing, self.timeout, self.prefix)
        if found is not None:
            message, ranks, missing, differences = found
            if missing:
                # A rank that arrives after this one gave up sees every record and would agree,
                # then serve alone: the verdict tells it the round failed.
                self.store.set(f"{base}/verdict", json.dumps([message, ranks, missing]))
                self.store.add(f"{base}/failed", 1)
            raise RankAgreementError(message, ranks, missing, differences, report)
        if self.store.add(f"{base}/failed", 0) > 0:
            message, ranks, missing = json.loads(self.store.get(f"{base}/verdict"))
            message += f"\n  (rank {self.rank} published after another rank's timeout)"
            raise RankAgreementError(message, ranks, missing, [], report)
        return records

    # --- runtime misses ---------------------------------------------------------------------

    def report_miss(self, kernel, key, kind="compile"):
        """Publishes a runtime JIT of this rank, so that every watching rank stops. The watch
        calls it from the monitor's callback; an engine may call it for misses of its own.
        Only the first is published (the group stops on it)."""
        with self._lock:
            if self._published:
                return
            self._published = True
        event = {"rank": self.rank, "kernel": kernel, "key": key, "kind": kind}
        self.store.set(self._key("miss", self.rank), json.dumps(event))
        self.store.add(self._key("miss", self.rank, "set"), 1)
        self.store.add(self._key("miss", "any"), 1)

    def watch(self, on_miss=None, interval=0.05):
        """Starts watching for runtime JITs (opt-in; once, after warmup): this rank's are
        published through the monitor's callback (chained after any callback already set), and
        a daemon thread polls the store every ``interval`` seconds for another rank's.

        On another rank's event (and on this rank's in fallback mode, where the rank itself
        would go on) ``on_miss(rank, kernel, key)`` is called from the watch's thread; without
        ``on_miss``, zerojit.RankRuntimeJitError naming the rank, kernel and key is raised in
        the main thread, at once, as a Ctrl-C would be (a SIGINT to the main thread through a
        handler that chains the one in place; without the main thread at watch() time, the
        main thread gets a KeyboardInterrupt and ``group.miss`` names the event). A rank in
        error mode raises its own RuntimeJitError and is not interrupted again. Returns the
        group (a context manager that stops the watch)."""
        if self._watch is not None:
            raise RuntimeError(f"{self!r} is already watching")
        self._watch = _Watch(self, on_miss, float(interval))
        self._watch.start()
        return self

    def unwatch(self):
        """Stops the watch, and puts the monitor callback and the SIGINT handler back (where
        nothing replaced them since)."""
        watch, self._watch = self._watch, None
        if watch is not None:
            watch.stop()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.unwatch()
        return False


def warmup_record(report, expanded, languages, config_args=None):
    """This rank's record of a finished warmup (agreement.make_record): each key of the report
    with its program identity (a C++ kernel's keys have none from Python: their text, arch and
    compiler stand for it), the compiler of each language on each arch, and the DSv4
    configuration when the warmup had one."""
    slots = {}
    for handle, _tag, handle_slots, *_ in expanded:
        for slot in handle_slots:
            slots[(handle.name, handle.slot_text(slot))] = (handle, slot)
    entries = []
    for key in report.get("keys", []):
        kernel, text, arch = key["kernel"], key["key"], key["arch"]
        if key.get("origin") == "failed":
            identity = "failed: " + (key.get("error") or "").strip().split("\n")[0]
        elif (kernel, text) in slots:
            handle, slot = slots[(kernel, text)]
            try:
                identity = handle.identity(slot, arch)
            except Exception as error:  # e.g. a compiler gone: the key still compares
                identity = f"no identity: {type(error).__name__}"
        else:
            identity = ""
        entries.append((kernel, text, arch, identity))
    compilers = {}
    used = {languages.get(key["kernel"], "cuda") for key in report.get("keys", [])}
    for language in sorted(used):
        for arch in report.get("archs", []):
            try:
                compilers[f"{language}@{arch}"] = _core.compiler_version(language, arch)
            except Exception as error:
                compilers[f"{language}@{arch}"] = f"unknown ({type(error).__name__})"
    config = json.loads(_core.config_json(**config_args)) if config_args is not None else None
    return agreement.make_record(None, report, entries, compilers, config)


def publish_aborted(group, error):
    """Publishes that this rank's warmup raised, for the others to name it at once; never
    raises (the warmup's own error is the one to see)."""
    text = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    try:
        group.publish(agreement.make_record(group.rank, aborted=text))
    except Exception as failure:
        LOGGER.warning("zerojit: could not tell the group that warmup failed: %s", failure)


class _Watch:
    def __init__(self, group, on_miss, interval):
        self.group = group
        self.on_miss = on_miss
        self.interval = interval
        self.stopped = threading.Event()
        self.local = None  # this rank's event, when it should stop this rank too
        self.pending = None  # the event the SIGINT handler is to raise
        self.thread = threading.Thread(target=self.run, name="zerojit-rank-watch", daemon=True)
        self.previous_callback = None
        self.previous_handler = None
        self.handler = None

    def start(self):
        from zerojit import hooks

        self.previous_callback = hooks.monitor_callback()
        hooks.set_monitor_callback(self.on_event)
        if self.on_miss is None and threading.current_thread() is threading.main_thread():
            self.previous_handler = signal.getsignal(signal.SIGINT)
            self.handler = self.on_sigint
            signal.signal(signal.SIGINT, self.handler)
        self.thread.start()

    def stop(self):
        from zerojit import hooks

        self.stopped.set()
        if threading.current_thread() is not self.thread:
            self.thread.join(timeout=max(1.0, 4 * self.interval))
        if hooks.monitor_callback() == self.on_event:
            hooks.set_monitor_callback(self.previous_callback)
        if (
            self.handler is not None
            and threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGINT) == self.handler
        ):
            signal.signal(signal.SIGINT, self.previous_handler)

    # On the launching thread, before an error-mode refusal is raised: publish first (stopping
    # the others is the point), then the callback that was there before.
    def on_event(self, event):
        mode = _core.monitor_mode()
        if event.get("kind") in STOPPING_KINDS.get(mode, ()):
            try:
                self.group.report_miss(event.get("kernel"), event.get("key"), event.get("kind"))
            except Exception as error:  # a store that fails must not change the launch's error
                LOGGER.warning("zerojit: could not publish a runtime JIT to the group: %s", error)
            if mode != "error" and self.local is None:
                self.local = dict(event, rank=self.group.rank)
        if self.previous_callback is not None:
            self.previous_callback(event)

    def run(self):
        group, store = self.group, self.group.store
        seen_any = 0
        failing = False
        while not self.stopped.wait(self.interval):
            if self.local is not None:
                return self.fire(self.local)
            try:
                count = store.add(group._key("miss", "any"), 0)
                failing = False
                if count <= seen_any:
                    continue
                seen_any = count
                for other in range(group.world_size):
                    if other != group.rank and store.add(group._key("miss", other, "set"), 0):
                        return self.fire(json.loads(store.get(group._key("miss", other))))
            except Exception as error:  # the store went away (its host ended): say so once
                if not failing:
                    LOGGER.warning("zerojit: the rank watch cannot read the store: %s", error)
                failing = True

    def fire(self, event):
        group = self.group
        group.miss = event
        if self.on_miss is not None:
            try:
                self.on_miss(event["rank"], event["kernel"], event["key"])
            except Exception:
                LOGGER.exception("zerojit: the rank watch's on_miss raised")
            return
        LOGGER.error(
            "zerojit: rank %s met a runtime JIT (%s of %s [%s]); stopping rank %s",
            event["rank"],
            event.get("kind"),
            event["kernel"],
            event["key"],
            group.rank,
        )
        if self.handler is not None:
            self.pending = event
            # A signal, not only a flag: it also ends a blocking call of the main thread (a
            # sleep, a wait on a socket) that a flag would leave waiting.
            signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
        else:
            import _thread

            _thread.interrupt_main()

    def on_sigint(self, signum, frame):
        event, self.pending = self.pending, None
        if event is not None:
            raise RankRuntimeJitError(
                f"rank {event['rank']} of {self.group.world_size} met a runtime JIT "
                f"({event.get('kind')} of kernel {event['kernel']} [{event['key']}]), so rank "
                f"{self.group.rank} stops too (zerojit.RankGroup.watch)",
                event["rank"],
                event["kernel"],
                event["key"],
                event.get("kind"),
            )
        previous = self.previous_handler
        if callable(previous):
            return previous(signum, frame)
        if previous == signal.SIG_IGN:
            return None
        raise KeyboardInterrupt
