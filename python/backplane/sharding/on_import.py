"""Runs a function once a module is imported: now, if it already is, else right after
its first import finishes. Importing DTensor costs a second of a one-process program
that never uses it, so its sharding rules wait for DTensor to be imported by whoever
uses it (torch.distributed.tensor, fully_shard, tensor parallelism all import it)."""
from __future__ import annotations

import importlib.abc
import importlib.util
import sys


def after_import(module: str, run) -> None:
    if module in sys.modules:
        run()
        return
    sys.meta_path.insert(0, _Finder(module, run))


class _Finder(importlib.abc.MetaPathFinder):
    def __init__(self, module: str, run):
        self.module, self.run = module, run

    def find_spec(self, name, path=None, target=None):
        if name != self.module:
            return None
        sys.meta_path.remove(self)  # once; the real finders locate the module
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        exec_module, run = spec.loader.exec_module, self.run

        def exec_then_run(module):
            exec_module(module)
            run()

        spec.loader.exec_module = exec_then_run
        return spec
