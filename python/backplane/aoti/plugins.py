"""Which plugin served each backplane op when a package was made, recorded in the .pt2
(`<archive>/extra/backplane_plugins.txt`, one `op dispatch_key plugin` line each), so
that running it elsewhere with another plugin serving an op is refused unless asked
for: two plugins may compute the same op differently (selection.h).

AOTInductor does not package custom ops' kernels; the package calls whatever plugin
the running process has chosen. `backplane.load_package`, the pipeline and `backplane
run` (C++) all check this record."""
from __future__ import annotations

import os

import torch

from ..selection import serving
from .archive import Archive

ENTRY = "extra/backplane_plugins.txt"
HEADER = "# backplane plugins v1: op dispatch_key plugin"


class PluginMismatch(RuntimeError):
    """The process would run a package's op on another plugin than the one it was made with."""


def backplane_ops(ep: torch.export.ExportedProgram) -> list[str]:
    """The backplane ops an exported program calls, by name."""
    names = set()
    for node in ep.graph.nodes:
        target = getattr(node.target, "_schema", None)
        if target is not None and target.name.startswith("backplane::"):
            names.add(target.name.split("::", 1)[1])
    return sorted(names)


def dispatch_keys(ep: torch.export.ExportedProgram) -> set[str]:
    """The dispatch keys of the devices the program's inputs and weights live on (CPU,
    CUDA, PrivateUse1): the keys its Backplane ops run on."""
    privateuse1 = torch._C._get_privateuse1_backend_name()  # "npu" once that plugin renamed it
    keys = set()
    for node in ep.graph.nodes:
        value = node.meta.get("val") if node.op == "placeholder" else None
        if isinstance(value, torch.Tensor):
            kind = value.device.type
            keys.add("PrivateUse1" if kind == privateuse1 else {"cpu": "CPU", "cuda": "CUDA"}.get(kind, kind))
    return keys


def record_plugins(path: str | os.PathLike, ops: list[str], keys: set[str]) -> list[tuple[str, str, str]]:
    """Appends the plugin serving each op on each of `keys` (the package's devices,
    dispatch_keys()) to the package. Keys of other devices loaded in this process are
    left out: they say nothing about this package."""
    rows = sorted((s.op, s.dispatch_key, s.serving) for s in serving() if s.op in ops and s.dispatch_key in keys)
    Archive(path).add_record(ENTRY, "\n".join([HEADER, *(" ".join(r) for r in rows)]) + "\n")
    return rows


def read_plugins(path: str | os.PathLike) -> list[tuple[str, str, str]] | None:
    """The recorded (op, dispatch_key, plugin) rows, or None for a package without them."""
    archive = Archive(path)
    data = archive.read_record(ENTRY)
    if data is None:
        return None
    entry = archive.entry(ENTRY)
    lines = data.decode("utf-8", errors="replace").splitlines()
    if not lines or lines[0] != HEADER:
        raise ValueError(f"{path}:{entry}: expected the first line {HEADER!r}")
    rows = []
    for number, line in enumerate(lines[1:], start=2):
        parts = line.split()
        if len(parts) != 3:
            raise ValueError(f"{path}:{entry}, line {number}: expected 'op dispatch_key plugin', found {line!r}")
        rows.append((parts[0], parts[1], parts[2]))
    return rows


def check_plugins(path: str | os.PathLike, allow_change: bool = False) -> list[str]:
    """Compares the recorded plugins with those serving each op now. Returns one note per
    op; raises PluginMismatch for an op now served by another plugin unless allow_change."""
    recorded = read_plugins(path)
    if recorded is None:
        return []
    now = {(s.op, s.dispatch_key): s.serving for s in serving()}
    notes = []
    for op, key, plugin in recorded:
        current = now.get((op, key))
        if current is None:
            continue  # not served on that key here: the package fails when it calls it, naming the op
        if current != plugin and not allow_change:
            raise PluginMismatch(
                f"{os.fspath(path)}: backplane::{op} on {key} was served by plugin '{plugin}' when the package was "
                f"made; here '{current}' serves it. Prefer '{plugin}' (backplane.prefer('{op}', '{plugin}'), "
                f"BACKPLANE_PREFER={op}:{plugin}) or allow the change (allow_plugin_change=True, "
                "--allow-plugin-change).")
        notes.append(f"backplane::{op} on {key}: served by '{current}'" +
                     (" (as packaged)" if current == plugin else f" (packaged with '{plugin}': change allowed)"))
    return notes
