"""`backplane tune` with plugins of kind triton (python/backplane/triton_kind.py) among
--backends. The benchmark engine cannot load one (it is C++ without Python), so in eager
and graph modes the engine times the library backends and bench's triton step
(triton_rows.py) then times each triton plugin's rows in this process, as their reference
rows were: the engine's stop rule (--min-time, --max-time), as many repetitions, CUDA graph
replays where those rows were graphed. Its rows are in the engine's JSON format, so the
decision (tune_decision.cells_from_run) reads them as one more plugin's, and --json keeps
them (a later --from-json decides from them alike). In compile mode a triton plugin needs
nothing of this: tune_compile.py forces and compiles it as any plugin (candidates_of).

Refused before any timing (refusal): in eager and graph modes, triton plugins alone (their
rows are read against the reference and copy_ rows the engine times for a library backend
on their device, as bench refuses them), or one whose device (dispatch key) no library
backend of the list has; in every mode, one that cannot serve here (no Triton, no CUDA
device without TRITON_INTERPRET=1), with its reason. Compile mode takes a triton plugin
alone: its candidates are then it and `inductor`.

Limit: a selection file's `environment:` records a triton plugin's sha256 as the core
checks it, that of its manifest (the loaded record's path); an edit of the package's kernels
that leaves the manifest as it was is not seen as another build.
"""
from __future__ import annotations

from .triton_rows import split_backends, triton_only

# Where a triton plugin's rows need a library backend beside it: the engine's modes.
_ENGINE_MODES = ("eager", "graph")
_CANNOT_SERVE = ("unavailable", "rejected", "failed")


def refusal(backends: list[str], listed: str, mode: str, timing: bool = True) -> str:
    """Why `backends` (--backends as given: `listed`) cannot be tuned in `mode`; "" where
    they can. timing: False for --from-json, which reads rows instead of taking them (so
    needs no library backend beside a triton plugin)."""
    import backplane

    library, tritons = split_backends(backends)
    if not tritons:
        return ""
    needs_library = timing and mode in _ENGINE_MODES
    if needs_library and not library:
        return triton_only(listed, tritons)
    records = {b.name: b for b in backplane.backends()}
    for name in tritons:
        record = records[name]
        if record.status in _CANNOT_SERVE:
            return f"--backends {listed}: {name} cannot serve here ({record.status}): {record.reason}"
        keys = {records[b].dispatch_key for b in library if b in records}
        if needs_library and record.dispatch_key not in keys:
            return (f"--backends {listed}: {name} serves {record.dispatch_key}, where none of {', '.join(library)} "
                    "does; its rows are read against the reference and copy_ rows the engine times for a library "
                    f"backend on its device: name one beside it (--backends "
                    f"{_library_on(record.dispatch_key, records)},{name})")
    return ""


def _library_on(key: str, records: dict) -> str:
    """A library backend serving `key` here, to name in a message: cuda or cpu where it is."""
    found = [b.name for b in records.values() if b.kind != "triton" and b.dispatch_key == key]
    preferred = [n for n in found if n in ("cpu", "cuda")]
    return (preferred or found or [key.lower()])[0]
