"""Rows of plugins of kind triton (Python launchers, python/backplane/triton_kind.py), which
the engine cannot time: it is C++ without Python, and a triton plugin loads only in a
Python process. `backplane bench --backends cpu,triton` runs the engine for the library
backends, then this step: for each reference row the engine timed on the triton plugin's
device, of an op and dtype the plugin serves, a row <op>/<plugin>/backplane/<preset>_<dtype>,
in the engine's JSON fields (no "mode": eager, as the engine's), so every table reads it as
one more backend beside the others: x base, %copy_ and %peak against the device's rows
(context "shared_rows.<plugin>" names the library backend they were timed under), x
compile against its compiled rows.

Each row is the op called through the dispatcher with a preference for the plugin held
(as the engine's served_by), on the preset's inputs as the engine builds them (inputs.py),
checked first against the op's `reference:` evaluated in float64 on the CPU (as
bench/result_check.cpp; a row that differs is an error entry, not timed), then timed by
timing.py as its reference row was: the engine's stop rule, as many repetitions, CUDA
events or CUDA graph replays (--cuda-graph), a cold L2 (--cold-l2), the wall clock on CPU.

Limits: the tolerance is compiled.py's (per dtype, scaled by the reference's magnitude),
not the registry's per-op one, which Python does not see; the rows need a library backend
on the same device in the run (the reference and copy_ rows are the engine's), and are
timed after the engine's, never interleaved with them (--interleave); --backward runs time
none (the op's backward calls other ops, which the plugin's preference does not cover); no
host-cost rows."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

from ..formula import Formula
from .compiled import (WrongResult, _device_of, _error_entry, _MAX_MESSAGE, _named, _reference_rows, _tensors,
                       _time_like, _written_argument, check_same, progress_printer)
from .inputs import preset_for, preset_values
from .results import pass_of, shared_rows_owner
from .timing import stop_rule

KIND = "triton"
IMPL = "backplane"  # the engine's name for a backend's own row
AGAINST = "the reference (float64, on the CPU)"


def split_backends(names) -> tuple[list[str], list[str]]:
    """(library backends, triton plugins) of a --backends list (a string "cpu,triton", or
    names), in its order. Listing reads manifests and imports nothing; a name no plugin has
    is left with the library ones, for the engine to report."""
    import backplane
    from .._native import core

    listed = core().backend_names(names, "--backends") if isinstance(names, str) else list(names)
    tritons = {b.name for b in backplane.backends() if b.kind == KIND}
    return [n for n in listed if n not in tritons], [n for n in listed if n in tritons]


def _device(plugin) -> str:
    """The device a loaded triton plugin serves: cuda, or cpu under TRITON_INTERPRET=1."""
    if plugin.dispatch_key == "CPU":
        return "cpu"
    if plugin.dispatch_key == "CUDA":
        return f"cuda:{torch.cuda.current_device()}"
    raise ValueError(f"triton rows are timed on cpu (TRITON_INTERPRET=1) or cuda; {plugin.name} serves "
                     f"{plugin.dispatch_key}")


def _owner_on(results: dict, device: str) -> str:
    """The library backend of the run whose device is `device` and under which the engine
    timed that device's reference and copy_ rows; "" where the run has none there."""
    for key, record in results.get("context", {}).items():
        found = _device_of(record) if key.startswith("backend.") else ""
        if found and torch.device(found) == torch.device(device):
            return shared_rows_owner(results, key.removeprefix("backend."))
    return ""


def triton_rows(results: dict, plugins, *, min_time=None, max_time=None, progress=None) -> list[dict]:
    """Entries of Google Benchmark's JSON for `results["benchmarks"]`, one per repetition of
    each row of the triton `plugins` (names), an error entry for a row that failed; the
    plugins are loaded here, and their context records added to `results` (backend.<p>,
    shared_rows.<p>). A plugin that cannot load, or on whose device the run has no library
    backend, is skipped with its reason on stderr. progress(done, total, name): as
    compiled_rows'."""
    import backplane

    if pass_of(results) != "forward":
        print(f"backplane bench: {', '.join(plugins)}: triton rows are timed in a forward run only; with --backward "
              "none is", file=sys.stderr)
        return []
    rule = stop_rule(min_time, max_time)
    context = results.setdefault("context", {})
    ops = {op.name: op for op in backplane.ops()}
    references = _reference_rows(results)
    targets = []
    for name in plugins:
        # As the engine does with a backend that cannot load: skipped, with its reason.
        try:
            [plugin] = backplane.load(name)
            device = _device(plugin)
        except Exception as e:  # noqa: BLE001  (the loader's reason, whatever its type)
            print(f"backplane bench: skipping backend '{name}': {e}", file=sys.stderr)
            continue
        owner = _owner_on(results, device)
        if not owner:
            print(f"backplane bench: skipping backend '{name}': it runs on {device}, where this run has no library "
                  "backend; its rows are read against the reference and copy_ rows the engine times there: name one "
                  f"beside it (--backends {'cpu' if device == 'cpu' else 'cuda'},{name})", file=sys.stderr)
            continue
        # As the engine records a backend: compiled._device_of and results.rows read it.
        context[f"backend.{name}"] = (f"{plugin.path} (version {plugin.version}, key {plugin.dispatch_key}, "
                                      f"device {device})")
        context[f"shared_rows.{name}"] = owner
        unserved = set()
        for (op, backend, label, dtype), refs in sorted(references.items()):
            if backend != owner:
                continue
            if op in ops and dtype in ops[op].backends.get(name, ()):
                targets.append((name, device, op, label, dtype, refs))
            elif (op, dtype) not in unserved:
                unserved.add((op, dtype))
                print(f"backplane bench: {op} in {dtype} is not implemented on {name}; no {name} row", file=sys.stderr)
    entries = []
    for done, (plugin, device, op, label, dtype, refs) in enumerate(targets):
        row = f"{op}/{plugin}/{IMPL}/{label}_{dtype}"
        if progress:
            progress(done, len(targets), row)
        text = f"{dtype} {ops[op].namespace}::{op.rpartition('::')[2]}"
        try:
            entries += _timed_row(row, ops[op], plugin, label, dtype, torch.device(device), refs, rule, text)
        except WrongResult as e:
            entries.append(_error_entry(row, str(e), text, mode=None))
        except Exception as e:  # noqa: BLE001  (a launcher's failure is the row's, as a kernel's in the engine)
            entries.append(_error_entry(row, f"{type(e).__name__}: {e}"[:_MAX_MESSAGE].strip(), text, mode=None))
    if progress:
        progress(len(targets), len(targets), "")
    return entries


def _timed_row(row, op, plugin, label, dtype, device, references, rule, text) -> list[dict]:
    import backplane

    values = preset_values(op, preset_for(op, label), dtype=getattr(torch, dtype), device=device)
    packet = backplane.torch_op(op.name)
    written = _written_argument(op)
    with backplane.prefer(op.name, plugin):  # the plugin's kernel, whichever plugin the selection would choose
        if written:
            fresh = {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in values.items()}
            packet(**fresh)  # an op that writes an argument: that argument is its result
            got = {"result": fresh[written]}
        else:
            got = _named(_tensors(packet(**values)))
        check_same({k: v.detach().cpu() for k, v in got.items()}, _reference(op, values, getattr(torch, dtype)),
                   against=AGAINST)

        def step():
            packet(**values)

        return _time_like(row, step, device, rule, references, text, mode=None)


def _reference(op, values: dict, dtype) -> dict:
    """The op's `reference:` on float64 copies of the inputs on the CPU, in `dtype`."""
    inputs = {k: v.detach().cpu().double() if isinstance(v, torch.Tensor) else v for k, v in values.items()}
    with torch.no_grad():
        outputs = _tensors(Formula.parse(op.reference)(**inputs))
    return _named([t.to(dtype) for t in outputs])


def add_triton_rows(results: dict, plugins, min_time=None, max_time=None, json_path=None) -> None:
    """`backplane bench`'s step after the engine for the triton plugins it was asked for:
    their rows into `results` (and the JSON file, if any), a progress line on a terminal,
    one stderr line per row that failed (the table shows it as "-")."""
    entries = triton_rows(results, plugins, min_time=min_time, max_time=max_time,
                          progress=progress_printer("triton rows"))
    results["benchmarks"] += entries
    if entries:
        results["context"]["triton_rows"] = (
            f"{', '.join(plugins)}: plugins of kind triton, timed by Python (python/backplane/bench/timing.py) with "
            "the engine's stop rule, after the engine's rows, as their reference rows were; checked against the "
            "reference in float64 first")
    for e in entries:
        if e.get("error_occurred"):
            print(f"backplane bench: {e['name']}: {' '.join(e['error_message'].split())[:300]}", file=sys.stderr)
    if json_path:
        Path(json_path).write_text(json.dumps(results, indent=2) + "\n")
