"""The package's C++ extensions (_fast_call, _python_kernels), found beside
libbackplane_core.so: built per Python version by the build, and only where it found
Python's headers."""
from __future__ import annotations

import importlib.machinery
import importlib.util
import sys


def load_extension(stem: str):
    """(module backplane.<stem>, "") when the build made it for this Python, else (None, why)."""
    from ._native import lib_dir

    directory = lib_dir()
    found = [directory / f"{stem}{suffix}" for suffix in importlib.machinery.EXTENSION_SUFFIXES
             if (directory / f"{stem}{suffix}").is_file()]
    if not found:
        return None, (f"no {stem} extension in {directory} for this Python (the build found no Python headers; "
                      "install python3-dev and rebuild)")
    name = f"backplane.{stem}"
    if name in sys.modules:
        return sys.modules[name], ""
    spec = importlib.util.spec_from_file_location(name, found[0])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules[name] = module
    return module, ""
