"""Runs a function on a module right after it is imported, whoever imports it: how the guards
of kernel languages zerojit does not own (_triton_guard, _cute_guard) hook a compiler that is
imported after zerojit, or never.

The finder stays on ``sys.meta_path`` until the module has really been executed: a lookup that
does not import (``importlib.util.find_spec``, which zerojit's own warmup makes to read Triton's
version without importing it) returns a spec whose loader still calls the hook, and the next
lookup is hooked again. It steps aside only while it asks the other finders for the real spec.
"""

import importlib.abc
import importlib.util
import sys
import threading

__all__ = ["call_after_import"]


class _AfterImport(importlib.abc.MetaPathFinder):
    def __init__(self, name, install):
        self.name = name
        self.install = install
        self._asking = threading.local()  # this thread is asking the other finders

    def find_spec(self, name, path=None, target=None):
        if name != self.name or getattr(self._asking, "value", False):
            return None
        self._asking.value = True
        try:
            spec = _find(name, path, target)
        finally:
            self._asking.value = False
        if spec is None or spec.loader is None or isinstance(spec.loader, _HookedLoader):
            return spec
        spec.loader = _HookedLoader(spec.loader, self)
        return spec

    def executed(self, module):
        """The module ran: install the hook once, and stop watching."""
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        self.install(module)


def _find(name, path, target):
    """The spec the other finders give (`path`: the parent package's, for a submodule)."""
    for finder in sys.meta_path:
        if isinstance(finder, _AfterImport):
            continue
        find = getattr(finder, "find_spec", None)
        spec = find(name, path, target) if find is not None else None
        if spec is not None:
            return spec
    return None


class _HookedLoader(importlib.abc.Loader):
    """The real loader, and the hook right after it executed the module."""

    def __init__(self, loader, finder):
        self._loader = loader
        self._finder = finder

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        self._finder.executed(module)

    def __getattr__(self, name):  # get_resource_reader, is_package, ... of the real loader
        return getattr(self._loader, name)


def call_after_import(name, install):
    """Calls install(module) now if module `name` is imported, else right after its import,
    whatever lookups come before it."""
    module = sys.modules.get(name)
    if module is not None:
        install(module)
    elif not any(
        isinstance(finder, _AfterImport) and finder.name == name for finder in sys.meta_path
    ):
        sys.meta_path.insert(0, _AfterImport(name, install))
