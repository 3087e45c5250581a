#!/usr/bin/env python3
"""Markdown tables (and optionally a plot) from backplane_bench's JSON output.

    build/bin/backplane_bench --benchmark_out=bench.json --benchmark_out_format=json
    python3 bench/report.py bench.json [--plot bench.png]

Rows are named <op>/<backend>/<impl>/<shape>; impl is backplane, reference (the op's
registry reference: the PyTorch expression it is checked against, in the same dtype on
the same device) or copy_ (out.copy_(x) of the op's largest tensor). For each op,
backend and shape it prints both GB/s, their ratio and backplane's percentage of copy_.
GB/s counts bytes read + written (each input once, each output once), 1 GB = 1e9
bytes. Plain python3; matplotlib only for --plot.
"""
import argparse
import json
import re
import sys
from collections import defaultdict

# Name parts Google Benchmark appends to a row's name (timing mode, flags).
_SUFFIX = re.compile(r"^(real_time|manual_time|min_time:.*|repeats:.*|iterations:.*|threads:.*)$")


def parse_name(name):
    parts = [p for p in name.split("/") if not _SUFFIX.match(p)]
    if len(parts) != 4:
        return None
    return tuple(parts)  # op, backend, impl, size


def load_rows(paths):
    """{(op, backend, impl, size): row}; medians when the run had repetitions."""
    rows, context, errors = {}, {}, []
    for path in paths:
        try:
            with open(path) as f:
                data = json.load(f)
        except (OSError, json.JSONDecodeError) as e:
            sys.exit(f"report.py: cannot read {path}: {e}")
        context.update(data.get("context", {}))
        entries = data.get("benchmarks", [])
        has_median = any(e.get("aggregate_name") == "median" for e in entries)
        if has_median:
            context["values"] = f"medians of {max(e.get('repetitions', 0) for e in entries)} repetitions"
        for e in entries:
            key = parse_name(e.get("run_name", e["name"]))
            if key is None:
                continue
            if e.get("error_occurred"):
                errors.append((e["name"], e.get("error_message", "")))
                continue
            if has_median and e.get("aggregate_name") != "median":
                continue
            rows[key] = e
    return rows, context, errors


def gbps(row):
    return row["bytes_per_second"] / 1e9 if row and "bytes_per_second" in row else None


def fmt(value, spec="{:.1f}"):
    return "-" if value is None else spec.format(value)


def ratio(a, b):
    return a / b if a is not None and b else None


def pct(a, b):
    return 100.0 * a / b if a is not None and b else None


def table(header, lines):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(line) + " |" for line in lines]
    return "\n".join(out)


def report(rows, context, errors):
    out = []
    info = [f"{k}: {context[k]}" for k in ("date", "host_name", "cpu_model", "num_cpus", "torch_version", "aten_threads",
                                           "values")
            if k in context]
    info += [f"{k}: {v}" for k, v in sorted(context.items()) if k.startswith(("backend.", "skipped."))]
    if info:
        out.append("\n".join(f"- {line}" for line in info))
    by_op = defaultdict(lambda: defaultdict(dict))  # op -> backend -> shape -> impl -> row
    for (op, backend, impl, shape), row in rows.items():
        by_op[op][backend].setdefault(shape, {})[impl] = row
    header = ["shape", "backplane GB/s", "reference GB/s", "backplane / reference", "backplane % of copy_",
              "copy_ GB/s"]
    for op in sorted(o for o in by_op if o != "call_overhead_add"):
        for backend, shapes in sorted(by_op[op].items()):
            lines = []
            for shape in sorted(shapes):
                impls = shapes[shape]
                bp, ref, copy = (gbps(impls.get(i)) for i in ("backplane", "reference", "copy_"))
                lines.append([shape, fmt(bp), fmt(ref), fmt(ratio(bp, ref), "{:.2f}"), fmt(pct(bp, copy), "{:.0f}%"),
                              fmt(copy)])
            out.append(f"### {op} on {backend}\n\n" + table(header, lines))

    for backend, sizes in sorted(by_op.get("call_overhead_add", {}).items()):
        impls = next(iter(sizes.values()))
        ns = {i: r["real_time"] * _to_ns(r.get("time_unit", "ns")) for i, r in impls.items()}
        bp, th = ns.get("backplane"), ns.get("torch")
        diff = bp - th if bp is not None and th is not None else None
        out.append(f"### per-call cost, add on a 1-element float32 tensor, {backend} (host time)\n\n" +
                   table(["backplane ns/call", "at::add ns/call", "difference ns"],
                         [[fmt(bp, "{:.0f}"), fmt(th, "{:.0f}"), fmt(diff, "{:+.0f}")]]))
    if errors:
        out.append("### rows that failed\n\n" + "\n".join(f"- `{n}`: {m}" for n, m in errors))
    return "\n\n".join(out) + "\n"


def _to_ns(unit):
    return {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}[unit]


def plot(rows, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"report.py: matplotlib is not installed; no plot written to {path} "
              "(pip install matplotlib to get one)", file=sys.stderr)
        return False
    # One bar group per op shape and backend: backplane and the reference, with the copy_
    # bandwidth of the same tensor drawn as the roofline mark.
    groups = defaultdict(dict)  # (op, backend, shape) -> impl -> GB/s
    for (op, backend, impl, shape), row in rows.items():
        if op != "call_overhead_add" and gbps(row) is not None:
            groups[(op, backend, shape)][impl] = gbps(row)
    keys = sorted(groups)
    if not keys:
        return False
    fig, ax = plt.subplots(figsize=(max(6, 0.9 * len(keys)), 4.5))
    for i, key in enumerate(keys):
        g = groups[key]
        for k, (impl, color) in enumerate((("backplane", "tab:blue"), ("reference", "tab:orange"))):
            if impl in g:
                ax.bar(i + (k - 0.5) * 0.38, g[impl], 0.38, color=color, label=impl if i == 0 else None)
        if "copy_" in g:
            ax.hlines(g["copy_"], i - 0.45, i + 0.45, colors="gray", linestyles=":", label="copy_" if i == 0 else None)
    ax.set_xticks(range(len(keys)), [f"{op}\n{shape}\n{backend}" for op, backend, shape in keys], fontsize=6,
                  rotation=90)
    ax.set_ylabel("GB/s (read + written, 1e9 bytes)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"report.py: plot written to {path}", file=sys.stderr)
    return True


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("json", nargs="+",
                        help="Google Benchmark JSON from --benchmark_out=... --benchmark_out_format=json")
    parser.add_argument("--plot", metavar="PNG", help="also draw achieved GB/s against size per op and backend")
    args = parser.parse_args()
    rows, context, errors = load_rows(args.json)
    if not rows and not errors:
        sys.exit("report.py: no backplane_bench rows (<op>/<backend>/<impl>/<size>) in " + ", ".join(args.json))
    sys.stdout.write(report(rows, context, errors))
    if args.plot:
        plot(rows, args.plot)


if __name__ == "__main__":
    main()
