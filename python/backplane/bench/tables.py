"""A run as tables: one line per backplane row (`table`), printed plain (`format_table`:
the engine's console table, formatted by the engine's one formatter), as a markdown report (`markdown`: machine, torch, date, the command, the rows and the
per-call host cost) or with the backends of one workload side by side (`side_by_side`).
How to read them: bench/results/method.md."""
from __future__ import annotations

from .comparison import mann_whitney_p
from .native import console_table
from .results import (_UNITS, _error, _finite, call_costs, machine, mode_of, pass_of, peak_flops, repetitions, rows,
                      run_summary, shared_rows_owner)

# The rows a table has a line for: the backend's kernel (eager or CUDA graph replays), and the
# op as the selection in force serves it under torch.compile (`backplane bench --mode compile`).
LINE_IMPLS = ("backplane", "selected")


def table(results: dict) -> list[dict]:
    """Per op/backend/shape/dtype: a line for backplane's row and one for the selected row
    where the run timed it (impl, mode: eager, graph, compile, compile+graph), each with its
    median and spread, GB/s, fraction of copy_ and of the device's peak FLOP/s (where the
    op's FLOPs are known: pct_peak), and the ratio against the reference (> 1: faster than
    PyTorch), and against torch.compile's ("compiled" rows) where the run timed it, with the
    two-sided p of the U test on their repetitions (vs_compiled_p; None below 3 each). A
    backend that shares its device's reference and copy_ rows (timed once per device) is
    read against those, and against its device's peak."""
    by = {(r.op, r.backend, r.shape, r.dtype, r.impl): r for r in rows(results)}
    peaks = peak_flops(results)

    def device_row(op, backend, shape, dtype, impl):
        return by.get((op, backend, shape, dtype, impl)) or by.get(
            (op, shared_rows_owner(results, backend), shape, dtype, impl))

    lines = []
    for (op, backend, shape, dtype, impl), r in sorted(by.items()):
        if impl not in LINE_IMPLS:
            continue
        ref, copy = device_row(op, backend, shape, dtype, "reference"), device_row(op, backend, shape, dtype, "copy_")
        compiled = device_row(op, backend, shape, dtype, "compiled")
        peak = peaks.get((backend, dtype)) or peaks.get((shared_rows_owner(results, backend), dtype))
        lines.append({
            "op": op, "backend": backend, "plugin": r.plugin, "shape": shape, "dtype": dtype,
            "impl": impl, "mode": r.mode,
            "median_us": r.median_us, "spread": r.spread, "gbps": r.gbps, "error": r.error,
            "pct_copy": (r.gbps / copy.gbps) if r.gbps and copy and copy.gbps else None,
            "pct_peak": percent_of_peak(r.flops, r.median_us, peak),
            "vs_reference": (ref.median_us / r.median_us) if ref and ref.times_us and r.times_us else None,
            "reference_us": ref.median_us if ref and ref.times_us else None,
            "vs_compiled": (compiled.median_us / r.median_us) if compiled and compiled.times_us and r.times_us
            else None,
            "vs_compiled_p": mann_whitney_p(compiled.times_us, r.times_us) if compiled and r.times_us else None,
            # the fewer of the line's repetitions and its compiled row's
            "repetitions": min(len(r.times_us), len(compiled.times_us)) if compiled else len(r.times_us),
        })
    return lines


def percent_of_peak(flops_per_call, median_us, peak_flops_per_second):
    """The fraction (0.25: 25%) of the device's peak FLOP/s a row reaches: its FLOPs per
    call over its median time, over the peak; None where any of them is unknown."""
    if not flops_per_call or not peak_flops_per_second or not median_us or median_us != median_us:
        return None
    return flops_per_call / (median_us * 1e-6) / peak_flops_per_second


def peak_cell(fraction) -> str:
    """A %peak as the console table shows it (bench/console_table.cpp): whole percents from
    10%, else two significant digits (elementwise ops sit far below the peak); blank: "-"."""
    if fraction is None:
        return "-"
    percent = 100 * fraction
    if percent >= 10:
        return f"{percent:.0f}%"
    return f"{percent:.1f}%" if percent >= 1 else f"{percent:.2g}%"


def _cells(t: dict) -> tuple[str, str, str]:
    """GB/s, percent of copy_ and ratio against the reference of a table line, as shown."""
    gbps = f"{t['gbps']:.1f}" if t["gbps"] else "-"
    pct = f"{100 * t['pct_copy']:.0f}%" if t["pct_copy"] else "-"
    ratio = f"{t['vs_reference']:.2f}" if t["vs_reference"] else "-"
    return gbps, pct, ratio


def _backward(results: dict) -> bool:
    return pass_of(results) == "forward+backward"


def _bytes_counted(results: dict) -> str:
    """What a row's GB/s counts, as the footnotes say it."""
    if _backward(results):
        return ("the least forward+backward traffic: the forward reads each input once and writes each output, the "
                "backward reads the output gradient and what its registry formulas name and writes each input's "
                "gradient")
    return "bytes each input read once and each output written once"


def _seconds(entry: dict):
    """A timed repetition's seconds per call; None for a unit or time the reader would not take."""
    name, time = entry.get("time_unit", "us"), entry.get("real_time")
    unit = _UNITS.get(name) if isinstance(name, str) else None
    return time * unit * 1e-6 if unit and _finite(time) else None


def format_table(results: dict) -> str:
    """The console's table, from the engine's one formatter (bench/console_table.h, through
    native.py): the same text the engine prints at the end of a run, for runs read back,
    merged or with compiled rows added."""
    reps = [(f"{op}/{backend}/{impl}/{preset}", 0.0 if _error(e) else _seconds(e),
             e["bytes_per_second"] if _finite(e.get("bytes_per_second")) else None,
             e["spread"] if _finite(e.get("spread")) else None, _error(e),
             e["flops"] if _finite(e.get("flops")) else None, mode_of(e))
            for op, backend, impl, preset, e in repetitions(results) if _error(e) or _seconds(e) is not None]
    backends = {backend for _, backend, _, _, _ in repetitions(results)}
    shared = {b: shared_rows_owner(results, b) for b in sorted(backends)}
    return console_table(reps, shared, _backward(results), peak_flops(results)).rstrip("\n")


def _mode_cell(t: dict) -> str:
    """A line's mode as the tables show it: the selected row's says what was compiled."""
    return f"{t['mode']} (selected)" if t.get("impl") == "selected" else t["mode"]


def side_by_side(results: dict, command: str = "") -> str:
    """A markdown table with one row per op, preset, dtype and implementation (backplane's
    kernel; the selected one under torch.compile where the run timed it) and a group of
    columns per backend (µs, the mode it was timed in, % of that device's copy_, % of its
    peak FLOP/s, × its PyTorch reference): cpu, npu and cuda on the same workload in one line."""
    lines = table(results)
    backends = sorted({t["backend"] for t in lines})
    keyed: dict[tuple, dict] = {}
    for t in lines:
        keyed.setdefault((t["op"], t["shape"], t["dtype"], t["impl"] != "backplane"), {})[t["backend"]] = t
    ctx = results.get("context", {})
    runs = ctx.get("runs") or [run_summary("this run", ctx)]
    passes = ", forward+backward" if _backward(results) else ""
    out = [f"### backplane bench: {', '.join(backends)} side by side{passes}", ""]
    out += [f"- {r['name']}: machine {r['machine']}, {r['num_cpus']} CPUs, torch {r['torch_version']}, "
            f"{str(r['date'])[:10]}; timing: {r.get('timing', '?')}" for r in runs]
    if command:
        out += ["", f"Command: `{command}`"]
    out += ["", "| op | preset | dtype | " + " | ".join(f"{b} µs | {b} mode | {b} % copy_ | {b} % peak | {b} × ref"
                                                      for b in backends) + " |",
            "|---|---|---|" + "---:|---|---:|---:|---:|" * len(backends)]
    for (op, shape, dtype, _), per in sorted(keyed.items()):
        cells = []
        for b in backends:
            t = per.get(b)
            if t is None:
                cells += ["", "", "", "", ""]
            elif t["error"]:
                cells += [f"FAILED: {t['error']}", _mode_cell(t), "", "", ""]
            else:
                _, pct, ratio = _cells(t)
                cells += [f"{t['median_us']:.2f}", _mode_cell(t), pct, peak_cell(t["pct_peak"]), ratio]
        out.append(f"| {op} | {shape} | {dtype} | " + " | ".join(cells) + " |")
    out += ["", f"{_MODES}; % copy_: against `out.copy_(x)` of the op's largest tensor on that device in the same "
            f"run; {_PEAK}; × ref: the registry reference's time over this row's on that device (> 1: faster than "
            "PyTorch); an empty cell: the row was not run on that backend."]
    return "\n".join(out)


_MODES = ("mode: eager calls, graph: CUDA graph replays, compile: torch.compile (selected: of the op as the "
          "selection in force serves it)")
_PEAK = ("% peak: the row's FLOPs (the registry's flops: per element of the op's largest Tensor argument) per "
         "second over the device's FMA rate measured in the same run (context peak_flops), blank where the registry "
         "gives no flops:")


SIGNIFICANT = 0.05  # the p below which a difference counts, as --compare's regressions
# Repetitions each row needs for a reading: with 3 against 3 the U test's p is at least 0.08,
# so every line would read as noise however far apart.
READING_REPETITIONS = 4


def compile_reading(results: dict, threshold: float = 0.05) -> str:
    """Which lines are faster or slower than torch.compile of their reference by more than
    `threshold` (0.05: 5%, --threshold) with p < 0.05 in the U test on the two rows'
    repetitions, as --compare reads an improvement and a regression (the line's time below
    (1 - threshold) or above (1 + threshold) times the compiled row's); the others are
    within it. The "x compile" column says how much; this, whether it is more than noise:
    rows running the same
    generated code part by a few percent from run to run, and by a consistent fraction of
    one within a run, which the U test alone calls significant
    (bench/results/compile-selection/README.md). "" where no line has READING_REPETITIONS
    or more beside a compiled row of as many (--repetitions 5 gives them)."""
    verdicts = {"faster": [], f"within {100 * threshold:g}% or noise": [], "slower": []}
    for t in table(results):
        ratio, p = t["vs_compiled"], t["vs_compiled_p"]
        if ratio is None or p is None or t["repetitions"] < READING_REPETITIONS:
            continue
        # ratio: the compiled row's time over the line's
        verdict = ("faster" if ratio * (1 - threshold) > 1 else "slower" if ratio * (1 + threshold) < 1 else "")
        verdict = verdict if verdict and p < SIGNIFICANT else f"within {100 * threshold:g}% or noise"
        verdicts[verdict].append(f"{t['op']} {t['shape']} {t['dtype']} {t['backend']} ({t['mode']})")
    if not any(verdicts.values()):
        return ""
    lines = [f"x compile: more than {100 * threshold:g}% apart with p < {SIGNIFICANT} (the U test on the repetitions, "
             "as --compare)"]
    lines += [f"  {verdict}: {', '.join(names)}" for verdict, names in verdicts.items() if names]
    return "\n".join(lines)


def markdown(results: dict, command: str = "") -> str:
    """A report of a run: machine, torch, date, the command, the table, and the per-call
    host cost where the run timed it."""
    ctx = results.get("context", {})
    lines = table(results)
    backends = sorted({t["backend"] for t in lines})
    plugins = "; ".join(f"{b}: {ctx.get('backend.' + b, '?')}" for b in backends)
    passes = ", forward+backward" if _backward(results) else ""
    out = [f"### backplane bench: {', '.join(backends)}{passes} ({ctx.get('date', '')[:10]})", "",
           f"Machine {machine(ctx)}, {ctx.get('num_cpus', '?')} CPUs; torch "
           f"{ctx.get('torch_version', '?')}; {ctx.get('timing', '')}. Plugins: {plugins}.", ""]
    if ctx.get("cache"):
        out += [f"Cache: {ctx['cache']}.", ""]
    if command:
        out += [f"Command: `{command}`", ""]
    out += ["| op | backend | preset | dtype | mode | µs | spread | GB/s | % of copy_ | % of peak | × reference |",
            "|---|---|---|---|---|---:|---:|---:|---:|---:|---:|"]
    for t in lines:
        where = f"| {t['op']} | {t['backend']} | {t['shape']} | {t['dtype']} | {_mode_cell(t)} |"
        if t["error"]:
            out.append(f"{where} FAILED: {t['error']} | | | | | |")
            continue
        gbps, pct, ratio = _cells(t)
        out.append(f"{where} {t['median_us']:.2f} | ±{100 * t['spread']:.1f}% | {gbps} | {pct} | "
                   f"{peak_cell(t['pct_peak'])} | {ratio} |")
    out += ["", f"{_MODES}; GB/s: {_bytes_counted(results)} (1 GB = 1e9 B); % of copy_: "
            f"against `out.copy_(x)` of the op's largest tensor in the same run; {_PEAK}; × reference: the registry "
            "reference's time over this row's (> 1: faster than PyTorch)."]
    costs = call_cost_table(results)
    if costs:
        out += ["", costs]
    return "\n".join(out)


def call_cost_table(results: dict) -> str:
    """The host's time per call on a 1-element float32 tensor, backplane's op through the
    dispatcher beside aten's, per op and backend (markdown); "" when the run has none."""
    by = {(c.op, c.backend, c.impl): c for c in call_costs(results)}
    pairs = sorted({(op, backend) for op, backend, _ in by})
    if not pairs:
        return ""
    out = ["Host time per call on a 1-element float32 tensor: backplane's op through the dispatcher, aten's "
           "op (`at::`) called directly.", "",
           "| op | backend | backplane ns/call | at:: ns/call | difference ns |", "|---|---|---:|---:|---:|"]
    for op, backend in pairs:
        cells = []
        for impl in ("backplane", "torch"):
            c = by.get((op, backend, impl))
            cells.append("-" if c is None else f"FAILED: {c.error}" if c.error else f"{c.median_ns:.0f}")
        mine, theirs = by.get((op, backend, "backplane")), by.get((op, backend, "torch"))
        timed = mine and theirs and mine.times_ns and theirs.times_ns
        cells.append(f"{mine.median_ns - theirs.median_ns:+.0f}" if timed else "-")
        out.append(f"| {op} | {backend} | " + " | ".join(cells) + " |")
    return "\n".join(out)
