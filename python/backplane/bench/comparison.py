"""Two runs (or two backends of one run) row by row: the change of the median and a
two-sided Mann-Whitney U test on the repetitions, as Google Benchmark's compare.py does."""
from __future__ import annotations

import math

from .results import pass_of, rows


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
    (ValueError): the two measure different things (kernels alone, kernels and launches);
    so is a forward run against a forward+backward one (backplane bench --backward)."""
    if pass_of(base) != pass_of(new):
        raise ValueError(f"the base run times {pass_of(base)}, the new one {pass_of(new)}: compare runs of the same "
                         "pass (both with --backward, or neither)")

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
