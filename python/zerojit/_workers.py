"""Compile worker processes for the kernel languages whose compilers are Python (Triton,
CuTeDSL).

One interpreter compiles one kernel at a time, so compiles run in worker processes: each a
fresh ``python`` running ``zerojit._compile_worker`` (not a fork: the serving process may hold
CUDA contexts and threads, and a fork of it would run Python in a copy of locks that other
threads held). Workers start on demand, up to ``limit`` at once, are reused, and stop at the end
of a warmup (``shutdown``) and at exit. The parent waits for a reply without the GIL, within
``ZEROJIT_COMPILE_TIMEOUT_S`` (default 600 s); a worker that dies or overruns costs its compile
(an error naming the kernel and key) and is not used again.

Messages are length-prefixed pickles on the worker's standard input and output (a worker is
this process's own child, started from its own interpreter, so its replies are trusted as the
parent's own code).
"""

import atexit
import json
import os
import pickle
import select
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time

from . import _environment
from ._errors import CompileError

__all__ = ["run", "set_limit", "shutdown", "WorkerFailure"]

_HEADER = struct.Struct("<Q")
_MAX_REPLY_BYTES = 1 << 30
_BOOTSTRAP = (
    "import json, os, runpy, sys; "
    "sys.path[:0] = json.loads(os.environ.pop('ZEROJIT_WORKER_SYS_PATH', '[]')); "
    "runpy.run_module('zerojit._compile_worker', run_name='__main__')"
)


class WorkerFailure(CompileError):
    """A worker died, stopped answering or overran its time; the message says which."""


def _timeout():
    return _environment.seconds("ZEROJIT_COMPILE_TIMEOUT_S", 600.0)


class _Worker:
    def __init__(self):
        self.scratch = tempfile.mkdtemp(prefix="zerojit-worker-")
        env = dict(os.environ)
        env["ZEROJIT_COMPILE_WORKER"] = "1"
        env["ZEROJIT_WORKER_SYS_PATH"] = json.dumps([p for p in sys.path if p])
        # Triton's own cache is private to the worker and removed with it: zerojit's tiers are
        # the cache, and a compile that reaches a worker must really compile.
        env["TRITON_CACHE_DIR"] = os.path.join(self.scratch, "triton-cache")
        self.stderr = open(os.path.join(self.scratch, "stderr"), "w+b")
        self.process = subprocess.Popen(
            [sys.executable, "-c", _BOOTSTRAP], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=self.stderr, env=env, close_fds=True)

    def request(self, message, timeout):
        data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        try:
            self.process.stdin.write(_HEADER.pack(len(data)) + data)
            self.process.stdin.flush()
        except (BrokenPipeError, OSError):
            raise WorkerFailure(self._death("it exited before taking the request")) from None
        deadline = time.monotonic() + timeout
        header = self._read(_HEADER.size, deadline, timeout)
        (size,) = _HEADER.unpack(header)
        if size > _MAX_REPLY_BYTES:
            raise WorkerFailure(f"the compile worker sent a reply of {size} bytes")
        return pickle.loads(self._read(size, deadline, timeout))

    def _read(self, size, deadline, timeout):
        fd = self.process.stdout.fileno()
        chunks, have = [], 0
        while have < size:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise WorkerFailure(f"the compile worker did not answer within {timeout:g} s "
                                    "(ZEROJIT_COMPILE_TIMEOUT_S); it was stopped")
            ready, _, _ = select.select([fd], [], [], min(remaining, 1.0))
            if not ready:
                continue
            chunk = os.read(fd, min(size - have, 1 << 20))
            if not chunk:
                raise WorkerFailure(self._death("it exited during the compile"))
            chunks.append(chunk)
            have += len(chunk)
        return b"".join(chunks)

    def _death(self, what):
        try:
            code = self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = None
        self.stderr.seek(0)
        tail = self.stderr.read()[-2000:].decode("utf-8", "replace").strip()
        return (f"the compile worker failed: {what} (exit status {code})"
                + (f"; its last output:\n{tail}" if tail else ""))

    def stop(self):
        if self.process.poll() is None:
            try:
                self.process.stdin.close()  # end of requests: the worker exits
                self.process.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                self.process.kill()
                self.process.wait()
        for stream in (self.process.stdout, self.stderr):
            try:
                stream.close()
            except OSError:
                pass
        shutil.rmtree(self.scratch, ignore_errors=True)


class _Pool:
    def __init__(self):
        self._condition = threading.Condition()
        self._idle = []
        self._running = 0  # workers started and not stopped
        self._limit = max(1, os.cpu_count() or 1)

    def set_limit(self, limit):
        with self._condition:
            self._limit = max(1, int(limit))
            self._condition.notify_all()

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
            return _Worker()
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
        for worker in idle:
            worker.stop()


_pool = _Pool()


def run(message):
    """Sends one request to a worker and returns its reply (a dict). Raises WorkerFailure when
    the worker dies or overruns the timeout."""
    return _pool.run(message)


def set_limit(limit):
    """At most ``limit`` workers at once (a warmup's ``jobs``)."""
    _pool.set_limit(limit)


def shutdown():
    """Stops the idle workers (a warmup's end; a later compile starts new ones)."""
    _pool.shutdown()


atexit.register(shutdown)
