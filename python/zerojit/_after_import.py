"""Runs a function on a module right after it is imported, whoever imports it: how the guards
of kernel languages zerojit does not own (_triton_guard, _cute_guard) hook a compiler that is
imported after zerojit, or never."""

import importlib.abc
import importlib.util
import sys

__all__ = ["call_after_import"]


class _AfterImport(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, name, install):
        self.name = name
        self.install = install
        self._loader = None

    def find_spec(self, name, path=None, target=None):
        if name != self.name:
            return None
        sys.meta_path.remove(self)  # find the real spec, and hook this import only
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        self._loader = spec.loader
        spec.loader = self
        return spec

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        self.install(module)


def call_after_import(name, install):
    """Calls install(module) now if module `name` is imported, else right after its import."""
    module = sys.modules.get(name)
    if module is not None:
        install(module)
    elif not any(
        isinstance(finder, _AfterImport) and finder.name == name for finder in sys.meta_path
    ):
        sys.meta_path.insert(0, _AfterImport(name, install))
