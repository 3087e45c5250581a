"""Which plugin served each backplane op when a package was made, recorded in the .pt2
(`<archive>/extra/backplane_plugins.txt`), and the check made before a package runs.

AOTInductor does not package custom ops' kernels: the package calls whatever plugin the
running process has chosen, and two plugins may compute one op differently (selection.h).
The record:

    # backplane plugins v2: op dispatch_key plugin
    @selection_file sha256:HEX PATH       the file in force, when it split one of the ops
    identity_conv CPU cpu_alt<=4096,cpu   split by size: each plugin, the largest size it takes
    add CPU cpu

(v1, the same without the `@selection_file` line, is read too.) It is written for every
package `torch._inductor.aoti_compile_and_package` makes in a process that imported
backplane (packaging_hook.py). `backplane.load_package`, the pipeline and `backplane run`
(cli/aoti/package_plugins.cpp reads the same record and applies the same rule: change them
together) refuse, unless allowed (allow_plugin_change=True, --allow-plugin-change):
- a recorded package, where one of its ops is served by another plugin, or another split,
  than recorded;
- a package without the record (made elsewhere), where one of its ops is offered by two
  loaded plugins on its device and nothing chose between them (no preference, no
  selection file rule: the one loaded first serves it, UNRESOLVED).
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass

import torch

from ..classes import NAMESPACE, definitions
from ..selection import Serving, selection_file, serving
from ..selection_environment import file_sha256
from .archive import Archive

ENTRY = "extra/backplane_plugins.txt"
HEADER = "# backplane plugins v2: op dispatch_key plugin"
HEADERS = ("# backplane plugins v1: op dispatch_key plugin", HEADER)
SELECTION = "@selection_file"
# The core's `why` when two plugins offer an op and nothing chose (selection.h): it warns then.
UNRESOLVED = "loaded first"


class PluginMismatch(RuntimeError):
    """The process would run a package's op on another plugin than the one it was made with,
    or on one it cannot know it was made with."""


@dataclass(frozen=True)
class PluginRecord:
    rows: tuple[tuple[str, str, str], ...]  # (op, dispatch_key, plugin or split)
    selection_digest: str = ""  # sha256 of the selection file that split an op; "" when none did
    selection_path: str = ""  # where that file was (absolute); "" when unknown


def qualified(op: str) -> str:
    """"backplane::add" for a core op id, a plugin's own op ("acme::fused_gelu") as it is."""
    return op if "::" in op else f"{NAMESPACE}::{op}"


def _dispatch_key(device_type: str) -> str:
    privateuse1 = torch._C._get_privateuse1_backend_name()  # "npu" once that plugin renamed it
    return "PrivateUse1" if device_type == privateuse1 else {"cpu": "CPU", "cuda": "CUDA"}.get(device_type, device_type)


def _class_ops(qualified_class: str, method: str | None = None) -> set[str]:
    """The ops a registry class's methods call (only `method`'s when given)."""
    prefix = f"__torch__.torch.classes.{NAMESPACE}."
    return {m["target"] for c in definitions() if qualified_class == prefix + c["name"]
            for m in c["methods"] if m["kind"] == "calls" and method in (None, m["name"])}


def _class_of(ep: torch.export.ExportedProgram, obj) -> str:
    """The qualified class of the object a call_torchbind calls: a lifted input (its
    CustomObjArgument names the class) or a constant."""
    value = obj.meta.get("val") if isinstance(obj, torch.fx.Node) else obj
    if isinstance(obj, torch.fx.Node) and obj.op == "get_attr":
        value = ep.constants.get(obj.target, value)
    if isinstance(value, torch.ScriptObject):
        return value._type().qualified_name()
    return getattr(value, "class_fqn", "") or getattr(value, "script_class_name", "")


def backplane_ops(ep: torch.export.ExportedProgram) -> list[str]:
    """The ids of the Backplane ops ("add", a plugin's own "acme::fused_gelu") an exported
    program calls, directly or through a method of a registry class, that a loaded plugin
    serves (those are the ones a record can name)."""
    names = set()
    for node in ep.graph.nodes:
        schema = getattr(node.target, "_schema", None)
        if schema is not None:
            names.add(schema.name.removeprefix(f"{NAMESPACE}::"))
        elif node.target is torch.ops.higher_order.call_torchbind:
            names |= _class_ops(_class_of(ep, node.args[0]), node.args[1])
    return sorted(names & {s.op for s in serving()})


def dispatch_keys(ep: torch.export.ExportedProgram) -> set[str]:
    """The dispatch keys of the devices the program's inputs and weights live on (CPU,
    CUDA, PrivateUse1): the keys its Backplane ops run on."""
    keys = set()
    for node in ep.graph.nodes:
        value = node.meta.get("val") if node.op == "placeholder" else None
        if isinstance(value, torch.Tensor):
            keys.add(_dispatch_key(value.device.type))
    return keys


def plugin_record(ops: list[str], keys: set[str]) -> PluginRecord:
    """The record of a package calling `ops` on `keys` (its devices, dispatch_keys()), as the
    plugins serve them now. Keys of other devices loaded in this process are left out: they
    say nothing about the package."""
    now = [s for s in serving() if s.op in ops and s.dispatch_key in keys]
    rows = tuple(sorted((s.op, s.dispatch_key, s.serving) for s in now))
    path = selection_file() if any(s.buckets or s.by_dtype or "inductor" in s.serving for s in now) else ""
    digest = file_sha256(path) if path else ""  # "" for a file that is not regular or cannot be read
    return PluginRecord(rows, digest, path if digest and "\n" not in path and "\r" not in path else "")


def record_plugins(path, ops: list[str], keys: set[str],
                   record: PluginRecord | None = None) -> list[tuple[str, str, str]]:
    """Appends `record` (default: plugin_record(ops, keys) now) to the package (a path, or a
    seekable buffer holding it); returns its rows. Raises ValueError when the package holds a
    record already."""
    record = record or plugin_record(ops, keys)
    lines = [HEADER]
    if record.selection_digest:
        lines.append(f"{SELECTION} sha256:{record.selection_digest} {record.selection_path}".rstrip())
    Archive(path).add_record(ENTRY, "\n".join([*lines, *(" ".join(r) for r in record.rows)]) + "\n")
    return list(record.rows)


def read_record(path) -> PluginRecord | None:
    """The package's record, or None for a package without one. Raises ValueError naming the
    line of a malformed record."""
    archive = Archive(path)
    data = archive.read_record(ENTRY)
    if data is None:
        return None
    where = f"{path}:{archive.entry(ENTRY)}"
    lines = data.decode("utf-8", errors="replace").splitlines()
    if not lines or lines[0] not in HEADERS:
        raise ValueError(f"{where}: expected the first line {HEADER!r} (or v1's), found {lines[:1]}")
    rows, digest, selection_path = [], "", ""
    for number, line in enumerate(lines[1:], start=2):
        if line.startswith(SELECTION) and lines[0] == HEADER and not digest:
            found = re.fullmatch(rf"{SELECTION} sha256:([0-9a-f]{{64}})(?: (.+))?", line)
            if not found:
                raise ValueError(f"{where}, line {number}: expected '{SELECTION} sha256:HEX [PATH]', found {line!r}")
            digest, selection_path = found.group(1), found.group(2) or ""
            continue
        parts = line.split()
        if len(parts) != 3 or parts[0].startswith("@"):
            raise ValueError(f"{where}, line {number}: expected 'op dispatch_key plugin', found {line!r}")
        rows.append((parts[0], parts[1], parts[2]))
    return PluginRecord(tuple(rows), digest, selection_path)


def read_plugins(path) -> list[tuple[str, str, str]] | None:
    """The recorded (op, dispatch_key, plugin) rows, or None for a package without them."""
    record = read_record(path)
    return None if record is None else list(record.rows)


def _split_plugins(plugin: str) -> list[str]:
    """The plugins of a recorded serving: "cpu" -> [cpu]; "cpu_alt<=4096,cpu" -> [cpu_alt, cpu];
    by dtype, "bfloat16:inductor<=65536,cuda;*:cuda" -> [cuda]. `inductor` is no plugin
    (Inductor's code for the reference: nothing to load). As split_plugins in
    cli/aoti/package_plugins.cpp."""
    found = []
    for rule in plugin.split(";"):
        for part in rule.rpartition(":")[2].split(","):
            name = part.split("<=")[0]
            if name != "inductor" and name not in found:
                found.append(name)
    return found


def _from_selection_file(recorded: str) -> bool:
    """Whether a recorded serving came from a selection file: split by size or dtype, or Inductor's code."""
    return any(mark in recorded for mark in ("<=", ";", ":", "inductor"))


def _way_back(op: str, recorded: str, now: Serving, record: PluginRecord) -> str:
    """What makes `now` serve op as `recorded`: Python calls that are themselves accepted."""
    missing = [p for p in _split_plugins(recorded) if p not in now.offered_by]
    names = ", ".join(repr(p) for p in missing)
    load = f"load {names} (backplane.load({names})), then " if missing else ""
    if not _from_selection_file(recorded):
        return f"{load}prefer '{recorded}' (backplane.prefer('{op}', '{recorded}'))"
    file = repr(record.selection_path) if record.selection_path else "FILE"
    which = (f"the selection file {record.selection_path} (sha256 {record.selection_digest[:16]})"
             if record.selection_digest else "a selection file")
    override = (f"withdraw the preference for '{op}', which overrides a selection file (backplane.prefer('{op}', "
                "None)), and " if now.why == f"preferred for {op}" else "")
    return (f"it was split by size by {which}: {load}{override}apply that file (backplane.apply_selection({file}), "
            f"or backplane.load(..., selection={file}))")


def _names(text: str, name: str) -> bool:
    """Whether text names `name` as a whole word."""
    return re.search(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])", text) is not None


def package_calls(path, ops: set[str]) -> set[str]:
    """Those of `ops` (ids) the package calls: named in its JSON entries (the proxy
    executor's calls, the custom objects' config), directly or through a registry class
    whose method calls one. `backplane run` reads packages the same way (package_needs in
    cli/aoti/package_check.cpp)."""
    archive = Archive(path)
    text = "\n".join(archive.read(n).decode("utf-8", errors="replace") for n in archive.names if n.endswith(".json"))
    found = {op for op in ops if _names(text, qualified(op))}
    for c in definitions():
        name = f"__torch__.torch.classes.{NAMESPACE}.{c['name']}"
        if _names(text, name):
            found |= _class_ops(name) & ops
    return found


def _unrecorded(path, now: dict) -> tuple[list[str], list[str]]:
    """(problems, notes) for a package without the record: its ops that two loaded plugins
    offer on its device, refused where nothing chose between them."""
    key = _dispatch_key(Archive(path).device())
    shared = {s.op: s for (_, k), s in now.items() if k == key and len(s.offered_by) > 1}
    problems, notes = [], []
    for op in sorted(package_calls(path, set(shared))):
        s = shared[op]
        name = f"{qualified(op)} on {key}"
        if s.why != UNRESOLVED:
            notes.append(f"{name}: served by '{s.serving}' (the package records no plugins; {s.why})")
            continue
        prefer = " or ".join(f"backplane.prefer('{op}', '{p}')" for p in s.offered_by)
        problems.append(f"the package records no plugins (it was made where Backplane did not record them), and {name} "
                        f"is offered here by {', '.join(s.offered_by)}: '{s.serving}' serves it only because it was "
                        "loaded first, which need not be the plugin it was made with. Choose: apply a selection file "
                        f"(backplane.apply_selection(FILE), or backplane.load(..., selection=FILE)) or prefer one ({prefer})")
        notes.append(f"{name}: served by '{s.serving}' (the package records no plugins; loaded first: allowed)")
    return problems, notes


def _recorded(record: PluginRecord, now: dict) -> tuple[list[str], list[str]]:
    """(problems, notes) for a recorded package: each op served here by another plugin or split."""
    problems, notes = [], []
    for op, key, plugin in record.rows:
        s = now.get((op, key))
        if s is None:
            continue  # not served on that key here: the package fails when it calls it, naming the op
        name = f"{qualified(op)} on {key}"
        if s.serving != plugin:
            problems.append(f"{name} was served by plugin '{plugin}' when the package was made; here '{s.serving}' "
                            f"serves it ({s.why}; offered by {', '.join(s.offered_by)}). To run it as made: "
                            f"{_way_back(op, plugin, s, record)}")
        notes.append(f"{name}: served by '{s.serving}'" +
                     (" (as packaged)" if s.serving == plugin else f" (packaged with '{plugin}': change allowed)"))
    return problems, notes


def check_plugins(path, allow_change: bool = False) -> list[str]:
    """Compares the package's record with the plugins serving each op now (module
    docstring). Returns one note per op checked; raises PluginMismatch naming the package,
    each op refused, the plugins offering it and the calls that resolve it, unless
    allow_change."""
    record = read_record(path)
    now = {(s.op, s.dispatch_key): s for s in serving()}
    problems, notes = _unrecorded(path, now) if record is None else _recorded(record, now)
    if problems and not allow_change:
        raise PluginMismatch(f"{os.fspath(path)}: refused: it would run on other plugins than it was made with, or on "
                             "plugins it cannot be known to have been made with:\n  " + "\n  ".join(problems) +
                             "\nor run it as it is here (allow_plugin_change=True)")
    return notes
