"""Compile worker processes for the kernel languages whose compilers are Python (Triton,
CuTeDSL).

One interpreter compiles one kernel at a time, so compiles run in worker processes. Workers
are never forks of the serving process (it may hold CUDA contexts and threads, and a fork of it
would run Python in a copy of locks that other threads held). Instead one fresh interpreter per
compiler, the *zygote*, imports the compiler once (``python -c ... zerojit.languages.compile_worker
zygote``) and forks the workers from itself on request: a worker starts in milliseconds with the
compiler already imported, so N workers cost one import, not N. Workers start on demand, up to
``limit`` at once, are reused, and stop at the end of a warmup (``shutdown``) and at exit. The
parent waits for a reply without the GIL, within ``ZEROJIT_COMPILE_TIMEOUT_S`` (default 600 s);
a worker that dies or overruns costs its compile (an error naming the kernel and key) and is not
used again.

Each worker talks to the parent over its own socket pair, handed to the zygote with the fork
request (SCM_RIGHTS). Messages are length-prefixed pickles (the workers are this process's own
children, started from its own interpreter, so their replies are trusted as the parent's own
code).
"""

import atexit
import json
import os
import pickle
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

from zerojit.runtime import environment as _environment
from zerojit.runtime.errors import CompileError

__all__ = ["WorkerFailure", "prestart", "run", "set_limit", "shutdown"]

_HEADER = struct.Struct("<Q")
_PID = struct.Struct("<q")
_MAX_REPLY_BYTES = 1 << 30
_START_SECONDS = 120.0  # the zygote's import of a compiler, and one fork
# The worker's module is run from its file, not imported as part of the zerojit package: the
# package's import (its extension, PyTorch's custom ops) is nothing a compiler needs.
_BOOTSTRAP = (
    "import json, os, runpy, sys; "
    "sys.path[:0] = json.loads(os.environ.pop('ZEROJIT_WORKER_SYS_PATH', '[]')); "
    "runpy.run_path(os.environ.pop('ZEROJIT_WORKER_MAIN'), run_name='__main__')"
)
_WORKER_MAIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "compile_worker.py")


class WorkerFailure(CompileError):
    """A worker died, stopped answering or overran its time; the message says which."""


def _timeout():
    return _environment.seconds("ZEROJIT_COMPILE_TIMEOUT_S", 600.0)


def _receive(sock, size, deadline, what):
    """`size` bytes from a socket by `deadline`, or WorkerFailure saying `what` failed."""
    chunks, have = [], 0
    while have < size:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(what)
        ready, _, _ = select.select([sock], [], [], min(remaining, 1.0))
        if not ready:
            continue
        chunk = sock.recv(min(size - have, 1 << 20))
        if not chunk:
            raise EOFError(what)
        chunks.append(chunk)
        have += len(chunk)
    return b"".join(chunks)


class _Zygote:
    """The interpreter that has imported a compiler and forks the workers."""

    def __init__(self, preload, env):
        self.scratch = tempfile.mkdtemp(prefix="zerojit-workers-")
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        environment = dict(os.environ)
        environment.update(env)
        environment["ZEROJIT_COMPILE_WORKER"] = "1"
        environment["ZEROJIT_WORKER_SYS_PATH"] = json.dumps([p for p in sys.path if p])
        environment["ZEROJIT_WORKER_PRELOAD"] = json.dumps(preload)
        environment["ZEROJIT_WORKER_SCRATCH"] = self.scratch
        environment["ZEROJIT_WORKER_MAIN"] = _WORKER_MAIN
        # A kernel module that imports zerojit must not pull PyTorch into every worker.
        environment["ZEROJIT_NO_TORCH"] = "1"
        self.stderr = open(os.path.join(self.scratch, "stderr"), "w+b")  # noqa: SIM115
        self.process = subprocess.Popen(
            [sys.executable, "-c", _BOOTSTRAP, "zygote", str(theirs.fileno())],
            pass_fds=(theirs.fileno(),),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self.stderr,
            env=environment,
        )
        theirs.close()
        self.control = ours
        self.lock = threading.Lock()
        self.used = False  # whether it was asked for a worker (else, a prestart no compile used)

    def fork(self):
        """A new worker: (pid, the parent's end of its socket)."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        why = None
        self.used = True
        try:
            with self.lock:
                socket.send_fds(self.control, [b"f"], [theirs.fileno()])
                deadline = time.monotonic() + _START_SECONDS
                (pid,) = _PID.unpack(_receive(self.control, _PID.size, deadline, "a fork"))
                if pid < 0:
                    # The zygote could not import its compiler: it says why (the compiler not
                    # installed for the interpreter the workers run, and which interpreter).
                    (size,) = _HEADER.unpack(
                        _receive(self.control, _HEADER.size, deadline, "a fork")
                    )
                    why = _receive(self.control, size, deadline, "a fork")
        except (OSError, EOFError, TimeoutError) as error:
            ours.close()
            raise WorkerFailure(
                self.failure(
                    f"the compile workers' zygote did not fork a worker ({type(error).__name__})"
                )
            ) from None
        finally:
            theirs.close()
        if why is not None:
            ours.close()
            raise WorkerFailure(why.decode("utf-8", "replace"))
        return pid, ours

    def failure(self, what):
        self.stderr.flush()
        self.stderr.seek(0)
        tail = self.stderr.read()[-2000:].decode("utf-8", "replace").strip()
        return what + (f"; the workers' last output:\n{tail}" if tail else "")

    def alive(self):
        return self.process.poll() is None

    def stop(self):
        self.control.close()  # the zygote exits at the end of its requests
        if not self.used:
            # Prestarted and never used (every key came from the caches): it may still be
            # importing the compiler, which nothing waits for.
            self.process.kill()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.stderr.close()
        shutil.rmtree(self.scratch, ignore_errors=True)


class _Worker:
    def __init__(self, zygote):
        self.zygote = zygote
        self.pid, self.sock = zygote.fork()

    def request(self, message, timeout):
        data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        try:
            self.sock.sendall(_HEADER.pack(len(data)) + data)
            deadline = time.monotonic() + timeout
            (size,) = _HEADER.unpack(_receive(self.sock, _HEADER.size, deadline, "reply"))
            if size > _MAX_REPLY_BYTES:
                raise WorkerFailure(f"the compile worker sent a reply of {size} bytes")
            return pickle.loads(_receive(self.sock, size, deadline, "reply"))
        except TimeoutError:
            self.kill()
            raise WorkerFailure(
                f"the compile worker did not answer within {timeout:g} s "
                "(ZEROJIT_COMPILE_TIMEOUT_S); it was stopped"
            ) from None
        except (EOFError, OSError):
            raise WorkerFailure(
                self.zygote.failure(
                    f"the compile worker (pid {self.pid}) exited during the compile"
                )
            ) from None

    def kill(self):
        try:
            os.kill(self.pid, signal.SIGKILL)
        except OSError:
            pass

    def stop(self):
        self.sock.close()  # the worker exits at the end of its requests


class _Pool:
    """Workers of one compiler (one zygote), at most `limit` at once."""

    def __init__(self, preload, env):
        self._preload, self._env = preload, env
        self._condition = threading.Condition()
        self._idle = []
        self._running = 0  # workers started and not stopped
        self._limit = max(1, os.cpu_count() or 1)
        self._zygote = None

    def set_limit(self, limit):
        with self._condition:
            self._limit = max(1, int(limit))
            self._condition.notify_all()

    def _zygote_alive(self):
        with self._condition:
            if self._zygote is None or not self._zygote.alive():
                if self._zygote is not None:
                    self._zygote.stop()
                self._zygote = _Zygote(self._preload, self._env)
            return self._zygote

    def _take(self):
        with self._condition:
            while True:
                if self._idle:
                    return self._idle.pop()
                if self._running < self._limit:
                    self._running += 1
                    break
                self._condition.wait()
        try:
            return _Worker(self._zygote_alive())
        except BaseException:
            with self._condition:
                self._running -= 1
                self._condition.notify()
            raise

    def _give_back(self, worker, keep):
        with self._condition:
            if keep:
                self._idle.append(worker)
            else:
                self._running -= 1
            self._condition.notify()
        if not keep:
            worker.stop()

    def prestart(self):
        self._zygote_alive()

    def run(self, message):
        worker = self._take()
        keep = False
        try:
            reply = worker.request(message, _timeout())
            keep = True
            return reply
        finally:
            self._give_back(worker, keep)

    def shutdown(self):
        with self._condition:
            idle, self._idle = self._idle, []
            self._running -= len(idle)
            zygote = self._zygote if self._running == 0 else None
            if zygote is not None:
                self._zygote = None
        for worker in idle:
            worker.stop()
        if zygote is not None:
            zygote.stop()


_pools = {}
_pools_lock = threading.Lock()
_limit = [max(1, os.cpu_count() or 1)]


def _pool(language, env):
    # What a zygote that cannot import the compiler says: its name, and how to install it.
    env = dict(
        env,
        ZEROJIT_WORKER_COMPILER=json.dumps([language.compiler, language.install]),
        # Its compile module, whose prepare() (where it has one) the zygote runs before forking.
        ZEROJIT_WORKER_PREPARE=language.compile_file or "",
    )
    key = (tuple(language.preload), tuple(sorted(env.items())))
    with _pools_lock:
        pool = _pools.get(key)
        if pool is None:
            pool = _pools[key] = _Pool(list(language.preload), env)
            pool.set_limit(_limit[0])
        return pool


def run(message, language, env=None):
    """Sends one request to a worker whose zygote imported `language`'s compiler (its row in
    zerojit.languages) with `env` set, and returns its reply (a dict). Raises WorkerFailure
    when the worker dies or overruns the timeout."""
    return _pool(language, env or {}).run(message)


def prestart(language, env=None):
    """Starts the zygote of `language`'s compiler with `env` (as run() would use it) without
    waiting for its import, so that the import overlaps the caller's work until the first
    compile. shutdown() stops it, at once if no compile used it."""
    _pool(language, env or {}).prestart()


def set_limit(limit):
    """At most ``limit`` workers at once per compiler (a warmup's ``jobs``)."""
    with _pools_lock:
        _limit[0] = max(1, int(limit))
        pools = list(_pools.values())
    for pool in pools:
        pool.set_limit(limit)


def shutdown():
    """Stops the idle workers and their zygotes (a warmup's end; a later compile starts new
    ones)."""
    with _pools_lock:
        pools = list(_pools.values())
    for pool in pools:
        pool.shutdown()


atexit.register(shutdown)
