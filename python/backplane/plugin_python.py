"""A plugin's own Python, and plugins installed as Python packages.

Nothing in this package names a backend. A plugin brings its Python side (a device
module such as torch.npu, fake registrations, helpers) in one of two ways:

- its manifest names a package (`python_module`) in a directory beside the library
  (`python_path`); `backplane_add_plugin(... PYTHON_MODULE m PYTHON_SOURCES dir)` writes
  both. backplane.load() imports it once the library is open and calls its
  `on_load(plugin_path)` if it has one;
- a plugin shipped as its own wheel declares an entry point in the group
  `backplane.plugins` (backplane_plugins.py puts its directory on the search path); its
  manifest may name its Python side the same way.
"""
from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path

from ._native import BackendError


def plugin_module(backend):
    """The plugin's Python package named by its manifest, imported (once)."""
    name = backend.python_module
    if name in sys.modules:
        return sys.modules[name]
    init = Path(backend.python_path) / name / "__init__.py" if backend.python_path else None
    if init is not None and init.is_file():
        # Loaded from the plugin's own directory, not whatever sys.path finds first.
        spec = importlib.util.spec_from_file_location(name, init, submodule_search_locations=[str(init.parent)])
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
        return module
    try:
        return importlib.import_module(name)  # a plugin wheel's package, importable already
    except ImportError as err:
        raise BackendError(
            f"backend '{backend.name}' ({backend.path}): its manifest names Python module {name!r}, "
            + (f"found neither {init} nor an importable module: {err}" if init else f"found no importable module: {err}")
        ) from err
