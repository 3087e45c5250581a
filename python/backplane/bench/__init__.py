"""`backplane bench` from Python: runs the benchmark engine (backplane_bench, Google
Benchmark), and reads, compares and plots its JSON.

    import backplane.bench as bench
    results = bench.run(backends="cpu,npu", ops="add,rms_norm")   # each op's first preset
    results = bench.run(backends="cpu", shapes="all", repetitions=5)  # the full sweep
    results = bench.run(backends="cuda", cuda_graph=True)   # kernel time, without launches
    results = bench.run(backends="cpu", backward=True)   # forward+backward of each op with a backward:
    results = bench.run(backends="cuda", cold_l2=True)   # cuda samples after an L2 flush
    results["benchmarks"] += bench.compiled_rows(results)  # torch.compile of each reference, timed alike
    results["benchmarks"] += bench.selected_rows(results)  # the op itself under torch.compile (--mode compile)
    for row in bench.rows(results): print(row)
    bench.compare(bench.load("base.json"), results)      # Mann-Whitney U per row
    bench.plot(results, "bench.png")

Rows come from the registry (each op's `bench` presets), so a new op, a vendor op or an
out-of-tree plugin is benchmarked with no code. Every backplane row is checked against
the op's reference before it is timed; a wrong kernel is reported (`error`), not timed.
Google Benchmark's JSON is the interchange format: `--benchmark_out` files of
backplane_bench and files written here are the same thing; results.py is its one reader.
The method, and the current figures: bench/results/.

One owner each: the engine (bench/) times every registry row and owns the stop rule and
the noise verdict, which this package asks through native.py rather than deciding again;
timing.py is the one Python timer (torch.compile rows, host cost, experiments/); the
engine's console table is its own (a C++-only install prints it), and tables.py writes the
views of runs the engine did not print (--input, merged, with compiled rows, markdown).
`backplane tune` is tune.py with selection_file.py.
"""
from __future__ import annotations

import subprocess  # noqa: F401  (the engine's launcher: tests stand in for subprocess.run)
import sys

from .chart import plot
from .cli import comparison_asked, parser, refuse_before_running
from .comparison import compare, format_comparison, mann_whitney_p
from .compiled import add_compiled_rows, compiled_rows, selected_rows, wanted_by_default
from .engine import engine, run
from .noise import noise_warnings, noisy_copy_groups
from .results import CallCost, Row, call_costs, check_run, load, machine, merge, mode_of, peak_flops, rows
from .tables import call_cost_table, compile_reading, format_table, markdown, percent_of_peak, side_by_side, table
from .triton_rows import add_triton_rows, split_backends, triton_only

__all__ = ["CallCost", "Row", "call_cost_table", "call_costs", "check_run", "compare", "compile_reading",
           "compiled_rows", "engine", "format_comparison", "format_table", "load", "machine", "main",
           "mann_whitney_p", "markdown", "merge", "mode_of", "noise_warnings", "noisy_copy_groups", "peak_flops",
           "percent_of_peak", "plot", "rows", "run", "selected_rows", "side_by_side", "table"]


def main(argv=None) -> int:
    """Exit 0; 1: a significant regression; 2: a usage error, a file that cannot be read or
    written, or an engine that refused or failed (with the reason on stderr)."""
    args = parser(__doc__.split("\n\n")[0]).parse_args(argv)
    try:
        refuse_before_running(args)
        # The baseline is read before the run: a bad one fails before minutes of timing.
        base = load(args.compare) if args.compare else None
        if args.input:
            results = load(args.input[0]) if len(args.input) == 1 else merge({f: load(f) for f in args.input})
        else:
            extra = [f"--min-time={args.min_time}"] if args.min_time else []
            extra += [f"--max-time={args.max_time}"] if args.max_time else []
            if args.interleave:
                extra.append("--benchmark_enable_random_interleaving=true")
            # RuntimeError: the engine refused (its reason is on stderr already) or failed
            repetitions = args.repetitions or (5 if args.compare or args.compare_backends else 1)
            # Plugins of kind triton load only in Python: the engine times the library backends,
            # triton_rows.py the triton ones after it, beside the engine's reference rows.
            library, tritons = split_backends(args.backends)
            if tritons and not library:
                raise ValueError(triton_only(args.backends, tritons))
            results = run(library, args.ops, args.dtypes, args.shapes, repetitions, args.json,
                          quiet=True, extra=extra, cuda_graph=args.cuda_graph, backward=args.backward,
                          cold_l2=args.cold_l2)
            if tritons:
                add_triton_rows(results, tritons, args.min_time, args.max_time, args.json)
            # --mode compile: the selected rows, and the compiled references beside them unless --no-compile.
            # Without --compile otherwise: where a backend runs on cuda, for cuda's rows (a CPU compile is slow)
            selected = args.mode == "compile"
            reference = args.compile or (args.compile is None and (selected or wanted_by_default(results)))
            if reference or selected:
                add_compiled_rows(results, args.min_time, args.max_time, args.json,
                                  device_types=None if args.compile or selected else ("cuda",),
                                  selected=selected, reference=bool(reference))
    except (OSError, ValueError, RuntimeError) as e:
        print(f"backplane bench: {e}", file=sys.stderr)
        return 2
    # A run: the command that measured it (without the view flags). Runs read back with
    # --input: the command that makes this very table, flags and all.
    given = argv if argv is not None else sys.argv[1:]
    shown = " ".join(a for a in ["backplane", "bench", *given]
                     if args.input or a not in ("--markdown", "--side-by-side"))
    if args.side_by_side:
        print(side_by_side(results, shown))
    elif args.markdown:
        print(markdown(results, shown))
    else:
        print(format_table(results))
        reading = compile_reading(results, args.threshold / 100)
        if reading:
            print(reading)
    status = 0
    if args.compare or args.compare_backends:
        try:
            comparisons = comparison_asked(args, base, results)
        except ValueError as e:
            print(f"backplane bench: {e}", file=sys.stderr)
            return 2
        print()
        print(format_comparison(comparisons))
        if any(c["p"] is None for c in comparisons):
            print("\np n/a: fewer than 3 repetitions of the row in a run, too few for the U test (never a "
                  "regression); time both runs with --repetitions 5")
        if any(c["regressed"] for c in comparisons):
            print(f"\nregression: at least one row is more than {args.threshold}% slower with p < 0.05")
            status = 1
    if args.plot:
        try:
            plot(results, args.plot)
        except (OSError, ValueError) as e:
            print(f"backplane bench: --plot {args.plot}: {e}", file=sys.stderr)
            return 2
        print(f"\nwrote {args.plot}")
    return status
