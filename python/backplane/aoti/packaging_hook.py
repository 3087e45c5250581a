"""The plugins record in every package torch makes: `torch._inductor.aoti_compile_and_package`,
the call a user makes (and the pipeline), is wrapped so that a package calling Backplane
ops gets `extra/backplane_plugins.txt` (plugins.py) as soon as it is written.

Installed by `import backplane` (torch's autoload entry point imports it too), once
`torch._inductor` is imported (import_hooks.when_imported: importing it costs every
program otherwise). The plugins are read when the call starts: those serving while the
model compiles. Recording never changes what torch returns or raises: a failure to record
(a write-only buffer, say) is a warning, and the package is then checked as one of
unknown provenance when it loads.

The compiler, too: where `torch._inductor.config.cpp.cxx` names a g++ that links libstdc++
statically (the GPU machine's default one), the package is compiled with one that links it
dynamically (libstdcxx.choose_cxx: $CXX, /usr/bin/g++, g++), for that call only, and a
warning says which: a package from the static one crashes the Python that loads it, and
`backplane.load_package` refuses it (docs/aoti-findings.md §1). Where none links it
dynamically, the call compiles as asked.

Limits: a reference taken before `import backplane` (`from torch._inductor import
aoti_compile_and_package`) bypasses the hook, as does torch's lower-level packaging
(`torch._inductor.package.package_aoti` of several models); such packages hold no record,
and running one where two plugins serve one of its ops without a choice is refused.
"""
from __future__ import annotations

import contextlib
import functools
import shutil
import warnings

from .plugins import (PluginRecord, backplane_ops, dispatch_keys, package_calls, plugin_record, read_record,
                      record_plugins)

from ..compile import resolutions

_MARK = "_backplane_records_plugins"


def recording(compile_and_package):
    """compile_and_package, recording the plugins in each package it makes."""

    @functools.wraps(compile_and_package)
    def aoti_compile_and_package(*args, **kwargs):
        ep = args[0] if args else kwargs.get("exported_program")
        try:
            ops, keys = backplane_ops(ep), dispatch_keys(ep)
            # Taken before the compile, which can take minutes: a choice changed meanwhile (on
            # another thread) is not what the model was compiled under.
            record = plugin_record(ops, keys) if ops else None
        except Exception:  # noqa: BLE001  (not an ExportedProgram: torch's own call says so)
            ops, keys, record = [], set(), None
        before = len(resolutions())
        with _a_compiler_python_can_load():
            package = compile_and_package(*args, **kwargs)
        if ops:
            try:
                # An op whose every call this compile traced into Inductor's code (a selection
                # file's `inductor` bucket: backplane.compile), and that the package does not
                # call, needs no plugin in it: its row is left out.
                traced = _traced_everywhere(resolutions()[before:])
                if traced:
                    called = package_calls(package, set(ops))
                    ops = [op for op in ops if op not in traced or op in called]
                    record = PluginRecord(tuple(r for r in record.rows if r[0] in ops), record.selection_digest,
                                          record.selection_path)
                if ops and read_record(package) is None:
                    record_plugins(package, ops, keys, record)
            except Exception as e:  # noqa: BLE001  (the package is made; only its record is lost)
                warnings.warn(f"backplane: could not record the plugins serving {', '.join(ops)} in the package "
                              f"{package!r}: {type(e).__name__}: {e}; where two plugins serve one of them, loading "
                              "it is refused as of unknown provenance", RuntimeWarning, stacklevel=2)
        return package

    setattr(aoti_compile_and_package, _MARK, True)
    return aoti_compile_and_package


@contextlib.contextmanager
def _a_compiler_python_can_load():
    """Inductor's cpp.cxx swapped, for the block, for one that links libstdc++ dynamically
    where the configured one does not (a warning names both)."""
    from torch._inductor import config

    from .libstdcxx import StaticLibstdcxxError, choose_cxx

    _, requested = config.cpp.cxx
    try:
        chosen = choose_cxx(requested)
    except StaticLibstdcxxError:
        chosen = None  # none links it dynamically: compiled as asked, refused when loaded into Python
    asked = shutil.which(requested or "g++")
    if chosen is None or chosen == asked:
        yield
        return
    warnings.warn(f"backplane: {asked or requested} links libstdc++ statically (a package compiled by it crashes the "
                  f"Python that loads it); this package is compiled with {chosen}", RuntimeWarning, stacklevel=4)
    with config.patch({"cpp.cxx": (None, chosen)}):
        yield


def _traced_everywhere(chosen: list[dict]) -> set[str]:
    """The ops every one of whose calls in `chosen` (compile.resolutions()) was traced."""
    ops = {r["op"] for r in chosen}
    return {op for op in ops if all(r.get("traced", r["choice"] == "inductor") for r in chosen if r["op"] == op)}


def install(inductor) -> None:
    """Wraps inductor.aoti_compile_and_package (once). Never raises: it runs while
    `torch._inductor` is being imported, whose import must not fail for it."""
    try:
        original = inductor.aoti_compile_and_package
        if not getattr(original, _MARK, False):
            inductor.aoti_compile_and_package = recording(original)
    except Exception as e:  # noqa: BLE001
        warnings.warn(f"backplane: AOTInductor packages will not record their plugins: {type(e).__name__}: {e}",
                      RuntimeWarning, stacklevel=2)
