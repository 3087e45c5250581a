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
  presets go with the smaller: measure more presets (--shapes) where that matters.
- A row that failed (a kernel refused as wrong) disqualifies its plugin at that size.
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

import backplane

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


def decide(results: dict, ops, backends: list[str], margin: float = 0.05) -> list[dict]:
    """The selection file's `ops` entries for this run: [{op, dispatch_key, buckets: [{up_to?,
    plugin, measured}]}] for every op two or more of `backends` were timed for on one key.
    `ops`: backplane.ops() rows (the registry's presets); `margin`: 0.05 = 5%."""
    from .bench import rows

    keys = dispatch_keys(results)
    by_name = {op.name: op for op in ops}
    times: dict = defaultdict(dict)  # (op, key) -> {(shape, dtype): {backend: µs}}
    failed: dict = defaultdict(set)  # (op, key) -> {(shape, backend)}
    for r in rows(results):
        if r.impl != "backplane" or r.backend not in keys or r.op not in by_name:
            continue
        where = (r.op, keys[r.backend])
        if r.error or not r.times_us:
            failed[where].add((r.shape, r.backend))
        else:
            times[where].setdefault((r.shape, r.dtype), {})[r.backend] = r.median_us
    entries = []
    for (op_name, key), cells in sorted(times.items()):
        # A plugin whose rows all failed still counts: the file then says the other serves.
        plugins = [b for b in backends if any(b in t for t in cells.values()) or
                   any(b == failed_backend for _, failed_backend in failed[(op_name, key)])]
        if len(plugins) < 2:
            continue
        sizes = preset_sizes(by_name[op_name])
        by_size: dict = defaultdict(list)
        for (shape, dtype), t in cells.items():
            by_size[sizes.get(shape, 0)].append(Measured(shape, dtype, sizes.get(shape, 0), t))
        winners = []
        for size in sorted(by_size):
            disqualified = {b for s, b in failed[(op_name, key)] if sizes.get(s) == size}
            winners.append((size, _winner(by_size[size], plugins, disqualified, margin), by_size[size]))
        entries.append({"op": op_name, "dispatch_key": key, "buckets": _buckets(winners)})
    return entries


def _winner(measured: list[Measured], plugins: list[str], disqualified: set, margin: float) -> str:
    """The incumbent (first of `plugins` timed everywhere here), unless another is faster
    by more than `margin` in the geometric mean of its time ratios over `measured`."""
    complete = [p for p in plugins if p not in disqualified and all(p in m.median_us for m in measured)]
    if not complete:
        return plugins[0]
    incumbent = complete[0]

    def ratio(p):  # < 1: faster than the incumbent
        return math.exp(sum(math.log(m.median_us[p] / m.median_us[incumbent]) for m in measured) / len(measured))

    best = min(complete, key=ratio)
    return best if ratio(best) < 1 - margin else incumbent


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


def selection_yaml(entries: list[dict], made_by: dict) -> str:
    """The selection file's text. Written by hand, not by a YAML library: every value is a
    name, a number or a quoted string, and the layout stays the one people read."""
    def q(text) -> str:
        return '"' + str(text).replace("\\", "\\\\").replace('"', '\\"') + '"'

    lines = ["# Which plugin serves each op, by the element count of the call's largest Tensor argument.",
             "# Written by `backplane tune`; apply with backplane.load(..., selection=FILE), BACKPLANE_SELECTION=FILE",
             "# or `backplane --selection FILE`. The format: core/include/backplane/selection_file.h.",
             "backplane_selection: 1",
             "made_by: {" + ", ".join(f"{k}: {q(v)}" for k, v in made_by.items()) + "}",
             "ops:" if entries else "ops: []"]
    for e in entries:
        lines += [f"  - op: {q(e['op'])}", f"    dispatch_key: {e['dispatch_key']}", "    buckets:"]
        for b in e["buckets"]:
            head = f"up_to: {b['up_to']}, " if "up_to" in b else ""
            lines.append(f"      - {{{head}plugin: {b['plugin']}, measured: [")
            for m in b["measured"]:
                times = ", ".join(f"{p}: {t}" for p, t in m["median_us"].items())
                lines.append(f"          {{preset: {q(m['preset'])}, dtype: {m['dtype']}, elements: {m['elements']}, "
                             f"median_us: {{{times}}}}},")
            lines.append("        ]}")
    return "\n".join(lines) + "\n"


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
    from . import bench

    if args.from_json:
        try:
            return bench.load(args.from_json)
        except (OSError, ValueError) as e:
            raise ValueError(f"--from-json: expected the benchmark engine's JSON, found: {e}") from e
    extra = [f"--min-time={args.min_time}"] if args.min_time else []
    extra += [f"--max-time={args.max_time}"] if args.max_time else []
    return bench.run(backends, args.ops, args.dtypes, args.shapes, 1, args.json, quiet=True, extra=extra,
                     cuda_graph=args.cuda_graph)


def main(argv=None) -> int:
    """Exit 0; 2: bad flags, a backend list of fewer than two, a --from-json file that is not
    the engine's JSON, or an engine that failed."""
    args = parser().parse_args(argv)
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    if len(backends) < 2:
        print(f"backplane tune: --backends: expected two or more plugins to choose among, found "
              f"'{args.backends}'", file=sys.stderr)
        return 2
    if not 0 <= args.margin < 100:
        print(f"backplane tune: --margin: expected a percentage from 0 to 100, found {args.margin}", file=sys.stderr)
        return 2
    try:
        results = _figures(args, backends)
        with warnings.catch_warnings():  # "two plugins serve add": the very thing being decided
            warnings.simplefilter("ignore")
            for b in backends:
                backplane.load(b)  # after the engine ran: its own plugins' ops are then known here too
    except (OSError, ValueError, RuntimeError, backplane.BackendError) as e:
        print(f"backplane tune: {e}", file=sys.stderr)
        return 2
    entries = decide(results, backplane.ops(), backends, args.margin / 100)
    context = results.get("context", {})
    made_by = {"command": " ".join(["backplane", "tune", *(argv if argv is not None else sys.argv[1:])]),
               "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
               "machine": context.get("cpu_model") or context.get("host_name", ""),
               "torch": context.get("torch_version", "")}
    with open(args.out, "w") as f:
        f.write(selection_yaml(entries, made_by))
    for e in entries:
        ranges = ", ".join((f"up to {b['up_to']}: " if "up_to" in b else "larger: " if i else "every size: ") +
                           b["plugin"] for i, b in enumerate(e["buckets"]))
        print(f"{e['op']:16} {e['dispatch_key']:12} {ranges}")
    if not entries:
        print(f"no op is served by two of {', '.join(backends)} on one device: nothing to choose", file=sys.stderr)
    print(f"wrote {args.out}")
    return 0
