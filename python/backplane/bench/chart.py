"""A run's bandwidth as a PNG (matplotlib, imported only here)."""
from __future__ import annotations

import io
from pathlib import Path

from .results import machine, pass_of, rows, shared_rows_owner
from .tables import table


def plot(results: dict, path) -> None:
    """GB/s of backplane and the reference per op/shape/dtype and backend, with the
    device's copy_ bandwidth drawn as the roofline; one PNG, its title naming the pass."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lines = [t for t in table(results) if t["gbps"] and t["impl"] == "backplane"]  # the kernels, one bar each
    if not lines:
        raise ValueError("nothing to plot: no backplane row has a bandwidth")
    by = {(r.op, r.backend, r.shape, r.dtype, r.impl): r for r in rows(results)}

    def gbps_of(t, impl):  # the device's rows, wherever they were timed
        row = by.get((t["op"], t["backend"], t["shape"], t["dtype"], impl)) or by.get(
            (t["op"], shared_rows_owner(results, t["backend"]), t["shape"], t["dtype"], impl))
        return getattr(row, "gbps", None) or 0

    labels = [f"{t['op']}\n{t['shape']}\n{t['dtype']}\n{t['backend']}" for t in lines]
    mine = [t["gbps"] for t in lines]
    ref = [gbps_of(t, "reference") for t in lines]
    copy = [gbps_of(t, "copy_") for t in lines]
    fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(lines)), 5))
    x = range(len(lines))
    ax.bar([i - 0.2 for i in x], mine, width=0.4, label="backplane")
    ax.bar([i + 0.2 for i in x], ref, width=0.4, label="PyTorch reference")
    ax.scatter(list(x), copy, marker="_", s=600, color="black", label="copy_ (roofline)", zorder=3)
    ax.set_xticks(list(x))
    ax.set_xticklabels(labels, fontsize=7)
    ax.set_ylabel("GB/s (1e9 bytes)")
    ctx = results.get("context", {})
    ax.set_title(f"backplane bench {pass_of(results)} - {machine(ctx).replace('`', '')} "
                 f"torch {ctx.get('torch_version', '')} {ctx.get('date', '')}", fontsize=9)
    ax.legend()
    fig.tight_layout()
    png = io.BytesIO()  # written here, not by savefig, so a failed write raises (/dev/full)
    fig.savefig(png, format="png", dpi=120)
    plt.close(fig)
    Path(path).write_bytes(png.getvalue())
