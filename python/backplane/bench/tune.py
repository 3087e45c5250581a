"""`backplane tune`: which plugin (or Inductor's own code) should serve each op, by call size
and dtype, decided by measurement in the mode the deployment runs.

    backplane tune --backends cuda,cuda_alt [--mode eager|graph|compile] [--ops add,mul]
                   [--shapes all|NAME,...] [--dtypes float32,bfloat16] [--repetitions N]
                   [--margin 5] [--alpha 0.05] [--out selection.yaml]
    backplane tune --backends cuda --mode compile ...          # cuda against inductor
    backplane tune --backends cuda,triton ...                  # a plugin of kind triton beside cuda
    backplane tune --backends cuda,cuda_alt --from-json run.json [--margin 5] [--out ...]

Modes (--mode, default eager):
- eager: the benchmark engine times each plugin's kernel as eager calls (the engine holds a
  preference for the plugin whose row it times). Needs two or more plugins.
- graph: the engine's CUDA-graph replays (`--cuda-graph` is its alias). The engine graphs
  cuda rows only: an op on CPU is timed as eager calls, its entry says `mode: eager`, and
  a note says so. Needs two or more plugins.
- compile: each candidate compiled between a producer and a consumer elementwise op, so
  fusion counts (tune_compile.py); the candidates are the named plugins serving the op and
  `inductor` (Inductor's code for the registry reference). One plugin is enough;
  `--cuda-graph` then replays the compiled step from a CUDA graph on cuda.
A plugin of kind triton (Python launchers) among --backends (tune_triton.py): in eager and
graph modes the engine times the library backends and bench's triton step (triton_rows.py)
the triton plugin's rows after it, in this process, with the same stop rule and
repetitions; the decision reads both alike. It needs a library backend on its device
(refused otherwise, as bench refuses it), except in compile mode, where it is a candidate
as any plugin is.
Every candidate is timed --repetitions times (default 3 for eager and graph, 5 for
compile; a compile-mode repetition samples at most 0.1 s unless --max-time) over the registry's bench presets (`--shapes`: all by default). `--from-json`
decides from an earlier run's engine JSON (`tune --json`, `bench --json`) instead of
timing: another margin, or figures taken on the machine that will serve; the mode is then
the figures' (graph for rows timed as CUDA graph replays).

How a range is decided (tune_decision.py): per op, dispatch key and dtype, the incumbent
(the plugin serving without a file: the first of --backends offering the op) keeps a size
unless another candidate is faster by more than --margin percent (default 5; geometric
mean over the size's presets) and a one-sided Mann-Whitney U test of the repetitions says
so at p < --alpha (default 0.05): a near-tie keeps the incumbent. Below 3 repetitions no
test can be made: the margin alone decides, and the file says so in a comment. Where every
dtype has the same ranges, one entry serves them all; where they differ, one entry per
dtype (`dtype:`). A row that failed disqualifies its candidate at that size; a size
without a row of every candidate is left out and said (stderr, and comments in the file).

The file (selection_file.py) records `environment:` (backplane.selection_environment:
torch, devices, each plugin's version and hash) and each entry's `mode:`; it is written
beside --out, read back by the core, then renamed over it: a failure leaves the old one as
it was. --out is checked before any timing. In a distributed job every rank times, rank
0's figures decide, and every rank writes and applies rank 0's file (tune_ranks.py).
"""
from __future__ import annotations

import argparse
import datetime
import importlib
import os
import sys
import warnings

import backplane

from .._native import core
from . import selection_file, tune_ranks, tune_triton
from .selection_file import selection_yaml, text_of
from .triton_rows import add_triton_rows, split_backends
# Measured, dispatch_keys and preset_sizes: tune's names before tune_decision.py held them.
from .tune_decision import (Decision, Measured, cells_from_run, decide_cells, dispatch_keys,  # noqa: F401
                            preset_sizes)

MODES = ("eager", "graph", "compile")
_DEFAULT_REPETITIONS = {"eager": 3, "graph": 3, "compile": 5}
# Compile mode's most seconds a repetition samples, unless --max-time: five repetitions of
# the engine's 0.5 s made a default run over every op take 145 s on an H200 (102 s of it
# timing launch-bound steps that never reached the 2% spread); the U test over the five
# repetitions is what judges a lead, not one repetition's length.
_COMPILE_MAX_SECONDS = 0.1


def decide(results: dict, ops, backends: list[str], margin: float = 0.05, alpha: float = 0.05) -> Decision:
    """The selection file's `ops` entries for an engine run's rows of `backends`, the sizes
    left out and the notes (tune_decision.py states the rule). `ops`: backplane.ops() rows
    (the registry's presets); `margin`: 0.05 = 5%; `alpha`: the U test's level."""
    cells, left_out = cells_from_run(results, ops, backends)
    decision = decide_cells(cells, ops, margin, alpha)
    return Decision(decision.entries, left_out + decision.left_out, decision.notes)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="backplane tune", description=__doc__.split("\n\n")[0])
    p.add_argument("--backends", default=os.environ.get("BACKPLANE_BACKENDS") or "",
                   help="the plugins to choose among, in their load order (the first serving an op is its incumbent); "
                        "a triton plugin needs a library backend on its device beside it, except in compile mode")
    p.add_argument("--mode", choices=MODES,
                   help="how candidates are timed: eager calls (the default), CUDA-graph replays, or compiled")
    p.add_argument("--ops", default="")
    p.add_argument("--shapes", default="all", help="registry bench presets by name, or all (the default)")
    p.add_argument("--dtypes", default="float32")
    p.add_argument("--repetitions", type=int,
                   help="timed runs of each candidate (default 3; 5 in compile mode); 3 or more allow the U test")
    p.add_argument("--margin", type=float, default=5.0,
                   help="percent faster another plugin must be to take a size from the incumbent (default 5)")
    p.add_argument("--alpha", type=float, default=0.05,
                   help="the one-sided U test's level another plugin's lead must reach (default 0.05)")
    p.add_argument("--min-time", type=float, help="least seconds each row samples (the engine's default 0.05)")
    p.add_argument("--max-time", type=float,
                   help="most seconds each row samples (the engine's default 0.5; 0.1 in compile mode)")
    p.add_argument("--cuda-graph", action="store_true",
                   help="alias of --mode graph; with --mode compile, replay the compiled step from a CUDA graph")
    p.add_argument("--json", help="also keep the engine's JSON here (eager and graph modes)")
    p.add_argument("--from-json", metavar="FILE",
                   help="decide from this earlier run's engine JSON (tune --json, bench --json) instead of "
                        "timing; --mode, --ops, --shapes, --dtypes, --repetitions, --json and the timing flags "
                        "then do not apply")
    p.add_argument("--out", default="backplane_selection.yaml", help="the selection file to write")
    return p


class UsageError(ValueError):
    """Flags that contradict each other or are out of range; the message names them."""


def resolve_mode(args) -> tuple[str, bool]:
    """(mode, cuda_graph): --cuda-graph alone is --mode graph; with --mode compile it graphs
    the compiled step; with --mode eager it contradicts it."""
    mode = args.mode or ("graph" if args.cuda_graph else "eager")
    if mode == "eager" and args.cuda_graph:
        raise UsageError("--cuda-graph: times CUDA graph replays, which is --mode graph; found --mode eager")
    if mode == "compile" and (args.from_json or args.json):
        flag = "--from-json" if args.from_json else "--json"
        raise UsageError(f"{flag}: expected the engine's rows (--mode eager or graph); compile mode times "
                         "compiled steps in this process and keeps no engine JSON")
    return mode, mode == "graph" or args.cuda_graph


def _checked(args, mode: str) -> list[str]:
    """The plugins of --backends, after every flag is checked (UsageError)."""
    try:
        backends = [] if not args.backends else core().backend_names(args.backends, "--backends")
    except backplane.BackendNameError as e:
        raise UsageError(str(e)) from None
    refused = tune_triton.refusal(backends, text_of(args.backends), mode, timing=not args.from_json)
    if refused:
        raise UsageError(refused)
    least = 1 if mode == "compile" else 2
    if len(backends) < least or "none" in backends:
        wanted = ("one or more plugins (compile mode also times inductor)" if least == 1
                  else "two or more plugins to choose among")
        raise UsageError(f"--backends: expected {wanted}, found '{text_of(args.backends)}'")
    if not 0 <= args.margin < 100:
        raise UsageError(f"--margin: expected a percentage from 0 to 100, found {args.margin}")
    if not 0 < args.alpha <= 1:
        raise UsageError(f"--alpha: expected a significance level above 0 and at most 1, found {args.alpha}")
    if args.repetitions is not None and args.repetitions < 1:
        raise UsageError(f"--repetitions: expected 1 or more, found {args.repetitions}")
    return backends


def _figures(args, backends: list[str], cuda_graph: bool, repetitions: int) -> dict:
    """The engine's JSON to decide from: an earlier run's (--from-json), else a run now."""
    from .. import bench  # looked up when called: tests stand in for bench.run

    if args.from_json:
        try:
            return bench.load(args.from_json)
        except (OSError, ValueError) as e:
            raise ValueError(f"--from-json: expected the benchmark engine's JSON, found: {e}") from e
    extra = [f"--min-time={args.min_time}"] if args.min_time else []
    extra += [f"--max-time={args.max_time}"] if args.max_time else []
    library, tritons = split_backends(backends)
    # In a job, rank 0's figures decide, and only rank 0 keeps them: ranks sharing a
    # file system would otherwise write one --json file at once.
    kept = args.json if tune_ranks.rank() == 0 else None
    with tune_ranks.engine_on_this_ranks_gpu():
        results = bench.run(library, args.ops, args.dtypes, args.shapes, repetitions, kept, quiet=True,
                            extra=extra, cuda_graph=cuda_graph)
    if tritons:  # timed here, after the engine, as its reference rows were (tune_triton.py)
        with warnings.catch_warnings():  # "add on CPU is offered by 'cpu', 'triton'": each row prefers its plugin
            warnings.filterwarnings("ignore", message=r"backplane: .* is offered by ")
            add_triton_rows(results, tritons, args.min_time, args.max_time, kept)
    return results


def _load(backends: list[str]) -> None:
    with warnings.catch_warnings():  # "two plugins serve add": the very thing being decided
        warnings.simplefilter("ignore")
        for b in backends:
            backplane.load(b)


def _compiled_decision(args, backends: list[str], cuda_graph: bool, repetitions: int) -> tuple[Decision, dict]:
    """Compile mode: the candidates timed here (tune_compile.py), decided."""
    from . import tune_compile

    _load(backends)
    loaded = {b.name: b.dispatch_key for b in backplane.backends() if b.status == "loaded"}
    plugins = {b: loaded[b] for b in backends if b in loaded}
    ops = backplane.ops()
    wanted = [o for o in args.ops.split(",") if o] if args.ops else []
    unknown = [o for o in wanted if o not in {op.name for op in ops}]
    if unknown:
        raise ValueError(f"--ops: no op named {', '.join(unknown)} in this registry")
    chosen = [op for op in ops if not wanted or op.name in wanted]
    other_keys = sorted({k for k in plugins.values() if k not in tune_compile.DEVICES})
    cells = tune_compile.measure(chosen, plugins, args.dtypes.split(","), args.shapes,
                                 _compile_stop_rule(args.min_time, args.max_time), repetitions, cuda_graph,
                                 progress=tune_compile.print_progress)
    decision = decide_cells(cells, ops, args.margin / 100, args.alpha)
    notes = [f"--mode compile times on cpu and cuda only: the ops of key {k} were not timed" for k in other_keys]
    notes += [f"{op.name}: no bench preset of it is among --shapes {args.shapes}, so it was not timed"
              for op in chosen if wanted and not tune_compile.presets_of(op, args.shapes)]
    context = {"torch_version": __import__("torch").__version__, "host_name": os.uname().nodename}
    return Decision(decision.entries, decision.left_out, (*decision.notes, *notes)), context


def _compile_stop_rule(min_time: float | None, max_time: float | None):
    """Compile mode's stop rule: the engine's, at most _COMPILE_MAX_SECONDS a repetition
    (at least --min-time) unless --max-time says otherwise."""
    from .timing import stop_rule

    if max_time is None:
        max_time = max(_COMPILE_MAX_SECONDS, min_time or 0.0)
    return stop_rule(min_time, max_time)


def environment(entries: list[dict]) -> dict | None:
    """This process's `environment:` (backplane.selection_environment.current()), its
    plugins those the file's buckets name (never inductor) and its devices those of the
    entries' device types; None where this build has no selection_environment (said)."""
    try:
        module = importlib.import_module("backplane.selection_environment")
    except ImportError:
        print("backplane tune: backplane.selection_environment is not in this build: the file records no "
              "environment", file=sys.stderr)
        return None
    named = {b["plugin"] for e in entries for b in e["buckets"]} - {"inductor"}
    found = dict(module.current(plugins=sorted(named)))
    types = {e["dispatch_key"].lower() for e in entries}
    if "plugins" in found:
        found["plugins"] = [p for p in found["plugins"] if p.get("name") in named]
    if "devices" in found:
        found["devices"] = [d for d in found["devices"] if d.get("type") in types]
    return found


def made_by(argv, context: dict) -> dict:
    """The file's made_by: the command (its arguments as given, file names in any
    encoding), when, and the machine and torch of the figures."""
    return {"command": " ".join(["backplane", "tune", *(argv if argv is not None else sys.argv[1:])]),
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "machine": context.get("cpu_model") or context.get("host_name") or "",
            "torch": context.get("torch_version") or ""}


def _say_left_out(left_out: list[str], notes=()) -> None:
    for note in left_out:
        print(f"backplane tune: not decided: {text_of(note)}", file=sys.stderr)
    if left_out:
        print("backplane tune: a call of a size not decided takes the range that covers it (the next larger size "
              "decided; the last range takes every larger call); time those sizes again (--shapes) to decide "
              "them", file=sys.stderr)
    for note in notes:
        print(f"backplane tune: note: {text_of(note)}", file=sys.stderr)


def _graph_notes(entries: list[dict], mode: str) -> list[str]:
    """Graph mode's entries the engine timed as eager calls (it graphs cuda rows only)."""
    if mode != "graph":
        return []
    return [f"{e['op']} on {e['dispatch_key']}: --mode graph times cuda rows only; timed as eager calls "
            "(mode: eager)" for e in entries if e.get("mode") == "eager"]


def _selection_text(args, argv, backends: list[str], mode: str, cuda_graph: bool) -> tuple[str, Decision]:
    """The file's text and the decision it writes, timed (or read) and decided here."""
    selection_file.check_out(args.out, {"--json": args.json, "--from-json": args.from_json})
    repetitions = args.repetitions or _DEFAULT_REPETITIONS[mode]
    if mode == "compile":
        decision, context = _compiled_decision(args, backends, cuda_graph, repetitions)
    else:
        results = _figures(args, backends, cuda_graph, repetitions)
        context = results.get("context", {})
        _load(backends)  # after the engine ran: its own plugins' ops are then known here too
        decision = decide(results, backplane.ops(), backends, args.margin / 100, args.alpha)
        decision = decision._replace(notes=(*decision.notes, *_graph_notes(decision.entries, mode)))
    text = selection_yaml(decision.entries, made_by(argv, context), decision.left_out, decision.notes,
                          environment(decision.entries))
    return text, decision


def main(argv=None) -> int:
    """Exit 0; 2: bad flags, a backend list too short for the mode (two plugins; one in
    compile mode), a triton plugin that cannot serve here or (eager, graph) has no library
    backend on its device in the list, an --out that cannot be written (said before any
    timing) or whose file the core refuses, a --from-json file that is not the engine's
    JSON, an engine that failed, or (in a distributed job) a rank that failed. The file
    --out names is replaced whole, or left as it was."""
    args = parser().parse_args(argv)
    try:
        mode, cuda_graph = resolve_mode(args)
        backends = _checked(args, mode)
    except UsageError as e:
        print(f"backplane tune: {e}", file=sys.stderr)
        return 2
    text, decision, failure = None, None, None
    try:
        text, decision = _selection_text(args, argv, backends, mode, cuda_graph)
    except (OSError, ValueError, RuntimeError, backplane.BackendError) as e:
        failure = str(e) or type(e).__name__
    try:
        text = tune_ranks.rank0_text(text, failure)  # alone: the text, or the failure raised
        selection_file.write(args.out, text)
        if tune_ranks.job():  # every rank applies rank 0's file; apply_selection compares it across ranks
            backplane.apply_selection(args.out)
    except (OSError, ValueError, RuntimeError, backplane.BackendError) as e:
        print(f"backplane tune: {e}", file=sys.stderr)
        return 2
    if tune_ranks.rank() == 0:
        _report(decision, backends, args.out)
    return 0


def _report(decision: Decision, backends: list[str], out) -> None:
    for e in decision.entries:
        ranges = ", ".join((f"up to {b['up_to']}: " if "up_to" in b else "larger: " if i else "every size: ") +
                           b["plugin"] for i, b in enumerate(e["buckets"]))
        what = f"{e['op']} {e['dtype']}" if e.get("dtype") else e["op"]
        print(f"{what:16} {e['dispatch_key']:12} {ranges}")
    _say_left_out(decision.left_out, decision.notes)
    if not decision.entries and not decision.left_out:
        print(f"no op has two candidates among {', '.join(backends)} on one device: nothing to choose",
              file=sys.stderr)
    print(f"wrote {text_of(out)}")
