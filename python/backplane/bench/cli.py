"""`backplane bench`'s flags: their parser, the checks of each value, and what the flags
make impossible together, refused before any row is timed."""
from __future__ import annotations

import argparse
import math
import os
from pathlib import Path

from .comparison import compare
from .results import rows


_MAX_REPETITIONS = 1000  # as the engine's (bench_options.h)
_MAX_MIN_TIME = 3600.0   # seconds per repetition; more is a typo, not a plan


def _number(text: str, parse, valid, expected: str):
    """`text` parsed (int or float) where `valid` holds, else argparse's error naming what
    was expected and what was found."""
    try:
        value = parse(text)
    except ValueError:
        value = math.nan
    if not valid(value):
        raise argparse.ArgumentTypeError(f"expected {expected}, found '{text}'")
    return value


def _repetitions(text: str) -> int:
    """--repetitions: Google Benchmark aborts on a negative count and runs no row at 0."""
    return _number(text, int, lambda n: 1 <= n <= _MAX_REPETITIONS, f"a whole number from 1 to {_MAX_REPETITIONS}")


def _min_time(text: str) -> float:
    """--min-time, --max-time: inf (or 1e300) would time one row for ever."""
    return _number(text, float, lambda s: 0 < s <= _MAX_MIN_TIME,
                   f"seconds > 0 and at most {_MAX_MIN_TIME:g} such as 0.05")


def _threshold(text: str) -> float:
    return _number(text, float, lambda p: 0 <= p < math.inf, "a percentage >= 0 such as 5")


MODES = ("eager", "compile")


def _mode(text: str) -> str:
    """--mode: what the rows beside the engine's are timed in. CUDA graph replays are
    --cuda-graph's, which combines with either."""
    if text not in MODES:
        hint = " (CUDA graph replays: --cuda-graph)" if text == "graph" else ""
        raise argparse.ArgumentTypeError(f"expected one of {', '.join(MODES)}, found '{text}'{hint}")
    return text


def _backend_pair(text: str) -> tuple[str, str]:
    names = text.split(",")
    if len(names) != 2 or not all(names) or names[0] == names[1]:
        raise argparse.ArgumentTypeError(f"expected two different backends A,B such as cpu,npu, found '{text}'")
    return names[0], names[1]


def _same_file(a, b) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist yet
        return Path(a).resolve() == Path(b).resolve()


def refuse_before_running(args) -> None:
    """What the flags make impossible, refused (ValueError) before any row is timed."""
    if not args.input and args.json and args.compare and _same_file(args.json, args.compare):
        raise ValueError(f"--json {args.json} would overwrite the --compare baseline {args.compare}; "
                         "write this run to another file")
    if not args.input and args.compare_backends:
        from .._native import core  # the core's rule for backend lists, as the engine reads --backends
        selected = core().backend_names(args.backends, "--backends")
        missing = [b for b in args.compare_backends if b not in selected]
        if missing:
            raise ValueError(f"--compare-backends: {', '.join(missing)} not among --backends ({args.backends})")
    if args.input and args.compile:
        raise ValueError("--compile times torch.compile beside a run of the engine; with --input nothing is run")
    if args.input and args.mode == "compile":
        raise ValueError("--mode compile times torch.compile beside a run of the engine; with --input nothing is run")
    if args.input and args.cold_l2:
        raise ValueError("--cold-l2 changes how rows are timed; with --input nothing is run (the run's context "
                         "\"cache\" says how its rows were)")
    if args.plot:
        try:
            import matplotlib  # noqa: F401
        except ImportError as e:
            raise ValueError(f"--plot needs matplotlib ({e})") from e


def _timed_rows(results: dict) -> int:
    return sum(1 for r in rows(results) if r.times_us and not r.error)


def comparison_asked(args, base, results) -> list[dict]:
    """The comparison the flags ask for; ValueError where it has no row (a baseline of
    other ops or backends, a backend that did not run), rather than an empty table."""
    if args.compare:
        lines = compare(base, results, args.threshold / 100)
        if not lines:
            raise ValueError(f"--compare {args.compare}: no row is timed in both runs ({_timed_rows(base)} timed "
                             f"there, {_timed_rows(results)} in this run); compare runs of the same ops, presets, "
                             "dtypes and backends")
        return lines
    a, b = args.compare_backends
    ran = sorted({r.backend for r in rows(results) if r.times_us and not r.error})
    missing = [x for x in (a, b) if x not in ran]
    if missing:
        raise ValueError(f"--compare-backends: this run has no timed row on {', '.join(missing)}; "
                         f"its backends: {', '.join(ran) or 'none'}")
    lines = compare(results, results, args.threshold / 100, base_backend=a, new_backend=b)
    if not lines:
        raise ValueError(f"--compare-backends: no row is timed on both {a} and {b}")
    return lines


def parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="backplane bench", description=description)
    p.add_argument("--backends", default=os.environ.get("BACKPLANE_BACKENDS") or "cpu")
    p.add_argument("--ops", default="")
    p.add_argument("--dtypes", default="float32,bfloat16")
    p.add_argument("--shapes", default="", help="registry bench presets by name, or all (default: each op's first)")
    p.add_argument("--repetitions", type=_repetitions,
                   help="repetitions of each row (default 1: one adaptive run, its samples' spread; 5 with "
                        "--compare or --compare-backends, whose U test needs at least 3)")
    p.add_argument("--min-time", type=_min_time, help="least seconds each row samples (default 0.05)")
    p.add_argument("--max-time", type=_min_time,
                   help="most seconds each row samples (default 0.5); in between a row stops once its samples' "
                        "spread is below 2%%")
    p.add_argument("--interleave", action="store_true",
                   help="run the repetitions of all rows in a random order (Google Benchmark's random "
                        "interleaving), so a drift of the machine's speed falls on every row alike")
    p.add_argument("--cuda-graph", action="store_true",
                   help="time cuda rows as replays of a CUDA graph of each batch of calls: the kernels' time "
                        "without the host's launch cost (ops shorter than a launch need it)")
    p.add_argument("--backward", action="store_true",
                   help="time forward+backward of each op with a backward: in the registry (gradients checked "
                        "against the baseline's first); ops without one are skipped")
    p.add_argument("--cold-l2", action="store_true",
                   help="cuda rows (the engine's and torch.compile's): each sample one call after an untimed write of "
                        "twice the device's L2 cache, so inputs smaller than L2 are read from memory as in a model "
                        "(nvbench's cold mode); no effect on cpu rows")
    p.add_argument("--mode", type=_mode, default="eager",
                   help="compile: also time, for each op and preset, the op itself under torch.compile as the "
                        "selection file in force serves it (rows 'selected', mode compile; implies --compile "
                        "unless --no-compile); eager (the default): the engine's rows alone")
    p.add_argument("--compile", action=argparse.BooleanOptionalAction, default=None,
                   help="after the engine, time torch.compile of each reference row's op on its device (the "
                        "'x compile' column; a CPU needs a C++ compiler for Inductor); default: on where a "
                        "selected backend runs on cuda")
    p.add_argument("--json", help="write Google Benchmark's JSON here")
    p.add_argument("--input", nargs="+", metavar="RUN.json",
                   help="read results from these JSON files instead of running (several: their backends side by side)")
    p.add_argument("--compare", metavar="BASE.json", help="compare against this earlier run (U test per row)")
    p.add_argument("--compare-backends", metavar="A,B", type=_backend_pair,
                   help="compare backend B against A within this run")
    p.add_argument("--threshold", type=_threshold, default=5.0, help="percent slower that counts as a regression")
    p.add_argument("--plot", metavar="FILE.png")
    p.add_argument("--markdown", action="store_true", help="print a markdown report (machine, torch, date, the command, the rows, the per-call "
                        "host cost) instead of the table")
    p.add_argument("--side-by-side", action="store_true",
                   help="markdown, one row per op, preset and dtype with a group of columns per backend")
    return p
