"""Running code when a module is imported, without importing it first.

Registrations with parts of torch a program may never use wait for their import: the
npu device registers with Inductor and Dynamo once those modules exist, and the sharding
rules (sharding/) with DTensor once torch.distributed.tensor is imported. Importing them
at load would cost every program about a second each, using them or not.
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
