"""torch.compile of each op's reference, timed after the engine's run beside its rows:
for every reference row the run timed, a row <op>/<backend>/compiled/<preset>_<dtype> on
the same device, the same inputs (bench/inputs.py) and the same timing (timing.py), in
the engine's JSON fields, so tables read it as the "x compile" column.

    results = bench.run(backends="cuda", cuda_graph=True)
    results["benchmarks"] += bench.compiled_rows(results)

What is compiled is the op's `reference:` (the PyTorch code a user would write and compile;
the reference row times the fused `baseline:` where there is one), or its `baseline:` where
the reference returns a view of an input (crop's narrow): compiled, a view moves no data and
would time as nothing. Compiled once per row with dynamic=False and fullgraph=True: a graph
break would time eager code under torch.compile's name, so it fails the row instead.
Before timing, the compiled output (and, for a forward+backward run, the gradients) must
equal the eager formula's within the dtype's tolerance; a row that differs or fails to
compile is an error entry, not timed. The pass is the run's: context "pass" forward (the default) or
forward+backward, which times the compiled forward and the backward through autograd
(torch.autograd.grad with a fixed random output gradient, into the arguments the op's
`backward:` names). Each row is timed as its reference row was: as many repetitions, as
CUDA graph replays where that row was, cold (--cold-l2) where it was. Devices: cpu (Inductor
needs a C++ compiler) and cuda.

`backplane bench --mode compile` adds beside them the rows of the op itself under
torch.compile, <op>/<backend>/selected/<preset>_<dtype> (selected_rows): torch.ops.<ns>.<op>
compiled the same way (dynamic=False, fullgraph=True), with whatever selection file is in
force, so a row times what a compiled model calls: Inductor's code for the reference where
the selection names `inductor`, else an extern call to the kernel of the plugin it names.
Each is checked against the op's eager call (for an op that writes an argument: that
argument, from fresh copies of the inputs) and timed as the compiled rows are, its
repetitions in turn with its compiled row's (timing.time_steps: one batch size, the order
reversed every other repetition), so the ratio of the two is measured side by side.
Every entry here says "mode": "compile"."""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from statistics import median

import torch

from ..formula import Formula
from .inputs import preset_for, preset_values
from .results import _UNITS, _error, pass_of, repetitions
from .timing import stop_rule, time_step, time_steps

LABEL = "torch.compile(reference)"
SELECTED_LABEL = "torch.compile(selected)"
PASSES = ("forward", "forward+backward")
MODE = "compile"  # every entry's "mode" (results.mode_of)

_MAX_MESSAGE = 2000  # an Inductor failure carries its whole generated source; the head says why
# max |compiled - eager| <= tolerance * (|eager| + max |eager|), per element: eager rounds
# every intermediate to the dtype where compiled code keeps float32, so the difference
# scales with the operands, not with each element (an element near 0 after a cancellation).
_TOLERANCE = {torch.float64: 1e-7, torch.float32: 1e-4, torch.float16: 1e-2, torch.bfloat16: 1e-2}


def wanted_by_default(results: dict) -> bool:
    """Whether a run gets compiled rows without --compile: a selected backend on cuda (and
    then for cuda's rows only: add_compiled_rows)."""
    return any(_device_of(value).startswith("cuda") for key, value in results.get("context", {}).items()
               if key.startswith("backend."))


def _device_of(backend_record: str) -> str:
    """The device of a context "backend.<name>" record: "... (version 0.1.0, key CUDA, device cuda:0)"."""
    found = re.search(r"device ([^,)]+)\)$", backend_record)
    return found.group(1) if found else ""


def _reference_rows(results: dict) -> dict[tuple, list[dict]]:
    """(op, backend, preset label, dtype) -> the timed repetitions of its reference row."""
    found: dict[tuple, list[dict]] = {}
    for op, backend, impl, preset_dtype, entry in repetitions(results):
        if impl == "reference" and not _error(entry):
            label, _, dtype = preset_dtype.rpartition("_")
            found.setdefault((op, backend, label, dtype), []).append(entry)
    return found


def compiled_rows(results: dict, *, min_time: float | None = None, max_time: float | None = None,
                  device_types=None, progress=None) -> list[dict]:
    """Entries of Google Benchmark's JSON, one per repetition of each compiled row (one
    error entry for a row that failed), for `results["benchmarks"]`. min_time, max_time:
    as the engine's --min-time/--max-time. device_types: the rows of backends on these
    device types only ("cuda",...; default: all). progress(done, total, name) is called
    before each row, and with done == total at the end."""
    return _rows_beside_references(results, ("compiled",), min_time, max_time, device_types, progress)


def selected_rows(results: dict, *, min_time: float | None = None, max_time: float | None = None,
                  device_types=None, progress=None, with_compiled: bool = False) -> list[dict]:
    """As compiled_rows, the rows of the op itself under torch.compile (impl "selected"),
    served as the selection file in force says; the run's backends are loaded first (the
    engine loaded them in its own process). with_compiled: each compiled row too, its
    repetitions timed in turn with the selected row's (timing.time_steps), so the ratio of
    the two is measured side by side, not minutes apart."""
    import backplane

    backends = [key.removeprefix("backend.") for key in results.get("context", {}) if key.startswith("backend.")]
    if backends:
        backplane.load(*backends)
    impls = ("compiled", "selected") if with_compiled else ("selected",)
    return _rows_beside_references(results, impls, min_time, max_time, device_types, progress)


def _rows_beside_references(results, impls, min_time, max_time, device_types, progress) -> list[dict]:
    import backplane

    passes = pass_of(results)
    if passes not in PASSES:
        raise ValueError(f'the run\'s context "pass" is {passes!r}; expected one of {", ".join(PASSES)}')
    rule = stop_rule(min_time, max_time)
    ops = {op.name: op for op in backplane.ops()}
    context = results.get("context", {})
    targets = sorted((key, refs) for key, refs in _reference_rows(results).items()
                     if device_types is None or _device_of(context.get(f"backend.{key[1]}", "")).split(":")[0]
                     in device_types)
    entries = []
    for done, ((op, backend, label, dtype), references) in enumerate(targets):
        names = {impl: f"{op}/{backend}/{impl}/{label}_{dtype}" for impl in impls}
        if progress:
            progress(done, len(targets), names[impls[-1]])
        try:
            # One set of inputs for the rows timed together: where they run the same generated code,
            # other buffers (addresses, L2 placement) could part their times.
            device, inputs = _target_inputs(op, ops, context.get(f"backend.{backend}", ""), backend, label, dtype,
                                            passes)
        except Exception as e:  # noqa: BLE001  (the rows of a target that cannot be made fail alike)
            entries += [_row_error(names[impl], impl, e) for impl in impls]
            continue
        steps = {}  # impl -> (step, label): the rows that compiled and were right, timed together
        try:
            for impl in impls:
                try:
                    steps[impl] = _PREPARE[impl](ops[op], dtype, device, inputs)
                except Exception as e:  # noqa: BLE001  (any failure to compile or run is the row's, as in the engine)
                    entries.append(_row_error(names[impl], impl, e))
            if steps:
                try:
                    entries += _time_together(names, steps, device, rule, references)
                except Exception as e:  # noqa: BLE001  (any failure to time is the rows', as in the engine)
                    entries += (_time_each_alone(names, steps, device, rule, references, e) if len(steps) > 1
                                else [_row_error(names[impl], impl, e) for impl in steps])
        finally:
            torch._dynamo.reset()  # each row compiles afresh; the cache limit per function is never reached
    if progress:
        progress(len(targets), len(targets), "")
    return entries


def _target_inputs(op, ops, record, backend, label, dtype, passes):
    """(device, (whether the pass is forward+backward, the preset's values)) of one target."""
    if op not in ops:
        raise ValueError(f"{op} is not in this process's registry (load the plugin that defines it)")
    device = _device_of(record)
    if not device:
        raise ValueError(f'the run\'s context names no device for backend {backend}: "{record}"')
    return torch.device(device), _row_inputs(ops[op], label, dtype, torch.device(device), passes)


def _row_error(name, impl, e) -> dict:
    if isinstance(e, WrongResult):
        return _error_entry(name, str(e), _LABELS[impl])
    return _error_entry(name, f"{type(e).__name__}: {e}"[:_MAX_MESSAGE].strip(), _LABELS[impl])


_LABELS = {"compiled": LABEL, "selected": SELECTED_LABEL}


class WrongResult(AssertionError):
    """The compiled formula's output or gradient differs from the eager formula's."""


def _reference_step(op, dtype_name, device, inputs):
    """(step, label) of torch.compile of the op's reference, checked against the eager formula.
    inputs: _row_inputs'."""
    backward, values = inputs
    formula_text = compiled_formula_text(op, values)
    eager, compiled, tensors = _compiled_formula(Formula.parse(formula_text), op, values)
    if backward:
        run, step = _forward_backward(op, values, eager, compiled, tensors, device)
    else:
        def run(fn):
            return _named(_tensors(fn(*tensors)))

        def step():
            compiled(*tensors)
    check_same(run(compiled), run(eager))
    return step, f"{dtype_name} {LABEL}: {formula_text}"


def compiled_formula_text(op, values: dict) -> str:
    """The formula a compiled row compiles for these values: the op's `reference:`, or its
    `baseline:` where the reference returns a view of an input (compiled, a view moves no
    data and would time as nothing)."""
    if op.baseline and _returns_a_view(Formula.parse(op.reference), op, values):
        return op.baseline
    return op.reference


def _row_inputs(op, label, dtype_name, device, passes) -> tuple[bool, dict]:
    """(whether the pass is forward+backward, the preset's values, with gradients where it is)."""
    backward = passes == "forward+backward"
    if backward and not op.differentiable:
        raise ValueError(f"{op.name} has no backward: in the registry; a forward+backward run cannot time it")
    return backward, preset_values(op, preset_for(op, label), dtype=getattr(torch, dtype_name), device=device,
                                   requires_grad=op.differentiable if backward else ())


def _forward_backward(op, values, eager, compiled, tensors, device):
    """(run, step) of a forward+backward row: run(fn) gives fn's outputs and the gradients of
    the arguments the op's `backward:` names for a fixed random output gradient; step() is
    the compiled pass timed."""
    inputs = [values[n] for n in op.differentiable]
    generator = torch.Generator(device=device).manual_seed(1)
    grads = [torch.randn(t.shape, dtype=t.dtype, device=device, generator=generator)
             for t in _tensors(eager(*tensors))]

    def run(fn):
        outputs = _tensors(fn(*tensors))
        gradients = torch.autograd.grad(outputs, inputs, grads)
        return {**_named(outputs), **{f"gradient of {n}": g for n, g in zip(op.differentiable, gradients)}}

    def step():
        torch.autograd.grad(_tensors(compiled(*tensors)), inputs, grads)

    return run, step


def _time_like(name, step, device, rule, references, label, mode=MODE) -> list[dict]:
    """The row timed as its reference row was: as many repetitions, CUDA graph replays and
    a cold L2 where that row had them. mode: the entries' "mode" (None: none, as the engine's)."""
    cuda_graph, cold_l2 = _timed_as(references)
    timings = time_step(step, device, rule, repetitions=len(references), cuda_graph=cuda_graph, cold_l2=cold_l2)
    return _entries(name, timings, references, label, cuda_graph, cold_l2, mode)


def _time_together(names: dict, steps: dict, device, rule, references) -> list[dict]:
    """The rows of one target (impl -> (step, label)), named by `names`, timed as _time_like
    times one, two of them with their repetitions in turn (timing.time_steps)."""
    if len(steps) == 1:
        ((impl, (step, label)),) = steps.items()
        return _time_like(names[impl], step, device, rule, references, label)
    cuda_graph, cold_l2 = _timed_as(references)
    timings = time_steps({impl: step for impl, (step, _) in steps.items()}, device, rule,
                         repetitions=len(references), cuda_graph=cuda_graph, cold_l2=cold_l2)
    return [entry for impl, (_, label) in steps.items()
            for entry in _entries(names[impl], timings[impl], references, label, cuda_graph, cold_l2)]


def _time_each_alone(names: dict, steps: dict, device, rule, references, failure: Exception) -> list[dict]:
    """The rows of a target whose timing together failed (`failure`), each timed alone
    (_time_like), so that a failure that repeats falls on the row it is: a selected row that
    launches no work under --cuda-graph (NoDeviceWork) no longer fails its compiled row with
    it. A row that times alone says so (its "timed_alone": why not in turn): its ratio to
    the other was not measured side by side. A failure that stays (a CUDA error that
    poisons the process) still falls on both."""
    why = f"{type(failure).__name__}: {' '.join(str(failure).split())}"[:300]
    entries = []
    for impl, (step, label) in steps.items():
        try:
            timed = _time_like(names[impl], step, device, rule, references, label)
        except Exception as e:  # noqa: BLE001  (any failure to run is the row's, as in the engine)
            entries.append(_row_error(names[impl], impl, e))
            continue
        entries += [{**entry, "timed_alone": f"not in turn with the other rows: timing them together failed ({why})"}
                    for entry in timed]
    return entries


def _timed_as(references) -> tuple[bool, bool]:
    """(CUDA graph replays, cold L2): as the reference row was timed."""
    return (any(bool(e.get("cuda_graph")) for e in references), any(bool(e.get("cold_l2")) for e in references))


def _selected_step(op, dtype_name, device, inputs):
    """(step, label) of the op itself under torch.compile, checked against its eager call.
    inputs: _row_inputs'."""
    import backplane

    backward, values = inputs
    eager, compiled, tensors = _compiled_call(backplane.torch_op(op.name), op, values)
    written = _written_argument(op)
    names = [n for n in op.tensor_args if n in values]
    if backward:
        run, step = _forward_backward(op, values, eager, compiled, tensors, device)
    elif written:
        def run(fn):  # fresh copies: the op changes its argument
            fresh = [t.clone() for t in tensors]
            fn(*fresh)
            return {f"written {written}": fresh[names.index(written)]}

        def step():
            compiled(*tensors)
    else:
        def run(fn):
            return _named(_tensors(fn(*tensors)))

        def step():
            compiled(*tensors)
    check_same(run(compiled), run(eager))
    return step, f"{dtype_name} {SELECTED_LABEL}: torch.ops.{op.namespace}.{op.name.rpartition('::')[2]}"


# impl -> what makes its row's (step, label) from a target's inputs
_PREPARE = {"compiled": _reference_step, "selected": _selected_step}


def _compiled_call(packet, op, values: dict):
    """(eager, compiled, tensors): the op's packet as a function of its Tensor arguments
    (the others fixed, by name), both ways, and those tensors."""
    names = [n for n in op.tensor_args if n in values]
    fixed = {k: v for k, v in values.items() if k not in names}

    def call(*tensors):
        return packet(**fixed, **dict(zip(names, tensors)))

    return call, compile_reference(call), [values[n] for n in names]


def _written_argument(op) -> str:
    """The argument an op writes (an in_place or out shape rule), or ""."""
    rule = op.shape[0] if op.shape else {}
    return rule.get("args", [""])[0] if rule.get("kind") in ("in_place", "out") else ""


def _compiled_formula(formula: Formula, op, values: dict):
    """(eager, compiled, tensors): the formula as a function of the op's Tensor arguments
    (other arguments fixed: compiled for these values), both ways, and those tensors."""
    names = [n for n in op.tensor_args if n in values]
    fixed = {k: v for k, v in values.items() if k not in names}

    def reference(*tensors):
        return formula(**fixed, **dict(zip(names, tensors)))

    return reference, compile_reference(reference), [values[n] for n in names]


def compile_reference(fn):
    """torch.compile as each row uses it: shapes fixed, no graph break allowed."""
    return torch.compile(fn, dynamic=False, fullgraph=True)


def _returns_a_view(formula: Formula, op, values: dict) -> bool:
    """Whether an output of `formula` shares memory with one of the op's Tensor arguments."""
    with torch.no_grad():
        outputs = _tensors(formula(**values))
    inputs = {values[n].untyped_storage().data_ptr() for n in op.tensor_args if n in values}
    return any(out.untyped_storage().data_ptr() in inputs for out in outputs)


def _tensors(value) -> list:
    """A formula's result as a list of tensors (one, or a Tensor[] formula's several)."""
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _named(outputs: list) -> dict:
    return {"result": outputs[0]} if len(outputs) == 1 else {f"result {i}": t for i, t in enumerate(outputs)}


def check_same(got: dict, expected: dict, against: str = "the eager formula") -> None:
    """Raises WrongResult naming the first tensor (a result, then a gradient) of `got` that
    differs from `expected`'s: {what: tensor}, compiled and eager (`against` names it)."""
    def wrong(what):
        return WrongResult(f"wrong result against {against}, not timed: {what}")

    if list(got) != list(expected):
        raise wrong(f"{', '.join(got)} where {against} gives {', '.join(expected)}")
    for what, e in expected.items():
        a = got[what]
        if a.shape != e.shape or a.dtype != e.dtype:
            raise wrong(f"{what} is {a.dtype} {tuple(a.shape)}, {against}'s {e.dtype} {tuple(e.shape)}")
        if not a.numel():
            continue
        tol = _TOLERANCE.get(e.dtype, 0.0)
        a64, e64 = a.detach().double(), e.detach().double()
        diff = (a64 - e64).abs()
        bad = (diff > tol * (e64.abs() + e64.abs().max())) | (a64.isnan() ^ e64.isnan())
        if bad.any():
            raise wrong(f"{what}: {int(bad.sum())} of {a.numel()} elements differ beyond {tol:g} of (|eager| + "
                        f"max |eager|); max abs difference {diff.nan_to_num(float('inf')).max().item():.3g}")


def _entries(name, timings, references, label, cuda_graph, cold_l2=False, mode=MODE) -> list[dict]:
    """One entry per repetition, with the reference row's traffic (bytes and elements per
    call are the same workload's) turned into rates at this row's time, and its FLOPs per
    call. mode None: no "mode" field (eager, as the engine's entries)."""
    def per_call(rate):
        amounts = [e[rate] * e["real_time"] * _UNITS[e.get("time_unit", "us")] * 1e-6 for e in references if rate in e]
        return median(amounts) if amounts else None

    nbytes, items = per_call("bytes_per_second"), per_call("items_per_second")
    flops = [e["flops"] for e in references if isinstance(e.get("flops"), (int, float)) and e["flops"] > 0]
    entries = []
    for i, t in enumerate(timings):
        entry = {"name": name, "run_name": name, "run_type": "iteration", "repetitions": len(timings),
                 "repetition_index": i, "threads": 1, "iterations": 1, "real_time": t.seconds * 1e6,
                 "time_unit": "us", "spread": t.spread, "samples": t.samples, "sampled_seconds": t.sampled_seconds,
                 "calls_per_batch": t.calls_per_batch, "label": label}
        if mode:
            entry["mode"] = mode
        if nbytes is not None:
            entry["bytes_per_second"] = nbytes / t.seconds
        if items is not None:
            entry["items_per_second"] = items / t.seconds
        if flops:
            entry["flops"] = median(flops)
        if cuda_graph:
            entry["cuda_graph"] = 1
        if cold_l2:
            entry["cold_l2"] = 1
        entries.append(entry)
    return entries


def _error_entry(name: str, message: str, label: str = LABEL, mode=MODE) -> dict:
    entry = {"name": name, "run_name": name, "run_type": "iteration", "repetitions": 1, "repetition_index": 0,
             "threads": 1, "iterations": 0, "error_occurred": True, "error_message": message, "label": label}
    if mode:
        entry["mode"] = mode
    return entry


def progress_printer(label: str):
    """A progress line on a terminal (stderr), overwritten by the next and cleared at the
    end; nothing when piped."""
    def print_progress(done: int, total: int, name: str) -> None:
        if sys.stderr.isatty():
            line = f"{label} {done + 1}/{total}: {name}" if done < total else ""
            print(f"\r\033[K{line}", end="", file=sys.stderr, flush=True)
    return print_progress


print_progress = progress_printer(LABEL)


def add_compiled_rows(results: dict, min_time=None, max_time=None, json_path=None, device_types=None,
                      selected: bool = False, reference: bool = True) -> None:
    """`backplane bench`'s step after the engine: the compiled rows into `results` (and
    the JSON file the engine wrote, if any), with a progress line on a terminal and one
    line on stderr per row that failed (the table shows such a row as "-"). reference: the
    rows of torch.compile of each reference; selected: those of the op itself under
    torch.compile (`--mode compile`), for every device type."""
    import backplane

    entries = []
    context = results.setdefault("context", {})
    together = selected and reference and device_types is None  # each selected row in turn with its compiled one
    if reference and not together:
        entries += compiled_rows(results, min_time=min_time, max_time=max_time, device_types=device_types,
                                 progress=print_progress)
    if selected:
        entries += selected_rows(results, min_time=min_time, max_time=max_time, with_compiled=together,
                                 progress=progress_printer("torch.compile" if together else SELECTED_LABEL))
        context["selected"] = (f"{SELECTED_LABEL}: torch {torch.__version__}, dynamic=False, fullgraph=True, "
                               f"selection file {backplane.selection_file() or 'none'}; timed as the reference rows"
                               + (f", each in turn with its {LABEL} row" if together else ""))
    if reference:
        context["compiled"] = (f"{LABEL}: torch {torch.__version__}, dynamic=False, fullgraph=True; timed as the "
                               "reference rows")
    results["benchmarks"] += entries
    for e in entries:
        if e.get("error_occurred"):
            print(f"backplane bench: {e['name']}: {' '.join(e['error_message'].split())[:300]}", file=sys.stderr)
        elif e.get("timed_alone") and e.get("repetition_index") == 0:
            print(f"backplane bench: {e['name']}: timed alone, {e['timed_alone']}", file=sys.stderr)
    if json_path:
        Path(json_path).write_text(json.dumps(results, indent=2) + "\n")
