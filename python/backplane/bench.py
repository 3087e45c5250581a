"""`backplane bench` from Python: runs the benchmark engine (backplane_bench, Google
Benchmark), and reads, compares and plots its JSON.

    import backplane.bench as bench
    results = bench.run(backends="cpu,npu", ops="add,rms_norm", repetitions=5)
    results = bench.run(backends="cuda", cuda_graph=True)   # kernel time, without launches
    for row in bench.rows(results): print(row)
    bench.compare(bench.load("base.json"), results)      # Mann-Whitney U per row
    bench.plot(results, "bench.png")

Rows come from the registry (each op's `bench` presets), so a new op, a vendor op or an
out-of-tree plugin is benchmarked with no code. Every backplane row is checked against
the op's reference before it is timed; a wrong kernel is reported (`error`), not timed.
Google Benchmark's JSON is the interchange format: `--benchmark_out` files of
backplane_bench and files written here are the same thing.
"""
from __future__ import annotations

import argparse
import io
import json
import math
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from statistics import median

from ._native import lib_dir


_DTYPES = ("float32", "float64", "float16", "bfloat16")


@dataclass(frozen=True)
class Row:
    op: str
    backend: str
    plugin: str        # the plugin library that served it (from the run's context)
    shape: str         # the registry preset
    dtype: str
    impl: str          # backplane | reference (PyTorch's op) | copy_ (the device's copy bandwidth)
    times_us: tuple    # one per repetition
    gbps: float | None  # 1 GB = 1e9 bytes: each input read once, each output written once
    error: str = ""
    cuda_graph: bool = False  # timed as CUDA graph replays (--cuda-graph), not eager calls

    @property
    def median_us(self) -> float:
        return median(self.times_us) if self.times_us else math.nan

    @property
    def spread(self) -> float:
        """Half the range of the repetitions, relative to the median."""
        if len(self.times_us) < 2:
            return 0.0
        return (max(self.times_us) - min(self.times_us)) / (2 * self.median_us)


def engine() -> Path:
    """backplane_bench beside the `backplane` command of this build or install."""
    path = lib_dir().parent / "bin" / "backplane_bench"
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} not found: the benchmark engine is built with BACKPLANE_BUILD_BENCH=ON (needs Google "
            "Benchmark; `make build` does it); the wheel does not ship it"
        )
    return path


def _csv(value) -> str:
    return value if isinstance(value, str) else ",".join(value)


def run(backends="cpu", ops=(), dtypes=("float32", "bfloat16"), shapes=(), repetitions=5, json_path=None,
        quiet=False, extra=(), cuda_graph=False) -> dict:
    """Runs the engine and returns its Google Benchmark JSON (also written to json_path).
    cuda_graph: cuda rows timed as CUDA graph replays (the kernels without the host's launches)."""
    if json_path:
        out = Path(json_path)
    else:
        fd, name = tempfile.mkstemp(suffix=".json")
        os.close(fd)
        out = Path(name)
    args = [str(engine()), f"--backends={_csv(backends)}", f"--dtypes={_csv(dtypes)}",
            f"--benchmark_repetitions={repetitions}", f"--benchmark_out={out}", "--benchmark_out_format=json"]
    if ops:
        args.append(f"--ops={_csv(ops)}")
    if shapes:
        args.append(f"--shapes={_csv(shapes)}")
    if cuda_graph:
        args.append("--cuda-graph")
    args += list(extra)
    try:
        done = subprocess.run(args, stdout=subprocess.DEVNULL if quiet else None, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"{args[0]} exited with {done.returncode}")
        return load(out)
    finally:
        if not json_path:
            os.unlink(out)


_UNITS = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}  # Google Benchmark's time units, in µs
_MAX_FILE_BYTES = 64 << 20  # a run of every op is a few MB; more is not a run (/dev/zero)


def load(path) -> dict:
    """A run's JSON. A file cut off mid-run (the engine stopped by a timeout, say) keeps its
    complete rows, with a note on stderr; anything else that does not parse, or is not
    shaped as Google Benchmark writes it (check_run), is refused (ValueError)."""
    text = _read_text(path)
    try:
        results = json.loads(text)
    except json.JSONDecodeError as e:
        results = _complete_rows(text)
        if results is None:
            raise ValueError(f"{path}: not a backplane bench (Google Benchmark) JSON file: {e}") from e
        print(f"backplane bench: {path} ends mid-run; its {len(results['benchmarks'])} complete entries are kept",
              file=sys.stderr)
    check_run(results, path)
    return results


def _read_text(path) -> str:
    with open(path, "rb") as f:
        data = f.read(_MAX_FILE_BYTES + 1)
    if len(data) > _MAX_FILE_BYTES:
        raise ValueError(f"{path}: more than {_MAX_FILE_BYTES >> 20} MiB; not a backplane bench JSON file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not a backplane bench (Google Benchmark) JSON file: {e}") from e


def check_run(results, path) -> None:
    """Refuses (ValueError naming the file and entry) what rows() could not read: the
    top level an object with a "benchmarks" list; each entry an object with a name; each
    timed entry a finite real_time > 0 in a known time_unit (a failed entry has no time)."""
    def refuse(what):
        raise ValueError(f"{path}: {what}; expected Google Benchmark's JSON (backplane bench --json)")

    if not isinstance(results, dict):
        refuse(f"the top level is {_json_type(results)}, not an object")
    context = results.get("context", {})
    if not isinstance(context, dict):
        refuse(f'"context" is {_json_type(context)}, not an object')
    for key, value in context.items():  # those read as text (the plugin path, the date)
        if (key.startswith("backend.") or key == "date") and not isinstance(value, str):
            refuse(f'context "{key}" is {_json_type(value)}, not a string')
    entries = results.get("benchmarks")
    if not isinstance(entries, list):
        refuse('no "benchmarks" list' if entries is None else f'"benchmarks" is {_json_type(entries)}, not a list')
    for i, e in enumerate(entries):
        where = f"benchmarks[{i}]"
        if not isinstance(e, dict):
            refuse(f"{where} is {_json_type(e)}, not an object")
        if not isinstance(e.get("name"), str) or not e["name"]:
            refuse(f'{where} has no "name" string')
        if not isinstance(e.get("run_name", ""), str):
            refuse(f'{where}: "run_name" is {_json_type(e["run_name"])}, not a string')
        where = f"{where} ({e['name']})"
        if e.get("run_type") == "aggregate" or e.get("error_occurred") or e.get("skipped"):
            continue
        unit = e.get("time_unit", "us")
        if unit not in _UNITS:
            refuse(f"{where}: time_unit {unit!r} is not one of {', '.join(_UNITS)}")
        if not _finite(e.get("real_time")) or e["real_time"] <= 0:
            refuse(f"{where}: real_time {e.get('real_time')!r} is not a time > 0")
        if "bytes_per_second" in e and (not _finite(e["bytes_per_second"]) or e["bytes_per_second"] < 0):
            refuse(f"{where}: bytes_per_second {e['bytes_per_second']!r} is not a rate >= 0")


def _finite(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _json_type(value) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number")


def _complete_rows(text: str) -> dict | None:
    """The run in `text` up to its last complete entry of "benchmarks" (Google Benchmark
    writes one entry per 4-space-indented object), or None."""
    if '"benchmarks": [' not in text:
        return None
    end = len(text)
    for _ in range(8):  # the last few entry ends; the file is cut inside one of them at worst
        end = text.rfind("\n    }", 0, end)
        if end < 0:
            return None
        try:
            return json.loads(text[:end + 6] + "\n  ]\n}")
        except json.JSONDecodeError:
            continue
    return None


def machine(ctx: dict) -> str:
    """A run's machine as reports name it: the host name, and the CPU model where the run
    recorded one (two machines may share a host name)."""
    name = f"`{ctx.get('host_name', '?')}`"
    return f"{name} ({ctx['cpu_model']})" if ctx.get("cpu_model") else name


def _run_summary(name, ctx: dict) -> dict:
    """Where and when a run was made, as side_by_side names it."""
    return {"name": str(name), "machine": machine(ctx),
            **{k: ctx.get(k, "?") for k in ("date", "num_cpus", "torch_version", "timing")}}


def merge(runs: dict) -> dict:
    """Several runs as one, {name: results} (a file name, say): their rows side by side.
    Each backend must come from one run only; a backend in two runs is refused, naming
    both, rather than one of them silently kept. The context keeps each run's machine,
    torch and date under "runs"."""
    merged = {"context": {"runs": []}, "benchmarks": []}
    owner: dict[str, str] = {}
    for name, results in runs.items():
        ctx = results.get("context", {})
        for backend in sorted({r.backend for r in rows(results)}):
            if backend in owner:
                raise ValueError(f"backend '{backend}' is in both {owner[backend]} and {name}: compare them with "
                                 f"--compare, or merge runs of different backends")
            owner[backend] = name
        merged["context"].update({k: v for k, v in ctx.items() if k.startswith("backend.")})
        if not merged["context"]["runs"] and "cpu_model" in ctx:  # the first run's machine, as host_name
            merged["context"]["cpu_model"] = ctx["cpu_model"]
        for key in ("date", "host_name", "num_cpus", "torch_version", "timing"):
            merged["context"].setdefault(key, ctx.get(key, "?"))
        merged["context"]["runs"].append(_run_summary(name, ctx))
        merged["benchmarks"] += results.get("benchmarks", [])
    return merged


def rows(results: dict) -> list[Row]:
    """One Row per op/backend/impl/shape_dtype, from the individual repetitions."""
    context = results.get("context", {})
    found: dict[tuple, dict] = {}
    for e in results.get("benchmarks", []):
        if e.get("run_type") == "aggregate":
            continue
        parts = e.get("run_name", e["name"]).split("/")[:4]
        if len(parts) != 4:
            continue
        op, backend, impl, shape_dtype = parts
        shape, _, dtype = shape_dtype.rpartition("_")
        if op.startswith("call_overhead_") or dtype not in _DTYPES:
            continue  # host cost per call (call_overhead_<op>/<backend>/<impl>/1): not an op row
        entry = found.setdefault((op, backend, impl, shape, dtype),
                                 {"times": [], "gbps": [], "error": "", "cuda_graph": False})
        if e.get("error_occurred") or e.get("skipped"):
            entry["error"] = e.get("error_message") or e.get("skip_message") or "failed"
            continue
        scale = _UNITS[e.get("time_unit", "us")]
        entry["times"].append(e["real_time"] * scale)
        entry["cuda_graph"] = entry["cuda_graph"] or bool(e.get("cuda_graph"))
        if "bytes_per_second" in e:
            entry["gbps"].append(e["bytes_per_second"] / 1e9)
    out = []
    for (op, backend, impl, shape, dtype), v in found.items():
        plugin = context.get(f"backend.{backend}", "").split(" (")[0]
        out.append(Row(op, backend, plugin, shape, dtype, impl, tuple(v["times"]),
                       median(v["gbps"]) if v["gbps"] else None, v["error"], v["cuda_graph"]))
    return out


def table(results: dict) -> list[dict]:
    """Per op/backend/shape/dtype: backplane's median and spread, GB/s, percent of copy_
    and the ratio against the reference (> 1: faster than PyTorch)."""
    by = {(r.op, r.backend, r.shape, r.dtype, r.impl): r for r in rows(results)}
    lines = []
    for (op, backend, shape, dtype, impl), r in sorted(by.items()):
        if impl != "backplane":
            continue
        ref, copy = by.get((op, backend, shape, dtype, "reference")), by.get((op, backend, shape, dtype, "copy_"))
        lines.append({
            "op": op, "backend": backend, "plugin": r.plugin, "shape": shape, "dtype": dtype,
            "median_us": r.median_us, "spread": r.spread, "gbps": r.gbps, "error": r.error,
            "pct_copy": (r.gbps / copy.gbps) if r.gbps and copy and copy.gbps else None,
            "vs_reference": (ref.median_us / r.median_us) if ref and ref.times_us and r.times_us else None,
            "reference_us": ref.median_us if ref and ref.times_us else None,
        })
    return lines


def _cells(t: dict) -> tuple[str, str, str]:
    """GB/s, percent of copy_ and ratio against the reference of a table line, as shown."""
    gbps = f"{t['gbps']:.1f}" if t["gbps"] else "-"
    pct = f"{100 * t['pct_copy']:.0f}%" if t["pct_copy"] else "-"
    ratio = f"{t['vs_reference']:.2f}" if t["vs_reference"] else "-"
    return gbps, pct, ratio


def format_table(results: dict) -> str:
    head = f"{'op':14} {'backend':8} {'shape':22} {'dtype':9} {'us':>10} {'spread':>7} {'GB/s':>8} {'%copy_':>7} {'x ref':>6}"
    out = [head, "-" * len(head)]
    for t in table(results):
        if t["error"]:
            out.append(f"{t['op']:14} {t['backend']:8} {t['shape']:22} {t['dtype']:9} FAILED: {t['error']}")
            continue
        gbps, pct, ratio = _cells(t)
        out.append(f"{t['op']:14} {t['backend']:8} {t['shape']:22} {t['dtype']:9} {t['median_us']:10.2f} "
                   f"{100 * t['spread']:6.1f}% {gbps:>8} {pct:>7} {ratio:>6}")
    return "\n".join(out)


def side_by_side(results: dict, command: str = "") -> str:
    """A markdown table with one row per op, preset and dtype and a group of columns per
    backend (µs, % of that device's copy_, × its PyTorch reference): cpu, npu and cuda
    on the same workload in one line."""
    lines = table(results)
    backends = sorted({t["backend"] for t in lines})
    keyed: dict[tuple, dict] = {}
    for t in lines:
        keyed.setdefault((t["op"], t["shape"], t["dtype"]), {})[t["backend"]] = t
    ctx = results.get("context", {})
    runs = ctx.get("runs") or [_run_summary("this run", ctx)]
    out = [f"### backplane bench: {', '.join(backends)} side by side", ""]
    out += [f"- {r['name']}: machine {r['machine']}, {r['num_cpus']} CPUs, torch {r['torch_version']}, "
            f"{str(r['date'])[:10]}; timing: {r.get('timing', '?')}" for r in runs]
    if command:
        out += ["", f"Command: `{command}`"]
    out += ["", "| op | preset | dtype | " + " | ".join(f"{b} µs | {b} % copy_ | {b} × ref" for b in backends) + " |",
            "|---|---|---|" + "---:|---:|---:|" * len(backends)]
    for (op, shape, dtype), per in sorted(keyed.items()):
        cells = []
        for b in backends:
            t = per.get(b)
            if t is None:
                cells += ["", "", ""]
            elif t["error"]:
                cells += [f"FAILED: {t['error']}", "", ""]
            else:
                _, pct, ratio = _cells(t)
                cells += [f"{t['median_us']:.2f}", pct, ratio]
        out.append(f"| {op} | {shape} | {dtype} | " + " | ".join(cells) + " |")
    out += ["", "% copy_: against `out.copy_(x)` of the op's largest tensor on that device in the same run; "
            "× ref: the registry reference's time over backplane's on that device (> 1: faster than PyTorch); "
            "an empty cell: the row was not run on that backend."]
    return "\n".join(out)


def markdown(results: dict, command: str = "") -> str:
    """A bench/RESULTS.md section from a run's JSON: machine, torch, date, the command,
    and the table."""
    ctx = results.get("context", {})
    lines = table(results)
    backends = sorted({t["backend"] for t in lines})
    plugins = "; ".join(f"{b}: {ctx.get('backend.' + b, '?')}" for b in backends)
    out = [f"### backplane bench: {', '.join(backends)} ({ctx.get('date', '')[:10]})", "",
           f"Machine {machine(ctx)}, {ctx.get('num_cpus', '?')} CPUs; torch "
           f"{ctx.get('torch_version', '?')}; {ctx.get('timing', '')}. Plugins: {plugins}.", ""]
    if command:
        out += [f"Command: `{command}`", ""]
    out += ["| op | backend | preset | dtype | backplane µs | spread | GB/s | % of copy_ | × reference |",
            "|---|---|---|---|---:|---:|---:|---:|---:|"]
    for t in lines:
        if t["error"]:
            out.append(f"| {t['op']} | {t['backend']} | {t['shape']} | {t['dtype']} | FAILED: {t['error']} | | | | |")
            continue
        gbps, pct, ratio = _cells(t)
        out.append(f"| {t['op']} | {t['backend']} | {t['shape']} | {t['dtype']} | {t['median_us']:.2f} | "
                   f"±{100 * t['spread']:.1f}% | {gbps} | {pct} | {ratio} |")
    out += ["", "GB/s: bytes each input read once and each output written once (1 GB = 1e9 B); % of copy_: "
            "against `out.copy_(x)` of the op's largest tensor in the same run; × reference: the registry "
            "reference's time over backplane's (> 1: faster than PyTorch)."]
    return "\n".join(out)


def mann_whitney_p(a, b) -> float | None:
    """Two-sided p-value of the Mann-Whitney U test (normal approximation with tie
    correction), as Google Benchmark's compare.py uses the U test; None below 3 samples
    each, where it cannot say anything."""
    n1, n2 = len(a), len(b)
    if n1 < 3 or n2 < 3:
        return None
    pooled = sorted([(x, 0) for x in a] + [(x, 1) for x in b])
    ranks, i = [0.0] * len(pooled), 0
    ties = 0.0
    while i < len(pooled):
        j = i
        while j + 1 < len(pooled) and pooled[j + 1][0] == pooled[i][0]:
            j += 1
        for k in range(i, j + 1):
            ranks[k] = (i + j) / 2 + 1
        t = j - i + 1
        ties += t ** 3 - t
        i = j + 1
    r1 = sum(r for r, (_, group) in zip(ranks, pooled) if group == 0)
    u = r1 - n1 * (n1 + 1) / 2
    n = n1 + n2
    sigma = math.sqrt(n1 * n2 / 12 * ((n + 1) - ties / (n * (n - 1))))
    if sigma == 0:
        return 1.0
    z = (abs(u - n1 * n2 / 2) - 0.5) / sigma
    return max(0.0, min(1.0, math.erfc(max(z, 0) / math.sqrt(2))))


def compare(base: dict, new: dict, threshold=0.05, alpha=0.05, base_backend=None, new_backend=None) -> list[dict]:
    """Rows present in both, new against base: time change and the U test's p-value. A
    row regressed when it is slower by more than `threshold` and p < alpha. Two backends
    of one run: compare(results, results, base_backend="cpu", new_backend="cpu_alt").
    A row timed as CUDA graph replays in one run and as eager calls in the other is refused
    (ValueError): the two measure different things (kernels alone, kernels and launches)."""
    def keyed(results, backend):
        # Rows of every backend are kept apart unless one backend is compared with another.
        return {(r.op, r.impl, r.shape, r.dtype) + (() if backend else (r.backend,)): r
                for r in rows(results) if backend in (None, r.backend)}

    a, b = keyed(base, base_backend), keyed(new, new_backend)
    out = []
    for key in sorted(set(a) & set(b)):
        ra, rb = a[key], b[key]
        if ra.error or rb.error or not ra.times_us or not rb.times_us:
            continue
        if ra.cuda_graph != rb.cuda_graph:
            timed = {True: "as CUDA graph replays (--cuda-graph)", False: "as eager calls"}
            row = "/".join(key[:4])
            if base_backend or new_backend:  # two backends of one run: --cuda-graph times only cuda's rows
                raise ValueError(f"{row}: {ra.backend} timed {timed[ra.cuda_graph]}, {rb.backend} "
                                 f"{timed[rb.cuda_graph]}; --cuda-graph times cuda rows only, so compare "
                                 f"these backends in a run without it")
            raise ValueError(f"{row} on {ra.backend} / {rb.backend}: the base run timed it {timed[ra.cuda_graph]}, "
                             f"the new one {timed[rb.cuda_graph]}; run both the same way")
        change = rb.median_us / ra.median_us - 1
        p = mann_whitney_p(ra.times_us, rb.times_us)
        significant = p is not None and p < alpha
        out.append({"op": key[0], "impl": key[1], "shape": key[2], "dtype": key[3],
                    "base": f"{ra.backend}", "new": f"{rb.backend}",
                    "base_us": ra.median_us, "new_us": rb.median_us, "change": change, "p": p,
                    "regressed": significant and change > threshold,
                    "improved": significant and change < -threshold})
    return out


def format_comparison(lines: list[dict]) -> str:
    head = f"{'op':14} {'impl':10} {'shape':22} {'dtype':9} {'base us':>10} {'new us':>10} {'change':>8} {'p':>7}"
    out = [head, "-" * len(head)]
    for c in lines:
        p = "n/a" if c["p"] is None else f"{c['p']:.3f}"
        mark = "  REGRESSED" if c["regressed"] else ("  improved" if c["improved"] else "")
        out.append(f"{c['op']:14} {c['impl']:10} {c['shape']:22} {c['dtype']:9} {c['base_us']:10.2f} "
                   f"{c['new_us']:10.2f} {100 * c['change']:7.1f}% {p:>7}{mark}")
    return "\n".join(out)


def plot(results: dict, path) -> None:
    """GB/s of backplane and the reference per op/shape/dtype and backend, with the
    device's copy_ bandwidth drawn as the roofline; one PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lines = [t for t in table(results) if t["gbps"]]
    if not lines:
        raise ValueError("nothing to plot: no backplane row has a bandwidth")
    by = {(r.op, r.backend, r.shape, r.dtype, r.impl): r for r in rows(results)}
    labels = [f"{t['op']}\n{t['shape']}\n{t['dtype']}\n{t['backend']}" for t in lines]
    mine = [t["gbps"] for t in lines]
    ref = [getattr(by.get((t["op"], t["backend"], t["shape"], t["dtype"], "reference")), "gbps", None) or 0
           for t in lines]
    copy = [getattr(by.get((t["op"], t["backend"], t["shape"], t["dtype"], "copy_")), "gbps", None) or 0
            for t in lines]
    fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(lines)), 5))
    x = range(len(lines))
    ax.bar([i - 0.2 for i in x], mine, width=0.4, label="backplane")
    ax.bar([i + 0.2 for i in x], ref, width=0.4, label="PyTorch reference")
    ax.scatter(list(x), copy, marker="_", s=600, color="black", label="copy_ (roofline)", zorder=3)
    ax.set_xticks(list(x))
    ax.set_xticklabels(labels, fontsize=7)
    ax.set_ylabel("GB/s (1e9 bytes)")
    ctx = results.get("context", {})
    ax.set_title(f"backplane bench - {machine(ctx).replace('`', '')} torch {ctx.get('torch_version', '')} {ctx.get('date', '')}",
                 fontsize=9)
    ax.legend()
    fig.tight_layout()
    png = io.BytesIO()  # written here, not by savefig, so a failed write raises (/dev/full)
    fig.savefig(png, format="png", dpi=120)
    plt.close(fig)
    Path(path).write_bytes(png.getvalue())


_MAX_REPETITIONS = 1000  # as the engine's (bench_options.h)
_MAX_MIN_TIME = 3600.0   # seconds per repetition; more is a typo, not a plan


def _repetitions(text: str) -> int:
    """--repetitions: Google Benchmark aborts on a negative count and runs no row at 0."""
    try:
        n = int(text)
    except ValueError:
        n = 0
    if not 1 <= n <= _MAX_REPETITIONS:
        raise argparse.ArgumentTypeError(f"expected a whole number from 1 to {_MAX_REPETITIONS}, found '{text}'")
    return n


def _min_time(text: str) -> float:
    """--min-time: inf (or 1e300) would time one row for ever."""
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not (0 < seconds <= _MAX_MIN_TIME):
        raise argparse.ArgumentTypeError(f"expected seconds > 0 and at most {_MAX_MIN_TIME:g} such as 0.05, "
                                         f"found '{text}'")
    return seconds


def _threshold(text: str) -> float:
    try:
        percent = float(text)
    except ValueError:
        percent = math.nan
    if not (0 <= percent < math.inf):
        raise argparse.ArgumentTypeError(f"expected a percentage >= 0 such as 5, found '{text}'")
    return percent


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


def _refuse_before_running(args) -> None:
    """What the flags make impossible, refused (ValueError) before any row is timed."""
    if not args.input and args.json and args.compare and _same_file(args.json, args.compare):
        raise ValueError(f"--json {args.json} would overwrite the --compare baseline {args.compare}; "
                         "write this run to another file")
    if not args.input and args.compare_backends:
        selected = args.backends.split(",")
        missing = [b for b in args.compare_backends if b not in selected]
        if missing:
            raise ValueError(f"--compare-backends: {', '.join(missing)} not among --backends ({args.backends})")
    if args.plot:
        try:
            import matplotlib  # noqa: F401
        except ImportError as e:
            raise ValueError(f"--plot needs matplotlib ({e})") from e


def _timed_rows(results: dict) -> int:
    return sum(1 for r in rows(results) if r.times_us and not r.error)


def _comparison(args, base, results) -> list[dict]:
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


def main(argv=None) -> int:
    """Exit 0; 1: a significant regression; 2: a usage error, a file that cannot be read or
    written, or an engine that refused or failed (with the reason on stderr)."""
    p = argparse.ArgumentParser(prog="backplane bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--backends", default=os.environ.get("BACKPLANE_BACKENDS") or "cpu")
    p.add_argument("--ops", default="")
    p.add_argument("--dtypes", default="float32,bfloat16")
    p.add_argument("--shapes", default="", help="registry bench presets by name (default: all)")
    p.add_argument("--repetitions", type=_repetitions, default=5)
    p.add_argument("--min-time", type=_min_time, help="least seconds per repetition (Google Benchmark's default 0.5)")
    p.add_argument("--interleave", action="store_true",
                   help="run the repetitions of all rows in a random order (Google Benchmark's random "
                        "interleaving), so a drift of the machine's speed falls on every row alike")
    p.add_argument("--cuda-graph", action="store_true",
                   help="time cuda rows as replays of a CUDA graph of each batch of calls: the kernels' time "
                        "without the host's launch cost (ops shorter than a launch need it)")
    p.add_argument("--json", help="write Google Benchmark's JSON here")
    p.add_argument("--input", nargs="+", metavar="RUN.json",
                   help="read results from these JSON files instead of running (several: their backends side by side)")
    p.add_argument("--compare", metavar="BASE.json", help="compare against this earlier run (U test per row)")
    p.add_argument("--compare-backends", metavar="A,B", type=_backend_pair,
                   help="compare backend B against A within this run")
    p.add_argument("--threshold", type=_threshold, default=5.0, help="percent slower that counts as a regression")
    p.add_argument("--plot", metavar="FILE.png")
    p.add_argument("--markdown", action="store_true", help="print a bench/RESULTS.md section instead of the table")
    p.add_argument("--side-by-side", action="store_true",
                   help="markdown, one row per op, preset and dtype with a group of columns per backend")
    args = p.parse_args(argv)
    try:
        _refuse_before_running(args)
        # The baseline is read before the run: a bad one fails before minutes of timing.
        base = load(args.compare) if args.compare else None
        if args.input:
            results = load(args.input[0]) if len(args.input) == 1 else merge({f: load(f) for f in args.input})
        else:
            extra = [f"--min-time={args.min_time}"] if args.min_time else []
            if args.interleave:
                extra.append("--benchmark_enable_random_interleaving=true")
            # RuntimeError: the engine refused (its reason is on stderr already) or failed
            results = run(args.backends, args.ops, args.dtypes, args.shapes, args.repetitions, args.json,
                          quiet=True, extra=extra, cuda_graph=args.cuda_graph)
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
    status = 0
    if args.compare or args.compare_backends:
        try:
            comparisons = _comparison(args, base, results)
        except ValueError as e:
            print(f"backplane bench: {e}", file=sys.stderr)
            return 2
        print()
        print(format_comparison(comparisons))
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


if __name__ == "__main__":
    sys.exit(main())
