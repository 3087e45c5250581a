"""Markdown tables from train_ops_bench.py's JSON: one run, or two runs of the same rows side
by side (an A/B of one build, e.g. BACKPLANE_CUDA_DEPENDENT_LAUNCH=0, then =1).

    python bench/train_ops_report.py RUN.json [NEW.json]

One line per op and preset, a column per dtype. A cell gives Backplane's microseconds, its
percentage of the same run's copy_ bandwidth, and its speed over the fastest PyTorch variant
of the same run (aten's op, the registry baseline or reference, or torch.compile, whichever
the run timed; > 1: Backplane is faster). With two runs, each figure is first → second, and
"-" where a run lacks the row. A row a run timed twice (a dtype listed twice) counts as its
later pass.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path


def _index(run: dict) -> dict:
    """(op, shape, dtype) -> {variant: row}, in the run's order."""
    rows: dict = {}
    for r in run["rows"]:
        rows.setdefault((r["op"], r["shape"], r["dtype"]), {})[r["variant"]] = r
    return rows


def _figures(variants: dict) -> tuple[float, float, float] | None:
    """Backplane's (us, % of copy_, speed over the fastest other variant), or None."""
    ours = variants.get("backplane")
    others = [r["us"] for name, r in variants.items() if name != "backplane"]
    if ours is None or not others:
        return None
    return ours["us"], 100 * ours["gbps"] / ours["copy_gbps"], min(others) / ours["us"]


def markdown(runs: list[dict]) -> str:
    if not 1 <= len(runs) <= 2:
        raise ValueError(f"one run or two to compare, got {len(runs)}")
    indexed = [_index(run) for run in runs]
    keys = [k for run in indexed for k in run]
    dtypes = list(dict.fromkeys(k[2] for k in keys))
    shapes = list(dict.fromkeys(k[:2] for k in keys))

    def side_by_side(figures, i, spec, unit=""):
        return " → ".join("-" if f is None else format(f[i], spec) + unit for f in figures)
    lines = [f"torch {', '.join(dict.fromkeys(run['torch'] for run in runs))}; each cell: µs, % of copy_, "
             f"× the fastest PyTorch variant" + (" (first run → second)" if len(runs) == 2 else ""), "",
             "| op | preset | " + " | ".join(dtypes) + " |", "|---|---|" + "---:|" * len(dtypes)]
    for op, shape in shapes:
        cells = []
        for dtype in dtypes:
            figures = [_figures(run.get((op, shape, dtype), {})) for run in indexed]
            if all(f is None for f in figures):
                cells.append("")
                continue
            cells.append(f"{side_by_side(figures, 0, '.2f')}, {side_by_side(figures, 1, '.0f', '%')}, "
                         f"{side_by_side(figures, 2, '.3f')}")
        lines.append(f"| {op} | {shape} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    paths = sys.argv[1:] if argv is None else argv
    if not 1 <= len(paths) <= 2 or any(p.startswith("-") for p in paths):
        print(__doc__, file=sys.stderr)
        return 2
    print(markdown([json.loads(Path(p).read_text()) for p in paths]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
