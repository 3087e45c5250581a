#!/usr/bin/env python3
"""Markdown tables (and optionally a plot) from backplane_bench's JSON output.

    build/bin/backplane_bench --benchmark_out=bench.json --benchmark_out_format=json
    python3 bench/report.py bench.json [--plot bench.png]

Rows are named <op>/<backend>/<impl>/<size>. For each op and backend it prints size,
backplane GB/s, torch GB/s, their ratio and the percentage of the copy_ bandwidth
measured at the same size on the same device in the same run. For rms_norm, both
PyTorch variants and the fastest of them. GB/s counts bytes read + written (each input
once, each output once), 1 GB = 1e9 bytes. Plain python3; matplotlib only for --plot.
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


def size_key(size):
    """Sort key: element count; rms_norm sizes ("256x4096_bfloat16") by dtype, then shape."""
    m = re.fullmatch(r"(\d+)x(\d+)_(\w+)", size)
    if m:
        return (m.group(3), int(m.group(1)) * int(m.group(2)), int(m.group(2)))
    return ("", int(size), 0) if size.isdigit() else ("", 0, size)


def elements_of(size):
    m = re.fullmatch(r"(\d+)x(\d+)_\w+", size)
    return int(m.group(1)) * int(m.group(2)) if m else int(size)


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
    info = [f"{k}: {context[k]}" for k in ("date", "host_name", "num_cpus", "torch_version", "aten_threads", "values")
            if k in context]
    info += [f"{k}: {v}" for k, v in sorted(context.items()) if k.startswith(("backend.", "skipped."))]
    if info:
        out.append("\n".join(f"- {line}" for line in info))
    by_op = defaultdict(lambda: defaultdict(dict))  # op -> backend -> size -> impl -> row
    for (op, backend, impl, size), row in rows.items():
        by_op[op][backend].setdefault(size, {})[impl] = row
    copy = by_op.get("copy_", {})

    for op in sorted(o for o in by_op if o not in ("copy_", "call_overhead_add")):
        for backend, sizes in sorted(by_op[op].items()):
            lines = []
            for size in sorted(sizes, key=size_key):
                impls = sizes[size]
                ref = gbps(copy.get(backend, {}).get(size, {}).get("torch"))
                bp = gbps(impls.get("backplane"))
                if op == "rms_norm":
                    variants = [gbps(impls.get(i)) for i in ("torch", "torch_composite")]
                    best = max((v for v in variants if v is not None), default=None)
                    lines.append([size, fmt(bp), fmt(variants[0]), fmt(variants[1]), fmt(best),
                                  fmt(ratio(bp, best), "{:.2f}"), fmt(pct(bp, ref), "{:.0f}%"), fmt(ref)])
                else:
                    th = gbps(impls.get("torch"))
                    lines.append([size, fmt(bp), fmt(th), fmt(ratio(bp, th), "{:.2f}"),
                                  fmt(pct(bp, ref), "{:.0f}%"), fmt(pct(th, ref), "{:.0f}%"), fmt(ref)])
            if op == "rms_norm":
                header = ["size", "backplane GB/s", "at::rms_norm GB/s", "composite GB/s", "fastest torch GB/s",
                          "backplane / fastest", "backplane % of copy_", "copy_ GB/s"]
            else:
                header = ["size", "backplane GB/s", "torch GB/s", "backplane / torch", "backplane % of copy_",
                          "torch % of copy_", "copy_ GB/s"]
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
    # One panel per op (rms_norm per dtype) and backend: a row per op, a column per
    # backend. copy_ at the same sizes is drawn into each as the reference.
    series = defaultdict(lambda: defaultdict(list))  # (op, backend) -> impl -> [(elements, GB/s)]
    copy = defaultdict(list)  # (kind, dtype, backend) -> points
    for (op, backend, impl, size), row in rows.items():
        if op == "call_overhead_add" or gbps(row) is None:
            continue
        dtype = size.split("_", 1)[1] if "_" in size else "float32"
        kind = "rows" if "x" in size else "elementwise"
        point = (elements_of(size), gbps(row))
        if op == "copy_":
            copy[(kind, dtype, backend)].append(point)
        else:
            series[(f"{op} ({dtype})" if kind == "rows" else op, backend)][impl].append(point)
    ops = sorted({op for op, _ in series})
    backends = sorted({b for _, b in series})
    colors = {"backplane": "tab:blue", "torch": "tab:orange", "torch_composite": "tab:green"}
    fig, axes = plt.subplots(len(ops), len(backends), figsize=(5.5 * len(backends), 3.2 * len(ops)), squeeze=False)
    for r, op in enumerate(ops):
        for c, backend in enumerate(backends):
            ax = axes[r][c]
            impls = series.get((op, backend))
            if not impls:
                ax.axis("off")
                continue
            for impl, points in sorted(impls.items()):
                points.sort()
                ax.plot([p[0] for p in points], [p[1] for p in points], "-" if impl == "backplane" else "--",
                        marker="o", color=colors.get(impl), label=impl)
            kind, dtype = ("rows", op[op.index("(") + 1:-1]) if "(" in op else ("elementwise", "float32")
            ref = sorted(copy.get((kind, dtype, backend), []))
            if ref:
                ax.plot([p[0] for p in ref], [p[1] for p in ref], ":", color="gray", marker=".", label="copy_")
            ax.set_xscale("log", base=2)
            ax.set_title(f"{op} on {backend}")
            ax.set_xlabel("elements")
            ax.set_ylabel("GB/s (read + written)")
            ax.set_ylim(bottom=0)
            ax.grid(True, alpha=0.3)
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
