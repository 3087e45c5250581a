"""`backplane tune`: which plugin should serve each op, by call size, decided by measurement.

    backplane tune --backends cuda,cuda_alt [--ops add,mul] [--shapes all|NAME,...]
                   [--dtypes float32,bfloat16] [--margin 5] [--out selection.yaml]
    backplane tune --backends cuda,cuda_alt --from-json run.json [--margin 5] [--out ...]

For every op that two or more of the named plugins serve on one device, the benchmark
engine times each plugin's kernel (the engine holds a preference for the plugin whose row
it times) over the registry's bench presets (`--shapes`: all of them by default, or those
named), and this writes a selection file (core/include/backplane/selection_file.h): per
op and dispatch key, size ranges -> plugin, with the figures that decided each range.
Apply it with backplane.load(..., selection=FILE), BACKPLANE_SELECTION=FILE or
`backplane --selection FILE <command>`. `--from-json` decides from an earlier run's engine
JSON (`tune --json`, `bench --json`) instead of timing: another margin, or figures taken
on the machine that will serve.

How a range is decided:
- A preset's size is the element count of its largest Tensor argument, the measure the
  core takes of each call. Presets of one size (layouts: transposed, sliced...) and every
  dtype timed are decided together: each plugin's time is the geometric mean of its
  times over them, relative to the incumbent's.
- The incumbent is the plugin that serves without a file: the first of --backends that
  offers the op (the core's "loaded first"). Another plugin takes a size only when it is
  faster by more than --margin percent (default 5): within the margin is noise, and a
  switch costs a boxed call through the core's selector.
- Neighbouring sizes with one winner merge; a range ends at the largest size its plugin
  won (`up_to`), and the last range takes every larger call. Sizes between two measured
  presets go with the larger: measure more presets (--shapes) where that matters.
- A row that failed (a kernel refused as wrong) disqualifies its plugin at that size.
- A size is decided only where every plugin has a row for each preset and dtype timed at
  it (a run cut off mid-way may lack some), and some plugin's rows there did not fail; a
  preset this registry does not have is of no known size. Those are left out, and said
  (on stderr, and as comments in the file); their calls go with the next larger size.

The file (selection_file.py) is written beside --out, read back by the core, then renamed
over it: a failure leaves the old one as it was. --out is checked before any timing.
"""
from __future__ import annotations

import argparse
import datetime
import math
import os
import re
import sys
import warnings
from collections import defaultdict
from dataclasses import dataclass
from typing import NamedTuple

import backplane

from .._native import core
from . import selection_file
from .selection_file import selection_yaml, text_of

_KEY_IN_CONTEXT = re.compile(r"key (\w+), device ([^)]+)\)$")


@dataclass(frozen=True)
class Measured:
    preset: str
    dtype: str
    elements: int
    median_us: dict  # plugin -> µs


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


class Decision(NamedTuple):
    entries: list  # the selection file's `ops` entries
    left_out: list  # one line per size (or preset) not decided, saying why


def decide(results: dict, ops, backends: list[str], margin: float = 0.05) -> Decision:
    """The selection file's `ops` entries for this run: [{op, dispatch_key, buckets: [{up_to?,
    plugin, measured}]}] for every op two or more of `backends` were timed for on one key,
    and the sizes left out. A size is decided only where every one of those plugins has a
    row (timed, or failed) for each preset and dtype timed at it: a run cut off mid-way
    leaves a size with the rows of one plugin, measured against nothing.
    `ops`: backplane.ops() rows (the registry's presets); `margin`: 0.05 = 5%."""
    from .results import rows

    keys = dispatch_keys(results)
    by_name = {op.name: op for op in ops}
    cells: dict = defaultdict(lambda: defaultdict(dict))  # (op, key) -> (shape, dtype) -> {backend: Row}
    for r in rows(results):
        if r.impl == "backplane" and r.backend in backends and r.backend in keys and r.op in by_name:
            cells[(r.op, keys[r.backend])][(r.shape, r.dtype)][r.backend] = r
    entries, left_out = [], []
    for (op_name, key), by_cell in sorted(cells.items()):
        # A plugin whose rows all failed still counts: the file then says the other serves.
        plugins = [b for b in backends if any(b in found for found in by_cell.values())]
        where = f"{op_name} on {key}"
        if len(plugins) < 2:
            # Another plugin on this key implements the op, and has no row: a run cut off
            # before it reached that plugin. Said, not silently dropped.
            silent = [b for b in backends if b not in plugins and keys.get(b) == key
                      and getattr(by_name[op_name], "backends", {}).get(b)]
            if plugins and silent:
                left_out.append(f"{where}: only {plugins[0]} has rows; {', '.join(silent)} also serves it here and "
                                "has none (a run cut off before it?), so no size is decided")
            continue
        sizes = preset_sizes(by_name[op_name])
        by_size: dict = defaultdict(dict)
        for (shape, dtype), found in sorted(by_cell.items()):
            if shape in sizes:
                by_size[sizes[shape]][(shape, dtype)] = found
            else:
                left_out.append(f"{where}: preset {shape} ({dtype}): not a bench preset of {op_name} in this "
                                "registry, so its size is unknown")
        winners = []
        for size in sorted(by_size):
            found = by_size[size]
            missing = [f"{p} at {shape} {dtype}" for (shape, dtype), f in found.items() for p in plugins if p not in f]
            timed = [p for p in plugins if all(f[p].times_us and not f[p].error for f in found.values() if p in f)]
            if missing:
                left_out.append(f"{where}: {size} elements: no row of {', '.join(missing)}")
            elif not timed:
                left_out.append(f"{where}: {size} elements: the rows of every plugin failed")
            else:
                measured = [Measured(shape, dtype, size, {p: r.median_us for p, r in f.items() if p in timed})
                            for (shape, dtype), f in found.items()]
                winners.append((size, _winner(measured, timed, margin), measured))
        if winners:
            entries.append({"op": op_name, "dispatch_key": key, "buckets": _buckets(winners)})
        elif by_size:
            left_out.append(f"{where}: no size decided, so the file has no entry for it")
    return Decision(entries, left_out)


def _winner(measured: list[Measured], plugins: list[str], margin: float) -> str:
    """The incumbent (the first of `plugins`), unless another is faster by more than
    `margin` in the geometric mean of its time ratios over `measured`. In logarithms: a
    ratio of two finite times can overflow (1e300 µs / 1e-300 µs)."""
    incumbent = plugins[0]

    def log_ratio(p):  # < 0: faster than the incumbent
        return sum(math.log(m.median_us[p]) - math.log(m.median_us[incumbent]) for m in measured) / len(measured)

    best = min(plugins, key=log_ratio)
    return best if log_ratio(best) < math.log1p(-margin) else incumbent


def _buckets(winners) -> list[dict]:
    buckets = []
    for size, plugin, measured in winners:
        figures = [{"preset": m.preset, "dtype": m.dtype, "elements": m.elements,
                    "median_us": {p: round(t, 3) for p, t in sorted(m.median_us.items())}} for m in measured]
        if buckets and buckets[-1]["plugin"] == plugin:
            buckets[-1]["up_to"] = size
            buckets[-1]["measured"] += figures
        else:
            buckets.append({"up_to": size, "plugin": plugin, "measured": figures})
    del buckets[-1]["up_to"]  # the last range takes every larger call
    return buckets


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="backplane tune", description=__doc__.split("\n\n")[0])
    p.add_argument("--backends", default=os.environ.get("BACKPLANE_BACKENDS") or "",
                   help="the plugins to choose among, in their load order (the first serving an op is its incumbent)")
    p.add_argument("--ops", default="")
    p.add_argument("--shapes", default="all", help="registry bench presets by name, or all (the default)")
    p.add_argument("--dtypes", default="float32")
    p.add_argument("--margin", type=float, default=5.0,
                   help="percent faster another plugin must be to take a size from the incumbent (default 5)")
    p.add_argument("--min-time", type=float, help="least seconds each row samples (the engine's default 0.05)")
    p.add_argument("--max-time", type=float, help="most seconds each row samples (the engine's default 0.5)")
    p.add_argument("--cuda-graph", action="store_true", help="time cuda rows as CUDA graph replays")
    p.add_argument("--json", help="also keep the engine's JSON here")
    p.add_argument("--from-json", metavar="FILE",
                   help="decide from this earlier run's engine JSON (tune --json, bench --json) instead of "
                        "timing; --ops, --shapes, --dtypes, --json and the timing flags then do not apply")
    p.add_argument("--out", default="backplane_selection.yaml", help="the selection file to write")
    return p


def _figures(args, backends: list[str]) -> dict:
    """The engine's JSON to decide from: an earlier run's (--from-json), else a run now."""
    from .. import bench  # looked up when called: tests stand in for bench.run

    if args.from_json:
        try:
            return bench.load(args.from_json)
        except (OSError, ValueError) as e:
            raise ValueError(f"--from-json: expected the benchmark engine's JSON, found: {e}") from e
    extra = [f"--min-time={args.min_time}"] if args.min_time else []
    extra += [f"--max-time={args.max_time}"] if args.max_time else []
    return bench.run(backends, args.ops, args.dtypes, args.shapes, 1, args.json, quiet=True, extra=extra,
                     cuda_graph=args.cuda_graph)


def made_by(argv, context: dict) -> dict:
    """The file's made_by: the command (its arguments as given, file names in any
    encoding), when, and the machine and torch of the figures."""
    return {"command": " ".join(["backplane", "tune", *(argv if argv is not None else sys.argv[1:])]),
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "machine": context.get("cpu_model") or context.get("host_name") or "",
            "torch": context.get("torch_version") or ""}


def _say_left_out(left_out: list[str]) -> None:
    for note in left_out:
        print(f"backplane tune: not decided: {text_of(note)}", file=sys.stderr)
    if left_out:
        print("backplane tune: a call of a size not decided takes the range that covers it (the next larger size "
              "decided; the last range takes every larger call); time those sizes again (--shapes) to decide "
              "them", file=sys.stderr)


def main(argv=None) -> int:
    """Exit 0; 2: bad flags, a backend list of fewer than two, an --out that cannot be
    written (said before any timing) or whose file the core refuses, a --from-json file
    that is not the engine's JSON, or an engine that failed. The file --out names is
    replaced whole, or left as it was."""
    args = parser().parse_args(argv)
    try:
        backends = [] if not args.backends else core().backend_names(args.backends, "--backends")
    except backplane.BackendNameError as e:
        print(f"backplane tune: {e}", file=sys.stderr)
        return 2
    if len(backends) < 2 or "none" in backends:
        print(f"backplane tune: --backends: expected two or more plugins to choose among, found "
              f"'{text_of(args.backends)}'", file=sys.stderr)
        return 2
    if not 0 <= args.margin < 100:
        print(f"backplane tune: --margin: expected a percentage from 0 to 100, found {args.margin}", file=sys.stderr)
        return 2
    try:
        selection_file.check_out(args.out, {"--json": args.json, "--from-json": args.from_json})
        results = _figures(args, backends)
        with warnings.catch_warnings():  # "two plugins serve add": the very thing being decided
            warnings.simplefilter("ignore")
            for b in backends:
                backplane.load(b)  # after the engine ran: its own plugins' ops are then known here too
        decision = decide(results, backplane.ops(), backends, args.margin / 100)
        text = selection_yaml(decision.entries, made_by(argv, results.get("context", {})), decision.left_out)
        selection_file.write(args.out, text)
    except (OSError, ValueError, RuntimeError, backplane.BackendError) as e:
        print(f"backplane tune: {e}", file=sys.stderr)
        return 2
    for e in decision.entries:
        ranges = ", ".join((f"up to {b['up_to']}: " if "up_to" in b else "larger: " if i else "every size: ") +
                           b["plugin"] for i, b in enumerate(e["buckets"]))
        print(f"{e['op']:16} {e['dispatch_key']:12} {ranges}")
    _say_left_out(decision.left_out)
    if not decision.entries and not decision.left_out:
        print(f"no op is served by two of {', '.join(backends)} on one device: nothing to choose", file=sys.stderr)
    print(f"wrote {text_of(args.out)}")
    return 0
