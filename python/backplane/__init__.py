"""Backplane: PyTorch operators that live outside PyTorch.

    import backplane
    backplane.load("cpu")                 # or BACKPLANE_BACKENDS=cpu,cuda at import ("none": none)
    torch.ops.backplane.add(a, b, alpha=2)
    backplane.backends()                  # every backend found, with status and reason
    backplane.ops()                       # the coverage matrix: op x backend x dtype
    backplane.torch_op("acme::fused_gelu")  # a plugin's own op, once the plugin is loaded

Schemas and Meta kernels come from the core library, so FakeTensor, torch.compile and
torch.export work without Python fake registrations.

BACKPLANE_BACKENDS, read at import as the `backplane` command reads it: backend names
separated by ','; "none" loads none; unset, the torch autoload entry point loads every
plugin found. An empty entry ("", "cpu,,cuda") raises BackendNameError naming the value.
"""
from __future__ import annotations

# Set by torch's autoload entry point (backplane_autoload) when it runs while this package is
# half-imported: `import backplane` came first and imported torch. Read at the end, below.
# Defined before anything imports torch.
_autoload_deferred = False

import os
import re
import warnings
from dataclasses import dataclass, field

from ._native import BackendError, BackendNameError, core, lib_dir
from backplane_plugins import add_entry_point_plugins, probe_first

from . import compile, fast_call, sharding  # noqa: A004  (backplane.compile: selection under torch.compile)
from . import triton_kind
from .plugin_python import plugin_module
from .registry_samples import sample_call, sample_values
from .selection import Serving, apply_selection, preferences, prefer, selection_file, serving

__all__ = [
    "Backend", "BackendError", "BackendNameError", "CheckResult", "OpInfo", "Serving", "apply_selection", "backends",
    "check", "classes", "cmake_prefix_path", "info", "lib_dir", "load", "load_package", "ops", "preferences",
    "prefer", "sample_call", "sample_values", "selection_file", "serving", "sharding", "torch_op",
]


@dataclass(frozen=True)
class Backend:
    name: str
    status: str  # loaded | available | rejected | failed | unavailable (kind triton: no Triton, no device)
    reason: str  # why not loaded; empty otherwise (a loaded triton plugin under TRITON_INTERPRET=1 says so)
    path: str
    version: str
    dispatch_key: str
    ops: tuple[str, ...]
    python_module: str = ""  # the plugin's Python side, imported when it loads (from its manifest)
    python_path: str = ""
    registry: str = ""  # its registry fragment: the plugin's own ops (docs/vendor-ops.md)
    torch_abi: str = "full"  # "stable": built on PyTorch's stable ABI, runs under torch_target and later
    torch_target: str = ""  # the torch it was built for, or (stable) the oldest it runs under; triton: a range
    kind: str = "shared_library"  # or "triton": a Python package of launchers, path is its manifest (triton_kind.py)
    triton_versions: str = ""  # kind triton: the Triton releases it supports


@dataclass(frozen=True)
class OpInfo:
    name: str  # "add" for backplane's ops; "acme::fused_gelu" for a plugin's own (torch_op finds either)
    schema: str
    doc: str
    dtypes: tuple[str, ...]
    # backend name -> dtypes it implements this op for (empty: not implemented)
    backends: dict[str, tuple[str, ...]]
    arguments: tuple[str, ...] = ()
    tensor_args: tuple[str, ...] = ()
    differentiable: tuple[str, ...] = ()  # the Tensor arguments with a `backward:` formula
    reference: str = ""  # the PyTorch call the conformance suite compares against
    baseline: str = ""  # PyTorch's fused op the bench times beside it, where the reference is not one
    backward: dict[str, str] = field(default_factory=dict)  # Tensor argument -> its gradient formula
    # Registry inputs: {"name", "args": {arg: sizes for Tensors, else the value (a str too)}}, and
    # where stated "magnitude" (samples: a factor for the drawn values) or "layout" (bench presets)
    samples: tuple[dict, ...] = ()
    bench: tuple[dict, ...] = ()
    namespace: str = "backplane"
    shape: tuple[dict, ...] = ()  # one rule per output: {"kind": "broadcast", "args": [...]}, ...
    sharding: dict = field(default_factory=dict)  # `sharding:` as written ({"kind": "derived"} without it)
    flops: float | None = None  # `flops:` per element of the largest Tensor argument (None: not given)


@dataclass(frozen=True)
class CheckResult:
    backend: str
    op: str
    case: str
    dtype: str
    outcome: str  # passed | failed | skipped | not implemented
    detail: str


def _backend(record: dict) -> Backend:
    for message in record.pop("warnings", ()):
        warnings.warn(message, stacklevel=3)  # e.g. two plugins serving one op on one device
    return Backend(**{**record, "ops": tuple(record["ops"])})


def load(*names: str, path: str | None = None, selection: str | os.PathLike | None = None,
         strict: bool = False) -> list[Backend]:
    """Loads backends by name ("cpu", "cuda", "npu"; "cpu,cuda" also works).

    selection: a selection file (`backplane tune` writes one) to apply once they are
    loaded: which plugin serves each op, by call size, where two serve one device
    (apply_selection says how; in a distributed job every rank must pass the same file).
    strict: refuse a selection file naming a plugin that is not loaded (else a warning).

    Searched: the installed plugins (beside libbackplane_core.so), then `path` (a colon
    list), then BACKPLANE_PLUGIN_PATH and the plugin packages installed through the
    `backplane.plugins` entry-point group. A plugin of kind triton (a Python package of
    launchers, triton_kind.py) loads the same way; where Triton or its device is missing it
    is `unavailable` and load raises BackendError with the reason. Loading
    is idempotent. Raises BackendError naming what was searched and why it failed;
    BackendNameError (also a ValueError) for a name that is not a plain identifier.
    """
    wanted = [n.strip() for name in names for n in name.split(",") if n.strip()]
    if selection is None:
        loaded = [_backend(core().load(name, path)) for name in wanted]
    else:  # the loads' warnings wait for the file: it may decide what they advise on
        with warnings.catch_warnings(record=True) as held:
            warnings.simplefilter("always")
            try:
                loaded = [_backend(core().load(name, path)) for name in wanted]
            except BaseException:
                _rewarn(held, decided_by_file=False)
                raise
    for b in loaded:
        _install_python_side(b)
    if loaded:
        rows = core().ops()  # a plugin's own ops are defined by now
        fast_call.install(rows)
        sharding.install(rows)
    if selection is not None:
        try:
            apply_selection(selection, strict=strict)
        finally:
            _rewarn(held, decided_by_file=True)
    return loaded


_LOADED_FIRST = re.compile(r"backplane: (\S+) on (\S+) is offered by ")


def _rewarn(held: list, decided_by_file: bool) -> None:
    """The warnings of a load, raised again once the selection file passed with it is in
    force: "X on KEY is offered by 'a', 'b'; 'a' serves it (loaded first)" is dropped for an
    (op, key) the file decides, since the advice it gives would be wrong there."""
    decided = set()
    if decided_by_file:
        decided = {(s.op, s.dispatch_key) for s in serving() if s.why != "loaded first"}
    for w in held:
        found = _LOADED_FIRST.match(str(w.message))
        if found and (found[1], found[2]) in decided:
            continue
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, source=w.source)


def _install_python_side(b: Backend) -> None:
    # A plugin may come with a Python side (a device module such as torch.npu, fake
    # registrations, helpers), named by its manifest: imported now, and its on_load called.
    if b.status == "loaded" and b.python_module:
        module = plugin_module(b)
        if hasattr(module, "on_load"):
            module.on_load(b.path)


_BACKENDS_VARIABLE = "BACKPLANE_BACKENDS"


def _environment_backends() -> list[str] | None:
    """BACKPLANE_BACKENDS as names: None when unset, [] for "none". The core reads it, by the
    rule and with the messages of the `backplane` command."""
    value = os.environ.get(_BACKENDS_VARIABLE)
    if value is None:
        return None
    names = core().environment_backends(value)  # the core parses it (backend_names in loader.h)
    return [] if names == ["none"] else names


def _autoload() -> None:
    """Called by the `torch.backends` entry point (backplane_autoload.py, which catches
    everything) when `import torch` runs and this package is installed (unless
    TORCH_DEVICE_BACKEND_AUTOLOAD=0). Loads BACKPLANE_BACKENDS, or
    every plugin found that can load; a broken plugin is recorded, never raised here."""
    if _BACKENDS_VARIABLE in os.environ:
        return  # loaded below, at import
    # Not plugins of kind triton: loading one imports Triton and its package, which inside
    # `import torch` may import torch half-imported. They load where named (load(),
    # BACKPLANE_BACKENDS).
    libraries = [r["name"] for r in core().backends() if r["status"] == "available" and r["kind"] == "shared_library"]
    for name in _probe_first(*libraries):
        try:
            load(name)
        except BackendError:
            pass  # recorded as failed; backplane.backends() says why


def _probe_first(*names: str) -> list[str]:
    # Implicit loads (the autoload, BACKPLANE_BACKENDS) open each plugin in a child process
    # first: one that crashes, exits, hangs or throws while opening is left out, with one
    # warning, instead of ending or hanging `import torch`.
    return probe_first(names, core().backends(), lib_dir())


def backends() -> list[Backend]:
    """Every backend this process knows: loaded ones and every plugin on the search path."""
    return [_backend(r) for r in core().backends()]


def ops() -> list[OpInfo]:
    """The registry's ops with, for each known backend, the dtypes it implements."""
    return [
        OpInfo(
            name=row["name"],
            schema=row["schema"],
            doc=row["doc"],
            dtypes=tuple(row["dtypes"]),
            backends={c["backend"]: tuple(c["dtypes"]) for c in row["backends"]},
            arguments=tuple(row["arguments"]),
            tensor_args=tuple(row["tensor_args"]),
            differentiable=tuple(row["differentiable"]),
            reference=row["reference"],
            baseline=row["baseline"],
            backward=dict(row["backward"]),
            samples=tuple(row["samples"]),
            bench=tuple(row["bench"]),
            namespace=row["namespace"],
            shape=tuple(row["shape"]),
            sharding=dict(row["sharding"]),
            flops=row.get("flops"),
        )
        for row in core().ops()
    ]


def torch_op(name: str):
    """The op's packet, torch.ops.<namespace>.<op>, for a name as ops() gives it: "add"
    (backplane's) or "acme::fused_gelu" (a loaded plugin's own op)."""
    import torch

    namespace, _, op = name.rpartition("::")
    return getattr(getattr(torch.ops, namespace or "backplane"), op)


def check(backend: str, ops: str | list[str] = (), gradients: bool = True) -> list[CheckResult]:
    """Runs the conformance suite (the one `backplane check` runs) on a loaded backend's
    kernels: every op, or those named, x case x dtype. An op the backend lacks gives one
    result with outcome "not implemented". gradients=False leaves out the gradient cases
    ("gradient/<sample>": each `backward:` formula against autograd through the op's
    reference, as `backplane check --no-gradients` does). Raises ValueError naming an op no
    loaded registry defines (and the known ones), BackendError for a backend with no device
    here."""
    names = ops.split(",") if isinstance(ops, str) else list(ops)
    return [CheckResult(**r) for r in core().check(backend, ",".join(n for n in names if n), gradients)]


def _cmake_prefix_path() -> str | None:
    # The installed package is a CMake prefix: lib/cmake/Backplane/BackplaneConfig.cmake.
    prefix = lib_dir().parent
    return str(prefix) if (prefix / "lib" / "cmake" / "Backplane" / "BackplaneConfig.cmake").is_file() else None


def info() -> dict:
    """Core version, the torch it was built for, plugin ABI, the plugin search path,
    whether ops are called through the fast path (fast_call.py): "on" or "off: <why>", and
    whether plugins of kind triton can load (triton_kind.py): "on" or why not."""
    return {**core().info(), "fast_call": fast_call.status(), "triton_plugins": triton_kind.status()}


add_entry_point_plugins()  # plugins installed as their own Python packages
core()  # importing backplane defines torch.ops.backplane.* and torch.classes.backplane.*
triton_kind.install()  # plugins of kind triton: their launchers reach the core through this bridge
_rows = core().ops()  # the registry's ops, read once for both installs
fast_call.install(_rows)
sharding.install(_rows)  # DTensor strategies from the registry (docs/distributed.md)
del _rows
from . import classes  # noqa: E402
from .aoti.package import load_package  # noqa: E402,F401  (AOTInductor packages with input-layout checks)

classes.register_fake_classes()  # generated from the registry, like the Meta kernels
# For C++ projects: cmake -DCMAKE_PREFIX_PATH=$(python -c "import backplane; print(backplane.cmake_prefix_path)")
# finds Backplane (find_package(Backplane)) in an installed wheel; None in a source checkout.
cmake_prefix_path = _cmake_prefix_path()
_selected = _environment_backends()  # a malformed value raises here, naming it
if _selected:
    load(*_probe_first(*_selected))
_initialized = True
if _autoload_deferred:  # the entry point left the loading to this import (see the top)
    _autoload_deferred = False
    _autoload()
