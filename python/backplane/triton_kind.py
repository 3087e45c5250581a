"""The Python side of plugins of kind triton: kernels that are Python launchers.

A triton plugin is a Python package, not a library. Its manifest
(libbackplane_<name>.manifest.yaml, on the plugin search path or in the package of a
`backplane.plugins` entry point) says `kind: triton`, names the package (python_module),
the ops it serves and the Triton and torch releases it supports. The package's
`kernels()` returns {op name: launcher}; a launcher follows BACKPLANE_KERNEL's convention:
launcher(out, *op_arguments) (two outputs: launcher(out0, out1, *args); an op that writes
an argument: launcher(*args)), with outputs already allocated by the core, writes them and
returns None.

Ops of its own: the manifest may name a registry fragment (`registry: ops.yaml`, relative
to the manifest, as a library's manifest does: docs/vendor-ops.md). The core reads, checks
and defines it; nothing here reads it. The core defines it after target() has imported the
package and before launchers() is called, so kernels() may key those ops by id
("tlx::scale_add") while the package's import-time code cannot use them yet.

install() hands the core's loader two functions through the bridge extension
(backplane._python_kernels, python/src/python_kernels.cpp):

- target(record): where the plugin can serve here, or why it cannot (the backend is then
  `unavailable`, with that reason): the `triton` module must import and be in range, the
  package must import, and Triton needs a CUDA device, except under TRITON_INTERPRET=1
  (Triton's CPU interpreter), where the plugin serves the CPU key instead, for tests only;
- launchers(record): the package's kernels(), which the bridge checks against the
  manifest's ops and offers to the core one by one;
- recorder(record): the package's launch_record.record_call, where it has that module (the
  in-tree plugin does: backends/triton/backplane_triton/launch_record.py), else None. With
  it the bridge keeps a launch cache: a call's kernel launches, recorded once, are replayed
  from C++ for later calls of the same shapes, without Python (python/src/python_kernels.cpp;
  BACKPLANE_TRITON_LAUNCH_CACHE=0 when the plugin loads turns it off).

The loader calls both with its mutex held, on the thread that asked for the load or the
listing, with the GIL taken by the bridge. Listing (backplane.backends(), and so ops() and
`import backplane`) imports nothing: it finds Triton and the package without running them,
as a library is listed without dlopen; loading imports them, so a package whose import
fails is listed available and is unavailable, with the error, when loaded.
"""
from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.metadata
import importlib.util
import os
import sys
from pathlib import Path
from types import SimpleNamespace

from .plugin_python import plugin_module

KIND = "triton"

_status = "not installed yet"


def _interpreting() -> bool:
    # Triton reads it when a kernel is decorated, so it is read here at every target().
    return os.environ.get("TRITON_INTERPRET") == "1"


def _backend(record: dict) -> SimpleNamespace:
    # What plugin_module() reads of a Backend.
    return SimpleNamespace(name=record["name"], path=record["path"], python_module=record["python_module"],
                           python_path=record["python_path"])


def _not_importable(name: str, directory: str = "") -> str:
    """Why module `name` (in `directory` when given, as plugin_module finds it) cannot be
    found without importing it; "" when it can."""
    if directory:
        base = Path(directory) / name.replace(".", "/")
        return "" if (base / "__init__.py").is_file() or base.with_suffix(".py").is_file() else (
            f"No module named {name!r} in {directory}")
    if name in sys.modules and sys.modules[name] is None:
        return f"import of {name} halted; None in sys.modules"
    try:
        return "" if importlib.util.find_spec(name) is not None else f"No module named {name!r}"
    except (ImportError, ValueError) as err:
        return str(err)


def _triton_version(opening: bool) -> tuple[str, str]:
    """(Triton's version, "") or ("", why there is no usable triton module). Imported when
    `opening`; else read from its distribution's metadata (no import), "" if it has none."""
    if opening:
        try:
            return str(getattr(importlib.import_module("triton"), "__version__", "")), ""
        except ImportError as err:
            return "", str(err)
    why = _not_importable("triton")
    if why:
        return "", why
    module = sys.modules.get("triton")
    if module is not None:
        return str(getattr(module, "__version__", "")), ""
    try:
        return importlib.metadata.version("triton"), ""
    except importlib.metadata.PackageNotFoundError:
        return "", ""  # a triton without metadata: its version is checked when it loads


def target(record: dict, opening: bool) -> tuple[str, str, str]:
    """(dispatch key, note, "") where the plugin can serve here; ("", "", why) where not.
    Listing (`opening` false) imports nothing: it finds Triton and the package without
    running them; a load imports both, so an import that fails is the reason."""
    def unavailable(why: str):
        return "", "", why

    version, why = _triton_version(opening)
    if why:
        return unavailable(f"no usable 'triton' module in this Python ({why}); install Triton ({record['triton_versions']})")
    if (version or opening) and not _native.version_in_range(version, record["triton_versions"]):
        return unavailable(f"supports triton {record['triton_versions']}, this Python has triton {version or '(no version)'}")
    if _interpreting():
        key = "CPU"
        note = (f"TRITON_INTERPRET=1: Triton's CPU interpreter runs its kernels, which serve the CPU key instead "
                f"of {record['dispatch_key']}; for tests only (slow)")
    else:
        import torch

        if record["dispatch_key"] == "CUDA" and not torch.cuda.is_available():
            return unavailable("no CUDA device: Triton compiles its kernels for CUDA, and torch.cuda.is_available() "
                               "is False here (TRITON_INTERPRET=1 runs them on the CPU, for tests only)")
        key, note = record["dispatch_key"], ""
    if not opening:
        why = _not_importable(record["python_module"], record["python_path"])
        if why:
            return unavailable(f"its package {record['python_module']!r} cannot be imported: {why}")
        return key, note, ""
    try:
        plugin_module(_backend(record))
    except ImportError as err:  # BackendError (no such module) is one too: it says which
        return unavailable(f"its package {record['python_module']!r} cannot be imported: {err}")
    return key, note, ""


def launchers(record: dict) -> dict:
    """The package's kernels(): {op name: launcher}. Raises TypeError saying what is wrong."""
    module = plugin_module(_backend(record))
    kernels = getattr(module, "kernels", None)
    if not callable(kernels):
        raise TypeError(f"package {record['python_module']!r} has no kernels() (a triton plugin's package returns "
                        "{op name: launcher} from it)")
    found = kernels()
    if not isinstance(found, dict):
        raise TypeError(f"{record['python_module']}.kernels() returned {type(found).__name__}, not a dict of op name "
                        "-> launcher")
    for op, launcher in found.items():
        if not isinstance(op, str) or not callable(launcher):
            raise TypeError(f"{record['python_module']}.kernels(): entry {op!r} -> {launcher!r} is not an op name "
                            "and a callable launcher")
    return found


def recorder(record: dict):
    """The package's launch_record.record_call(launcher, values, fake), or None where the
    package has no launch_record module with one (its calls then always run through Python)."""
    module = plugin_module(_backend(record))
    name = f"{module.__name__}.launch_record"
    if importlib.util.find_spec(name) is None:
        return None
    record_call = getattr(importlib.import_module(name), "record_call", None)
    return record_call if callable(record_call) else None


_native = None


def install() -> None:
    """Sets the core's opener for kind triton (once); without the bridge extension the
    core lists triton plugins as unavailable, and status() says why."""
    global _native, _status
    if _native is not None:
        return
    from .extensions import load_extension

    _native, why = load_extension("_python_kernels")
    if _native is None:
        _status = why
        return
    _native.install(KIND, target, launchers, recorder)
    _status = "on"


def status() -> str:
    """"on", or why triton plugins cannot load in this process."""
    return _status


def loaded_plugins() -> dict:
    """{name: Backend} of the loaded plugins of kind triton."""
    import backplane

    return {b.name: b for b in backplane.backends() if b.status == "loaded" and b.kind == KIND}


def launcher_of(plugin, op: str):
    """The launcher `plugin` (a loaded Backend of kind triton) serves `op` with: what the
    compile-time pass traces into a graph (compile/triton_trace.py)."""
    return plugin_module(plugin).kernels()[op]


def code_digest(plugin) -> str:
    """A digest of the plugin package's Python files: compiled graphs that hold its kernels
    must not come from a cache made with other code. Read once per process."""
    return _package_digest(str(Path(plugin_module(plugin).__file__).parent))


@functools.lru_cache(maxsize=None)
def _package_digest(folder: str) -> str:
    root = Path(folder)
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()
