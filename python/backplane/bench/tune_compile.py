"""`backplane tune --mode compile`: each candidate timed as compiled code, the way a deployer
who compiles runs it. Candidates for an op on one dispatch key: every named plugin serving
it there, in --backends order (the first is the incumbent, the plugin serving without a
file), and `inductor` (Inductor's code for the registry `reference:`) for ops that have one
and return new tensors.

What is timed is a step in which the op sits between a producer and a consumer elementwise
op, so that Inductor's fusion of its own code with them counts, as it would in a model:

    def step(*xs):  ys = [x + 0.5 for each floating Tensor argument]
                    out = op(*ys, other arguments fixed)
                    return [o * 0.5 for each floating output]

(`x + 0.5` and `* 0.5` are not elided, where `x * 1.0` could be simplified away.) Compiled
with torch.compile(dynamic=False, fullgraph=True) afresh per candidate, after a temporary
selection file whose one entry for (op, key, dtype) has the single bucket {plugin:
candidate} is applied (the compile cache key includes the selection in force); the file in
force before is applied again afterwards. The compiled step's result must equal the eager
reference step's within the dtype's tolerance (compiled.check_same), else the candidate's
row fails and it cannot take that size. Timed by timing.time_step, with the engine's stop
rule, `repetitions` times: wall clock on cpu, CUDA events on cuda, or (cuda_graph, cuda
only) replays of the compiled step recorded in a CUDA graph.

Limits: forward only; the producer writes a fresh contiguous tensor, so a preset's layout
(transposed, strided) reaches the op only as Inductor lays out the producer's output. Presets
of the same sizes that differ only in layout (add's 1M_transposed and 1M_sliced) are
therefore one compiled step: it is compiled and timed once and its figures stand for each
(the registry's 43 presets of ops `inductor` can serve are 39 steps);
devices cpu and cuda (keys CPU and CUDA); the inputs are those of the engine's rows
(inputs.py).
"""
from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import time
import warnings

import torch

from .compiled import WrongResult, check_same
from .inputs import preset_label, preset_values
from .selection_file import selection_yaml
from .timing import time_step
from .tune_decision import Cells, Timing

INDUCTOR = "inductor"
DEVICES = {"CPU": "cpu", "CUDA": "cuda"}
_MAX_MESSAGE = 600  # an Inductor failure carries its generated source; the head says why


def can_be_inductor(op) -> bool:
    """Whether `inductor` may serve the op: it has a `reference:` and writes no argument
    (an `(a!)` in its schema), as the core requires of an `inductor` bucket."""
    return bool(op.reference) and "!" not in op.schema


def candidates_of(op, key: str, plugins: dict[str, str], dtype: str) -> list[str]:
    """The candidates for `op` on `key` in `dtype`: plugins ({name: key}, --backends
    order) implementing it there, then `inductor` where it can serve."""
    found = [p for p, k in plugins.items() if k == key and dtype in op.backends.get(p, ())]
    return found + [INDUCTOR] if found and can_be_inductor(op) else found


def presets_of(op, shapes: str) -> list[dict]:
    """The op's bench presets that --shapes names (all of them for "all" or "")."""
    if shapes in ("", "all"):
        return list(op.bench)
    wanted = {preset_label(s) for s in shapes.split(",")}
    return [p for p in op.bench if preset_label(p["name"]) in wanted]


def measure(ops, plugins: dict[str, str], dtypes: list[str], shapes: str, rule, repetitions: int,
            cuda_graph: bool = False, progress=None) -> dict:
    """{(op, key): Cells} of compiled-step timings for every op in `ops` (OpInfo rows) on
    every key of `plugins` ({name: dispatch key}, in load order) with two or more
    candidates."""
    import backplane

    cells: dict = {}
    timed: dict = {}  # one compiled step per (op, key, dtype, the preset's sizes, candidate)
    SPENT.update(compile=0.0, timing=0.0, candidates=0)
    forcing = _Forcing()
    try:
        work = [(op, key, preset, dtype, candidates_of(op, key, plugins, dtype))
                for op in ops for key in dict.fromkeys(plugins.values()) if key in DEVICES
                for preset in presets_of(op, shapes) for dtype in dtypes]
        work = [w for w in work if len(w[4]) >= 2]
        for done, (op, key, preset, dtype, candidates) in enumerate(work):
            group = cells.setdefault((op.name, key), Cells([]))
            for c in candidates:  # an op's dtypes may have different plugins: the union, in order
                if c not in group.candidates:
                    group.candidates.append(c)
            group.candidates.sort(key=lambda c: (c == INDUCTOR, list(plugins).index(c) if c in plugins else 0))
            label = preset_label(preset["name"])
            if progress:
                progress(done, len(work), f"{op.name} {label} {dtype}")
            found = group.by_cell.setdefault((label, dtype), {})
            for candidate in candidates:
                step = (op.name, key, dtype, _sizes_of(preset), candidate)
                if step not in timed:
                    timed[step] = _timed(op, key, preset, dtype, candidate, forcing, rule, repetitions, cuda_graph,
                                         backplane)
                found[candidate] = timed[step]
        if progress:
            progress(len(work), len(work), "")
    finally:
        forcing.close()
    return cells


def _sizes_of(preset: dict) -> str:
    """A preset's arguments without its layout: the step the producer makes of it."""
    return repr(sorted(preset["args"].items()))


def _timed(op, key, preset, dtype, candidate, forcing, rule, repetitions, cuda_graph, backplane) -> Timing:
    device = torch.device(DEVICES[key])
    try:
        values = preset_values(op, preset, dtype=getattr(torch, dtype), device=device)
        with forcing.only(op.name, key, dtype, candidate):
            torch._dynamo.reset()  # compiled afresh under this candidate's selection
            eager, compiled, tensors = steps(op, values, backplane)
            began = time.monotonic()
            first = compiled(*tensors)  # the compile happens here
            SPENT["compile"] += time.monotonic() - began
            SPENT["candidates"] += 1
            check_same(_named(first), _named(eager(*tensors)))
            began = time.monotonic()
            timings = time_step(lambda: compiled(*tensors), device, rule, repetitions=repetitions,
                                cuda_graph=cuda_graph and device.type == "cuda")
            SPENT["timing"] += time.monotonic() - began
        return Timing(tuple(t.seconds * 1e6 for t in timings), "", "compile")
    except WrongResult as e:
        return Timing((), str(e), "compile")
    except Exception as e:  # noqa: BLE001  (a failure to force, compile or run is the candidate's, as in the engine)
        return Timing((), f"{type(e).__name__}: {e}"[:_MAX_MESSAGE].strip(), "compile")
    finally:
        torch._dynamo.reset()


def steps(op, values: dict, backplane):
    """(eager, compiled, tensors): the producer -> op -> consumer step as a function of the
    op's Tensor arguments, with the op's registry reference eagerly (what every candidate
    must match) and with the op compiled, and those tensors."""
    from ..formula import Formula

    names = [n for n in op.tensor_args if n in values]
    fixed = {k: v for k, v in values.items() if k not in names}
    reference = Formula.parse(op.reference) if op.reference else None
    call = backplane.torch_op(op.name)

    def around(fn):
        def step(*xs):
            ys = [x + 0.5 if x.is_floating_point() else x for x in xs]
            out = fn(**fixed, **dict(zip(names, ys)))
            outs = list(out) if isinstance(out, (list, tuple)) else [out]
            return [o * 0.5 if o.is_floating_point() else o for o in outs]
        return step

    eager = around(reference) if reference else around(lambda **a: call(**a))
    compiled = torch.compile(around(lambda **a: call(**a)), dynamic=False, fullgraph=True)
    return eager, compiled, [values[n] for n in names]


def _named(outputs: list) -> dict:
    return {f"result {i}": t for i, t in enumerate(outputs)}


class _Forcing:
    """Applies one-bucket selection files, each the only choice for one (op, key, dtype),
    and the file in force before after each. The files have no path or date in them, so
    every rank of a job forcing the same candidates applies the same contents (the core's
    cross-rank check compares them)."""

    def __init__(self):
        import backplane

        self.backplane = backplane
        self.before = backplane.selection_file() or None
        self.folder = tempfile.mkdtemp(prefix="backplane-tune-")
        self.path = os.path.join(self.folder, "forced.yaml")

    @contextlib.contextmanager
    def only(self, op: str, key: str, dtype: str, candidate: str):
        entry = {"op": op, "dispatch_key": key, "dtype": dtype, "mode": "compile", "buckets": [{"plugin": candidate}]}
        with open(self.path, "w", encoding="utf-8") as f:
            f.write(selection_yaml([entry], {"command": "backplane tune --mode compile: one candidate forced"}))
        with warnings.catch_warnings():  # "not loaded", "differs from this environment": not this file's purpose
            warnings.simplefilter("ignore")
            self.backplane.apply_selection(self.path)
        try:
            yield
        finally:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                self.backplane.apply_selection(self.before)

    def close(self):
        with contextlib.suppress(OSError):
            os.unlink(self.path)
        with contextlib.suppress(OSError):
            os.rmdir(self.folder)


_started = [0.0]
# Seconds this process spent compiling candidates (their first call) and timing them, and
# how many: the last progress line says where a run's time went.
SPENT = {"compile": 0.0, "timing": 0.0, "candidates": 0}


def print_progress(done: int, total: int, name: str) -> None:
    """Progress on stderr: on a terminal one line rewritten in place and cleared at the end;
    piped (a log, tee), a line per compiled step with the seconds since the first, so a
    run of minutes shows where its time goes."""
    if done == 0:
        _started[0] = time.monotonic()
    if sys.stderr.isatty():
        line = f"tune --mode compile {done + 1}/{total}: {name}" if done < total else ""
        print(f"\r\033[K{line}", end="", file=sys.stderr, flush=True)
    elif done < total:
        print(f"tune --mode compile {done + 1}/{total} at {time.monotonic() - _started[0]:.1f} s: {name}",
              file=sys.stderr, flush=True)
    if done == total:
        print(f"tune --mode compile: {total} steps in {time.monotonic() - _started[0]:.1f} s; {SPENT['candidates']} "
              f"candidates compiled in {SPENT['compile']:.1f} s and timed in {SPENT['timing']:.1f} s",
              file=sys.stderr, flush=True)
