"""`backplane.load_package(path)`: an AOTInductor .pt2 package that never silently reads
an input with the wrong layout.

    run = backplane.load_package("model.pt2")   # like torch._inductor.aoti_load_package
    y = run(x)                                  # x checked (and if need be copied) first

Works for any .pt2, with or without Backplane ops, on cpu, cuda or a plugin's device such
as npu (load the plugins it calls, and its device's, first). The
rule per input is in `backplane.aoti.layouts`: other strides or alignment are copied into the
compiled layout, anything else that differs is refused naming the input and both layouts.

A .pt2 package holds shared libraries: loading one runs its code. Load only packages you
trust (docs/security.md). What this module guards against is honest mistakes: inputs in
another layout, and archives whose entries would be written outside the extraction folder.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
import weakref
from pathlib import Path

import torch
import torch.utils._pytree as pytree

from . import layouts
from .archive import Archive
from .libstdcxx import StaticLibstdcxxError, check_package  # noqa: F401  (raised by load_package)
from .plugins import check_plugins

__all__ = ["GuardedPackage", "check_device", "load_package", "package_device"]


def package_device(path: str | os.PathLike) -> str:
    """The device the package was compiled for (its AOTI_DEVICE_KEY: "cpu", "cuda", "npu"),
    read from the wrapper's metadata; "" when the package names none."""
    return Archive(path).device()


def check_device(path: str | os.PathLike) -> str:
    """The package's device; raises RuntimeError, naming the plugin to load, when this
    process has no such device (a device of a plugin, such as npu, exists once the plugin
    is loaded; torch's own message would be "Unsupported device key found")."""
    device = package_device(path)
    if device:
        try:
            torch.device(device)
        except RuntimeError:
            raise RuntimeError(f"{path}: the package runs on {device}, a device this process does not have; load "
                               f"the plugin that provides it first (backplane.load('{device}'))") from None
    return device


_TMPDIR_LOCK = threading.Lock()


@contextlib.contextmanager
def _extraction_folder():
    """Yields a new folder that TMPDIR names for the duration: torch's loader extracts the
    package under TMPDIR, and leaves the extraction behind when the load fails; the folder
    is removed then. Limit: other threads creating temporary files from C++ meanwhile
    create them there too."""
    tempfile.gettempdir()  # fixes Python's own temporary folder (on first use) where it is
    folder = tempfile.mkdtemp(prefix="backplane-load-")
    with _TMPDIR_LOCK:
        before = os.environ.get("TMPDIR")
        os.environ["TMPDIR"] = folder
        try:
            yield folder
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        finally:
            if before is None:
                del os.environ["TMPDIR"]
            else:
                os.environ["TMPDIR"] = before


class GuardedPackage:
    """Calls the package like aoti_load_package's model does, after checking every input.

    `converted` lists what the last call copied into the compiled layout."""

    def __init__(self, path: str | os.PathLike, compiled, recorded: list[layouts.InputLayout] | None):
        self.path = Path(path)
        self.compiled = compiled
        self.layouts = recorded
        self.converted: list[str] = []

    def guard(self, flat: list) -> list:
        """The flattened inputs as the package must receive them; raises LayoutError."""
        if self.layouts is not None and len(flat) != len(self.layouts):
            raise layouts.LayoutError(f"{self.path.name}: expected {len(self.layouts)} inputs "
                                      f"({', '.join(x.name for x in self.layouts)}), found {len(flat)}")
        out, self.converted = [], []
        for index, value in enumerate(flat):
            if not isinstance(value, torch.Tensor):
                out.append(value)
                continue
            layout = self.layouts[index] if self.layouts is not None else None
            if layout is not None and not layout.is_tensor:
                raise layouts.LayoutError(f"input {index} ({layout.name}): the package takes a non-tensor here, "
                                          f"found a tensor")
            value, note = (layouts.check_input(layout, value) if layout is not None
                           else layouts.contiguous_rule(index, value))
            out.append(value)
            if note:
                self.converted.append(note)
        return out

    def __call__(self, *args, **kwargs):
        flat, spec = pytree.tree_flatten((args, kwargs))
        args, kwargs = pytree.tree_unflatten(self.guard(flat), spec)
        return self.compiled(*args, **kwargs)


def load_package(path: str | os.PathLike, allow_plugin_change: bool = False, **aoti_options) -> GuardedPackage:
    """Loads an AOTInductor package (any .pt2 aoti_load_package takes; `aoti_options` go to
    it) and returns a callable that checks each input against the layout the package was
    compiled for. Refuses, before anything is extracted, an archive with an entry that would
    land outside the extraction folder, and (unless allow_plugin_change: PluginMismatch,
    plugins.py) a package whose backplane ops another plugin serves here than the one it
    records, or, for a package without the record, one of whose ops two loaded plugins serve
    with nothing choosing between them; one whose model library links libstdc++ statically
    (StaticLibstdcxxError: loading it would crash the process), and one for a device this
    process lacks (RuntimeError naming the plugin to load: a plugin's device, npu, also
    brings the runner torch's loader needs for it). A load that fails leaves none of the
    files it extracted behind."""
    recorded = layouts.read_layouts(path)  # also checks the entries
    check_device(path)
    # A model library with its own static libstdc++ crashes the process when it loads
    # (docs/aoti-findings.md): refused here, with the compiler to use, instead.
    check_package(path)
    plugin_notes = check_plugins(path, allow_plugin_change)
    # torch >= 2.14 then checks sizes, strides, dtype and device itself as well.
    os.environ.setdefault("AOTI_RUNTIME_CHECK_INPUTS", "1")
    with _extraction_folder() as folder:
        compiled = torch._inductor.aoti_load_package(os.fspath(path), **aoti_options)
    # The extraction goes when the loader does (torch then finds its part gone), or at exit.
    # Limit: a CUDA package run from an exit handler after that cannot load its kernels.
    weakref.finalize(getattr(compiled, "loader", compiled), shutil.rmtree, folder, True)
    package = GuardedPackage(path, compiled, recorded)
    package.plugins = plugin_notes
    return package
