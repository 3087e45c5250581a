"""Running code when a module of torch's is imported, without importing it first.

The device registers with Inductor and Dynamo, and adjusts a few of Inductor's
answers, once those modules exist: importing them at plugin load would cost every
program about a second, compiling or not.
"""
from __future__ import annotations

import importlib.abc
import importlib.util
import sys


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs fn(module) once the module `name` has executed, if it is imported later."""

    def __init__(self, name: str, fn):
        self.name, self.fn = name, fn

    def find_spec(self, fullname, path, target=None):
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None:
            return spec
        execute, fn = spec.loader.exec_module, self.fn

        def exec_module(module):
            execute(module)
            fn(module)

        spec.loader.exec_module = exec_module
        return spec


def when_imported(name: str, fn) -> None:
    """fn(module) now if `name` is imported already, else right after it is."""
    module = sys.modules.get(name)
    if module is not None:
        fn(module)
    else:
        sys.meta_path.insert(0, _AfterImport(name, fn))
