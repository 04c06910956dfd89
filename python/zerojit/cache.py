"""The persistent compile cache: content-addressed, checksummed entries under a cache root,
shared by every process that names the same root (docs/CACHE.md).

Each function takes the root as ``cache_dir`` (default: ``$ZEROJIT_CACHE_DIR``, else
``$XDG_CACHE_HOME/zerojit``, else ``~/.cache/zerojit``): a str, bytes or os.PathLike, also one
that is not UTF-8 (as the tool takes it). A missing root is not created. The read-only layers
of ``$ZEROJIT_CACHE_READONLY_DIRS`` are read with every root, "off" included.
"""

import json

from zerojit import _core
from zerojit.runtime.environment import path_bytes

__all__ = ["ls", "verify", "gc", "clear", "default_dir", "set_dir", "describe"]


def _root(cache_dir):
    return None if cache_dir is None else path_bytes(cache_dir)


def ls(cache_dir=None):
    """Every entry (read-only layers first): a list of dicts with identity, kernel, key, arch,
    language ("cuda", "triton"), compiler (its version; "nvrtc" keeps NVRTC's for CUDA C++
    entries), size, age_seconds, layer, read_only and status ("ok" or what is wrong)."""
    return json.loads(_core.cache_list(_root(cache_dir)))


def verify(cache_dir=None, set_aside=False):
    """Reads and checks every entry; with ``set_aside``, damaged entries of the root move to its
    quarantine. Returns {"checked", "valid", "bad": [...], ...}."""
    return json.loads(_core.cache_verify(_root(cache_dir), bool(set_aside)))


def gc(cache_dir=None, max_bytes=None):
    """Trims the root to ``max_bytes`` (default: the quota), least recently used first, and
    removes abandoned temporaries and stale locks. Returns what it removed and kept."""
    return json.loads(_core.cache_gc(_root(cache_dir), max_bytes))


def clear(cache_dir=None):
    """Removes every entry of the root that no process is reading. Returns what it removed."""
    return json.loads(_core.cache_clear(_root(cache_dir)))


def default_dir():
    """The default root, or None when ``ZEROJIT_CACHE_DIR=off`` or no home is known."""
    return _core.cache_default_root()


def set_dir(cache_dir):
    """Installs the cache this process compiles through: a root directory, "off" (no writable
    root: only the read-only layers of ``$ZEROJIT_CACHE_READONLY_DIRS``, memory only without
    them), or None (the default from the environment)."""
    _core.set_cache_dir(_root(cache_dir))


def describe():
    """The cache this process compiles through, in words."""
    return _core.cache_describe()
