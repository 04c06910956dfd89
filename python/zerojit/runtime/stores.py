"""The stores a ``zerojit.RankGroup`` can use besides torch.distributed's:
``zerojit.FileStore(path)``, a directory, for the ranks of one host (or of a shared filesystem)
and for tests; and ``zerojit.RedisStore(url=None, prefix=None, timeout=300)``, a Redis server
(the remote cache tier's client, compiled: include/zerojit/redis_store.hpp), for ranks on
several hosts.

Both have the same methods, with torch.distributed's store semantics: ``set(key, value)``,
``get(key) -> bytes``, ``add(key, n) -> int`` (``add(key, 0)`` reads a counter without creating
it), ``check(keys)``, ``wait(keys, timeout=None)`` and ``delete_key(key)``. Every wait is
bounded: a missing key's ``get`` and ``wait`` raise TimeoutError after ``timeout`` seconds.

In a FileStore every value is one file, written whole to a temporary name and renamed over the
key's, so a reader sees the old value or the new one, never a part; ``add`` takes an ``flock``
on the key's lock file, so processes may count on one key at once.

A RedisStore takes the remote tier's variables (``ZEROJIT_REMOTE_CACHE``, ``..._PASSWORD``,
``..._PREFIX``, the timeouts and TLS: docs/CACHE.md) where its arguments are not given; its
keys live under ``<prefix>:store:``. A server that cannot be reached in time raises
``zerojit.Error`` naming the command and the key (never the password).
"""

import base64
import fcntl
import hashlib
import os
import tempfile
import time

from zerojit import _core

__all__ = ["FileStore", "RedisStore"]

RedisStore = _core.RedisStore


class FileStore:
    """A store in the directory ``path`` (created if missing). ``timeout``: how long ``get`` and
    ``wait`` wait for a key that is not there yet (seconds)."""

    def __init__(self, path, timeout=300.0):
        self.path = os.fspath(path)
        self.timeout = float(timeout)
        os.makedirs(self.path, exist_ok=True)

    def _file(self, key):
        # A key may hold any character ("/" included): its file name is its URL-safe base64.
        # A name longer than a file name may be is its hash.
        text = key.encode() if isinstance(key, str) else bytes(key)
        name = base64.urlsafe_b64encode(text).decode()
        if len(name) > 200:
            name = hashlib.sha256(text).hexdigest()
        return os.path.join(self.path, name + ".v")

    def set(self, key, value):
        data = value.encode() if isinstance(value, str) else bytes(value)
        target = self._file(key)
        descriptor, temporary = tempfile.mkstemp(dir=self.path, prefix=".tmp-")
        try:
            with os.fdopen(descriptor, "wb") as handle:
                handle.write(data)
            os.replace(temporary, target)
        except BaseException:
            try:
                os.unlink(temporary)
            except OSError:
                pass
            raise

    def _read(self, key):
        try:
            with open(self._file(key), "rb") as handle:
                return handle.read()
        except FileNotFoundError:
            return None

    def get(self, key):
        """The value of ``key`` as bytes, once it is set (waits up to ``timeout``)."""
        self.wait([key])
        value = self._read(key)
        if value is None:  # deleted meanwhile
            raise KeyError(key)
        return value

    def check(self, keys):
        """Whether every key is set (never waits)."""
        return all(os.path.exists(self._file(key)) for key in keys)

    def wait(self, keys, timeout=None):
        """Returns once every key is set; a TimeoutError naming the missing ones after
        ``timeout`` seconds (default: the store's)."""
        deadline = time.monotonic() + (self.timeout if timeout is None else float(timeout))
        pause = 0.002
        while True:
            missing = [key for key in keys if not os.path.exists(self._file(key))]
            if not missing:
                return
            if time.monotonic() >= deadline:
                raise TimeoutError(f"zerojit.FileStore({self.path!r}): keys not set: {missing}")
            time.sleep(pause)
            pause = min(pause * 2, 0.05)

    def add(self, key, amount):
        """Adds ``amount`` to the integer at ``key`` (0 when unset) and returns the sum.
        ``add(key, 0)`` reads the counter without a lock and without creating it."""
        amount = int(amount)
        if amount == 0:
            value = self._read(key)
            return int(value) if value else 0
        with open(self._file(key) + ".lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
            value = self._read(key)
            total = (int(value) if value else 0) + amount
            self.set(key, str(total))
            return total

    def delete_key(self, key):
        try:
            os.unlink(self._file(key))
            return True
        except FileNotFoundError:
            return False

    def __repr__(self):
        return f"zerojit.FileStore({self.path!r})"
