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

In a forward+backward run (--backward) each row is the engine's forward+backward sample
(backward_workload.py, mirroring bench/backward_workloads.cpp): the forward through the
core's Autograd kernel, the backward through the op's `backward:` formulas, with the
plugin preferred for the op and for every registry op those formulas call that it serves
in the row's dtype (rms_norm's rms_norm_backward), so the row times the plugin's forward
and backward kernels; a formula's op it does not serve (mul's mul_backward) runs on the
library backend the row is read against, loaded beside it as in a model, one stderr line
saying so. The output is checked as in a forward run, then the gradients against the
baseline's, as the engine checks its rows; the row's name, label and counters are the
engine's (bytes and elements from its reference row: the least both passes move). With
--cuda-graph the whole sample is captured, as the engine's: the backward runs on the
forward's stream. Ops without a `backward:` have no reference row there, so no triton
row; the engine has said so once for each.

Limits: the forward's tolerance is compiled.py's (per dtype, scaled by the reference's
magnitude), not the registry's per-op one, which Python does not see; the rows need a
library backend on the same device in the run (the reference and copy_ rows are the
engine's), and are timed after the engine's, never interleaved with them (--interleave);
no host-cost rows."""
from __future__ import annotations

import contextlib
import json
import sys
import warnings
from pathlib import Path

import torch

from ..formula import Formula
from ..sharding.formula_facts import calls
from . import backward_workload
from .compiled import (PASSES, WrongResult, _device_of, _error_entry, _MAX_MESSAGE, _named, _reference_rows,
                       _tensors, _time_like, _written_argument, check_same, progress_printer)
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


def triton_only(listed: str, tritons: list[str]) -> str:
    """Why a --backends list of triton plugins alone is refused (bench and tune say it alike)."""
    return (f"--backends {listed}: triton plugins only; their rows are read against the reference and copy_ rows "
            f"the engine times for a library backend on their device: name one beside them (--backends "
            f"cuda,{tritons[0]}; cpu,{tritons[0]} under TRITON_INTERPRET=1)")


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

    passes = pass_of(results)
    if passes not in PASSES:
        raise ValueError(f'the run\'s context "pass" is {passes!r}; expected one of {", ".join(PASSES)}')
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
        if passes != "forward":
            try:  # a backward formula's op the plugin does not serve runs on it, as in a model beside it
                with warnings.catch_warnings():  # each row holds its preferences: the two offers are resolved
                    warnings.filterwarnings("ignore", message=r"backplane: .* is offered by ")
                    backplane.load(owner)
            except Exception as e:  # noqa: BLE001  (the loader's reason, whatever its type)
                print(f"backplane bench: skipping backend '{name}': its backward rows need {owner} loaded beside it: "
                      f"{e}", file=sys.stderr)
                continue
        # As the engine records a backend: compiled._device_of and results.rows read it.
        context[f"backend.{name}"] = (f"{plugin.path} (version {plugin.version}, key {plugin.dispatch_key}, "
                                      f"device {device})")
        context[f"shared_rows.{name}"] = owner
        unserved, noted = set(), set()  # (op, dtype) said once each
        for (op, backend, label, dtype), refs in sorted(references.items()):
            if backend != owner:
                continue
            if op in ops and dtype in ops[op].backends.get(name, ()):
                targets.append((name, device, owner, op, label, dtype, refs))
                if passes != "forward" and (op, dtype) not in noted:
                    noted.add((op, dtype))
                    _say_where_the_backward_runs(ops, ops[op], name, owner, dtype)
            elif (op, dtype) not in unserved:
                unserved.add((op, dtype))
                print(f"backplane bench: {op} in {dtype} is not implemented on {name}; no {name} row", file=sys.stderr)
    entries = []
    for done, (plugin, device, owner, op, label, dtype, refs) in enumerate(targets):
        row = f"{op}/{plugin}/{IMPL}/{label}_{dtype}"
        if progress:
            progress(done, len(targets), row)
        text = f"{ops[op].namespace}::{op.rpartition('::')[2]}"
        text = f"{dtype} {text}" if passes == "forward" else backward_workload.label(dtype, text)
        try:
            held = [(op, plugin)] + (_backward_kernels(ops, ops[op], plugin, owner, dtype) if passes != "forward"
                                     else [])
            entries += _timed_row(row, ops[op], held, label, dtype, torch.device(device), refs, rule, text, passes)
        except WrongResult as e:
            entries.append(_error_entry(row, str(e), text, mode=None))
        except Exception as e:  # noqa: BLE001  (a launcher's failure is the row's, as a kernel's in the engine)
            entries.append(_error_entry(row, f"{type(e).__name__}: {e}"[:_MAX_MESSAGE].strip(), text, mode=None))
    if progress:
        progress(len(targets), len(targets), "")
    return entries


def _backward_calls(ops: dict, op) -> list[str]:
    """The registry ops (ops' names) other than `op` that its `backward:` formulas call, sorted."""
    qualified = {f"{o.namespace}::{o.name.rpartition('::')[2]}": o.name for o in ops.values()}
    return sorted({qualified[node.name] for text in set(op.backward.values()) for node in calls(Formula.parse(text))
                   if node.name in qualified} - {op.name})


def _backward_kernels(ops: dict, op, plugin: str, owner: str, dtype: str) -> list[tuple[str, str]]:
    """(op, plugin) preferences for the ops the op's backward calls: the plugin where it
    serves that op in `dtype`, else `owner`, the library backend the row is read against."""
    return [(n, plugin if dtype in ops[n].backends.get(plugin, ()) else owner) for n in _backward_calls(ops, op)]


def _say_where_the_backward_runs(ops: dict, op, plugin: str, owner: str, dtype: str) -> None:
    """One stderr line for each op the backward calls that the plugin does not serve in `dtype`."""
    for name in _backward_calls(ops, op):
        if dtype in ops[name].backends.get(plugin, ()):
            continue
        where = (f"{owner}'s kernel" if dtype in ops[name].backends.get(owner, ()) else
                 f"its reference: through ATen (neither {plugin} nor {owner} serves it)")
        print(f"backplane bench: {op.name} in {dtype}: its backward calls {name}, which {plugin} does not serve; the "
              f"{plugin} row's backward runs {where}", file=sys.stderr)


def _timed_row(row, op, held, label, dtype, device, references, rule, text, passes) -> list[dict]:
    """held: the (op, plugin) preferences the row holds while it is checked and timed (the
    op on the plugin; in a forward+backward run also the ops its backward calls)."""
    import backplane

    values = preset_values(op, preset_for(op, label), dtype=getattr(torch, dtype), device=device)
    packet = backplane.torch_op(op.name)
    written = _written_argument(op)
    with contextlib.ExitStack() as preferences:
        for name, plugin in held:  # these kernels, whichever plugin the selection would choose
            preferences.enter_context(backplane.prefer(name, plugin))
        if written:
            fresh = {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in values.items()}
            packet(**fresh)  # an op that writes an argument: that argument is its result
            got = {"result": fresh[written]}
        else:
            got = _named(_tensors(packet(**values)))
        check_same({k: v.detach().cpu() for k, v in got.items()}, _reference(op, values, getattr(torch, dtype)),
                   against=AGAINST)
        if passes == "forward":
            def step():
                packet(**values)
        else:  # as the engine's backward_backplane_row: checked against the baseline's gradients, then timed
            workload = backward_workload.ForwardBackward(op, lambda: _tensors(packet(**values)), values)
            wrong = workload.disagreement()
            if wrong:
                raise WrongResult(f"wrong gradient, not timed: {wrong}")
            step = workload.step
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
            "reference in float64 first" + ("" if pass_of(results) == "forward" else
                                             ", their gradients against the baseline's (as the engine's rows)"))
    for e in entries:
        if e.get("error_occurred"):
            print(f"backplane bench: {e['name']}: {' '.join(e['error_message'].split())[:300]}", file=sys.stderr)
    if json_path:
        Path(json_path).write_text(json.dumps(results, indent=2) + "\n")
