"""How `backplane tune` turns timings into a selection file's `ops` entries, whatever timed
them: the engine's eager or CUDA-graph rows (cells_from_run) or compiled steps
(tune_compile.py builds the same Cells).

The rule, per op, dispatch key and dtype (each dtype decided on its own):
- A preset's size is the element count of its largest Tensor argument (the core's measure
  of each call); presets of one size (layouts) are decided together.
- The incumbent is the first candidate (the plugin serving without a file). Another takes a
  size only when (1) it is faster by more than `margin` in the geometric mean of its time
  ratios over the size's presets, and (2) a one-sided Mann-Whitney U test (significance.py)
  of its repetitions against the incumbent's says p < `alpha`. The test pools the
  repetitions of the size's presets, each relative to the incumbent's median at its
  preset, so presets of different times are comparable. Where a candidate or the
  incumbent has fewer than 3 repetitions at a preset, no test can be made: the margin
  alone decides, and a note says so (the file carries it as a comment).
- Neighbouring sizes with one winner merge; a range ends at the largest size its winner
  took, and the last takes every larger call.
- Where every dtype decided has the same ranges, one entry without `dtype:` serves all;
  where they differ, one entry per dtype (`dtype: bfloat16`). Each entry records `mode:`.
"""
from __future__ import annotations

import math
import re
from collections import defaultdict
from dataclasses import dataclass, field
from statistics import median
from typing import NamedTuple

from .significance import LEAST_SAMPLES, faster_p

_KEY_IN_CONTEXT = re.compile(r"key (\w+), device ([^)]+)\)$")


@dataclass(frozen=True)
class Timing:
    """One candidate at one preset and dtype: a time per repetition (µs), or why it failed."""
    times_us: tuple = ()
    error: str = ""
    mode: str = "eager"  # eager | graph | compile: how these times were taken

    @property
    def usable(self) -> bool:
        return bool(self.times_us) and not self.error


@dataclass
class Cells:
    """An op on one dispatch key: its candidates (the incumbent first) and their timings,
    {(preset label, dtype): {candidate: Timing}}."""
    candidates: list
    by_cell: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Measured:
    preset: str
    dtype: str
    elements: int
    times_us: dict  # candidate -> its repetitions

    @property
    def median_us(self) -> dict:
        return {p: median(t) for p, t in self.times_us.items()}


class Decision(NamedTuple):
    entries: list  # the selection file's `ops` entries
    left_out: list  # one line per size (or preset) not decided, saying why
    notes: tuple = ()  # how some sizes were decided (no significance test possible, ...)


def preset_sizes(op) -> dict[str, int]:
    """{shape label as the engine names rows: elements of the largest Tensor argument}."""
    sizes = {}
    for preset in op.bench:
        largest = 0
        for name, value in preset["args"].items():
            if name in op.tensor_args:
                largest = max(largest, math.prod(value))
        sizes[re.sub(r"[^0-9A-Za-z]", "_", preset["name"])] = largest
    return sizes


def dispatch_keys(results: dict) -> dict[str, str]:
    """{backend: its dispatch key}, from the run's context."""
    keys = {}
    for key, value in results.get("context", {}).items():
        if key.startswith("backend.") and (m := _KEY_IN_CONTEXT.search(value)):
            keys[key[len("backend."):]] = m.group(1)
    return keys


def cells_from_run(results: dict, ops, backends: list[str]) -> tuple[dict, list]:
    """({(op, key): Cells}, left_out) from the engine's rows of `backends`: every op two or
    more of them were timed for on one key. An op that only one plugin has rows of, where
    another also serves it there, is said (a run cut off before that plugin's rows)."""
    from .results import rows

    keys = dispatch_keys(results)
    by_name = {op.name: op for op in ops}
    found: dict = defaultdict(lambda: defaultdict(dict))  # (op, key) -> (shape, dtype) -> {backend: Timing}
    for r in rows(results):
        if r.impl == "backplane" and r.backend in backends and r.backend in keys and r.op in by_name:
            found[(r.op, keys[r.backend])][(r.shape, r.dtype)][r.backend] = Timing(
                r.times_us, r.error, "graph" if r.cuda_graph else "eager")
    cells, left_out = {}, []
    for (op_name, key), by_cell in sorted(found.items()):
        # A plugin whose rows all failed still counts: the file then says the other serves.
        plugins = [b for b in backends if any(b in f for f in by_cell.values())]
        if len(plugins) < 2:
            silent = [b for b in backends if b not in plugins and keys.get(b) == key
                      and getattr(by_name[op_name], "backends", {}).get(b)]
            if plugins and silent:
                left_out.append(f"{op_name} on {key}: only {plugins[0]} has rows; {', '.join(silent)} also serves it "
                                "here and has none (a run cut off before it?), so no size is decided")
            continue
        cells[(op_name, key)] = Cells(plugins, dict(by_cell))
    return cells, left_out


def decide_cells(cells: dict, ops, margin: float = 0.05, alpha: float = 0.05) -> Decision:
    """The entries for {(op, key): Cells} (the rule: this module's docstring); `margin`
    0.05 = 5%, `alpha` the significance level of the U test."""
    by_name = {op.name: op for op in ops}
    entries, left_out, notes = [], [], []
    for (op_name, key), group in sorted(cells.items()):
        where = f"{op_name} on {key}"
        sizes = preset_sizes(by_name[op_name])
        by_dtype: dict = defaultdict(lambda: defaultdict(dict))  # dtype -> size -> {(shape, dtype): {cand: Timing}}
        for (shape, dtype), found in sorted(group.by_cell.items()):
            if shape in sizes:
                by_dtype[dtype][sizes[shape]][(shape, dtype)] = found
            else:
                left_out.append(f"{where}: preset {shape} ({dtype}): not a bench preset of {op_name} in this "
                                "registry, so its size is unknown")
        decided = {}  # dtype -> [(size, winner, measured, p)]
        for dtype, by_size in by_dtype.items():
            winners, untested = [], []
            for size in sorted(by_size):
                verdict = _size_verdict(where, size, by_size[size], group.candidates, margin, alpha, left_out)
                if verdict:
                    winners.append(verdict[:4])
                    if not verdict[4]:
                        untested.append(size)
            if winners:
                decided[dtype] = winners
            if untested:
                notes.append(f"{where} ({dtype}): {_listed(untested)} elements: fewer than {LEAST_SAMPLES} "
                             "repetitions of a candidate at a preset, so no significance test could be made; "
                             "decided by the margin alone")
        if not decided:
            if by_dtype:
                left_out.append(f"{where}: no size decided, so the file has no entry for it")
            continue
        one_entry = len({_shape_of(w) for w in decided.values()}) == 1
        for dtype in by_dtype:
            if dtype not in decided:
                left_out.append(f"{where}: no size decided in {dtype}; its calls take " +
                                ("the entry without dtype" if one_entry else "the plugin serving without a file"))
        entries += _entries(op_name, key, decided, _mode_of(group))
    return Decision(entries, left_out, tuple(notes))


def _size_verdict(where, size, found, candidates, margin, alpha, left_out):
    """(size, winner, measured, p-values, tested) for one size of one dtype, or None where
    it cannot be decided (said in left_out)."""
    missing = [f"{p} at {shape} {dtype}" for (shape, dtype), f in found.items() for p in candidates if p not in f]
    timed = [p for p in candidates if all(f[p].usable for f in found.values() if p in f)]
    if missing:
        left_out.append(f"{where}: {size} elements: no row of {', '.join(missing)}")
        return None
    if not timed:
        left_out.append(f"{where}: {size} elements: the rows of every plugin failed")
        return None
    measured = [Measured(shape, dtype, size, {p: f[p].times_us for p in timed}) for (shape, dtype), f in found.items()]
    winner, p_values, tested = winner_of(measured, timed, margin, alpha)
    return size, winner, measured, p_values, tested


def winner_of(measured: list[Measured], candidates: list[str], margin: float, alpha: float):
    """(winner, {candidate: one-sided p}, tested): the incumbent (the first candidate),
    unless another is faster by more than `margin` in the geometric mean of its median
    ratios over `measured` and, where a test can be made (tested), significantly so (p <
    alpha). Ratios in logarithms: a ratio of two finite times can overflow."""
    incumbent = candidates[0]
    medians = [m.median_us for m in measured]

    def log_ratio(p):  # < 0: faster than the incumbent
        return sum(math.log(m[p]) - math.log(m[incumbent]) for m in medians) / len(medians)

    tested = all(len(t) >= LEAST_SAMPLES for m in measured for t in m.times_us.values())
    p_values = {}
    if tested:
        for p in candidates[1:]:
            # Each repetition relative to the incumbent's median at its preset, pooled over presets.
            mine = [t / m.median_us[incumbent] for m in measured for t in m.times_us[p]]
            theirs = [t / m.median_us[incumbent] for m in measured for t in m.times_us[incumbent]]
            p_values[p] = faster_p(mine, theirs)
    beyond_margin = [p for p in candidates[1:] if log_ratio(p) < math.log1p(-margin)]
    eligible = [p for p in beyond_margin if not tested or p_values[p] < alpha]
    return (min(eligible, key=log_ratio) if eligible else incumbent), p_values, tested


def _entries(op_name, key, decided: dict, mode: str) -> list[dict]:
    """One entry without dtype where every dtype has the same ranges, else one per dtype."""
    buckets = {dtype: _buckets(winners) for dtype, winners in sorted(decided.items())}
    if len({_shape_of(w) for w in decided.values()}) == 1:
        merged = None
        for dtype_buckets in buckets.values():
            if merged is None:
                merged = [dict(b, measured=list(b["measured"])) for b in dtype_buckets]
            else:
                for mine, theirs in zip(merged, dtype_buckets):
                    mine["measured"] += theirs["measured"]
        return [{"op": op_name, "dispatch_key": key, "mode": mode, "buckets": merged}]
    return [{"op": op_name, "dispatch_key": key, "dtype": dtype, "mode": mode, "buckets": b}
            for dtype, b in buckets.items()]


def _shape_of(winners) -> tuple:
    """The ranges winners make, as the file would write them: ((up_to, plugin), ...)."""
    return tuple((b.get("up_to"), b["plugin"]) for b in _buckets(winners))


def _buckets(winners) -> list[dict]:
    buckets = []
    for size, plugin, measured, p_values in winners:
        figures = []
        for m in measured:
            figure = {"preset": m.preset, "dtype": m.dtype, "elements": m.elements,
                      "median_us": {p: round(t, 3) for p, t in sorted(m.median_us.items())},
                      "repetitions": {p: len(t) for p, t in sorted(m.times_us.items())}}
            if p_values:  # the size's test, on each of its figures
                figure["p_faster"] = {p: round(v, 4) for p, v in sorted(p_values.items())}
            figures.append(figure)
        if buckets and buckets[-1]["plugin"] == plugin:
            buckets[-1]["up_to"] = size
            buckets[-1]["measured"] += figures
        else:
            buckets.append({"up_to": size, "plugin": plugin, "measured": figures})
    del buckets[-1]["up_to"]  # the last range takes every larger call
    return buckets


def _mode_of(group: Cells) -> str:
    """The mode an entry records: that of its timings where all share one, else eager
    (an engine run times only cuda rows as graphs)."""
    modes = {t.mode for found in group.by_cell.values() for t in found.values()}
    return modes.pop() if len(modes) == 1 else "eager"


def _listed(sizes) -> str:
    return ", ".join(str(s) for s in sizes)
