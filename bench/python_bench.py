"""Python-side figures the C++ suite cannot give:

1. per-call cost of a backplane op from Python on a 1-element tensor, beside the same
   call through torch.ops.aten (host time; no synchronization per call);
2. rms_norm beside PyTorch eager (F.rms_norm and the composite formula) and
   torch.compile of the composite formula, with the device's copy bandwidth.

    python bench/python_bench.py --device cpu
    python bench/python_bench.py --device cuda --json out.json

Device times come from device events (CUDA) or the wall clock after a synchronize
(CPU); each figure is the median of several timed batches after a warm-up.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
import backplane  # noqa: E402


def per_call_us(fn, calls=20000, rounds=15):
    """Median host time of one call, in microseconds (interleave callers to share noise)."""
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(times)


def overhead(device):
    a = torch.ones(1, device=device)
    b = torch.ones(1, device=device)
    ours, aten = torch.ops.backplane.add, torch.ops.aten.add
    for _ in range(2000):  # warm-up
        ours(a, b), aten(a, b)
    rows = []
    for _ in range(3):
        t_ours = per_call_us(lambda: ours(a, b))
        t_aten = per_call_us(lambda: aten(a, b))
        rows.append((t_ours, t_aten))
    t_ours = statistics.median(r[0] for r in rows)
    t_aten = statistics.median(r[1] for r in rows)
    if device == "cuda":
        torch.cuda.synchronize()
    return {"backplane_add_us": t_ours, "aten_add_us": t_aten, "difference_us": t_ours - t_aten}


def device_ms(fn, device, reps=50, rounds=7):
    """Median milliseconds per call of fn on device."""
    for _ in range(5):
        fn()
    times = []
    for _ in range(rounds):
        if device == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(reps):
                fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / reps)
        else:
            begin = time.perf_counter()
            for _ in range(reps):
                fn()
            times.append((time.perf_counter() - begin) * 1e3 / reps)
    return statistics.median(times)


def composite(x, w, eps: float = 1e-6):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * w


def rms_norm_rows(device, shapes, dtypes):
    compiled = torch.compile(composite)
    rows = []
    for tokens, hidden in shapes:
        for dtype in dtypes:
            x = torch.randn(tokens, hidden, device=device, dtype=dtype)
            w = torch.rand(hidden, device=device, dtype=dtype) + 0.5
            y = torch.empty_like(x)
            moved = 2 * x.nbytes + w.nbytes  # read x and w once, write y once
            impls = {
                "backplane": lambda: torch.ops.backplane.rms_norm(x, w, 1e-6),
                "F.rms_norm": lambda: torch.nn.functional.rms_norm(x, (hidden,), w, 1e-6),
                "composite": lambda: composite(x, w),
                "compile(composite)": lambda: compiled(x, w),
                "copy_": lambda: y.copy_(x),
            }
            row = {"tokens": tokens, "hidden": hidden, "dtype": str(dtype).replace("torch.", "")}
            for name, fn in impls.items():
                ms = device_ms(fn, device)
                traffic = 2 * x.nbytes if name == "copy_" else moved
                row[name] = {"ms": ms, "GBps": traffic / ms / 1e6}
            rows.append(row)
    return rows


def elementwise_rows(device, sizes):
    """identity_conv and add beside PyTorch's clone/add and copy_, float32; GB/s counts
    each input read once and the output written once."""
    rows = []
    for n in sizes:
        x = torch.randn(n, device=device)
        y = torch.randn(n, device=device)
        out = torch.empty_like(x)
        impls = {
            "identity_conv": (lambda: torch.ops.backplane.identity_conv(x), 2),
            "clone": (lambda: x.clone(), 2),
            "add": (lambda: torch.ops.backplane.add(x, y), 3),
            "torch.add": (lambda: torch.add(x, y), 3),
            "copy_": (lambda: out.copy_(x), 2),
        }
        row = {"elements": n, "MiB": n * 4 / 2**20}
        for name, (fn, tensors) in impls.items():
            ms = device_ms(fn, device, reps=20 if n >= 1 << 24 else 50)
            row[name] = {"ms": ms, "GBps": tensors * n * 4 / ms / 1e6}
        rows.append(row)
    return rows


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--json", help="write the figures here too")
    parser.add_argument("--only", choices=["elementwise"], help="run only this part")
    parser.add_argument("--plot", help="draw GB/s against size (elementwise rows) into this PNG")
    parser.add_argument("--from-json", help="with --plot: draw from a saved --json instead of measuring")
    args = parser.parse_args()
    if args.from_json:
        plot(json.loads(Path(args.from_json).read_text()), args.plot)
        return
    backplane.load(args.device)
    result = {
        "device": torch.cuda.get_device_name() if args.device == "cuda" else "cpu",
        "torch": torch.__version__,
        "date": time.strftime("%Y-%m-%d"),
    }
    print(f"device {result['device']}, torch {result['torch']}, {result['date']}")
    if args.only is None:
        result["overhead"] = overhead(args.device)
        shapes = [(16384, 4096), (16384, 8192)] if args.device == "cuda" else [(256, 4096), (256, 8192)]
        result["rms_norm"] = rms_norm_rows(args.device, shapes, [torch.float32, torch.bfloat16])
        print_overhead_and_norm(result)
    sizes = [1 << 20, 1 << 24, 1 << 26, 1 << 28] if args.device == "cuda" else [1 << 20]
    result["elementwise"] = elementwise_rows(args.device, sizes)
    print_elementwise(result)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    if args.plot:
        plot(result, args.plot)


def plot(result, path):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("--plot needs matplotlib (pip install matplotlib); no plot written")
        return
    rows = result["elementwise"]
    mib = [r["MiB"] for r in rows]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, style in [("identity_conv", "o-"), ("clone", "o--"), ("add", "s-"), ("torch.add", "s--"), ("copy_", "k:")]:
        ax.plot(mib, [r[name]["GBps"] for r in rows], style, label=name)
    for r in result.get("rms_norm", []):
        ax.plot([2 * r["tokens"] * r["hidden"] * (4 if r["dtype"] == "float32" else 2) / 2**20],
                [r["backplane"]["GBps"]], "^", label=f"rms_norm {r['tokens']}x{r['hidden']} {r['dtype']}")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("tensor size (MiB, one input)")
    ax.set_ylabel("GB/s (bytes read + written)")
    ax.set_title(f"backplane vs PyTorch\n{result['device']}, torch {result['torch']}, {result['date']}", fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"plot written to {path}")


def print_overhead_and_norm(result):
    o = result["overhead"]
    print(f"per call, 1 element: backplane.add {o['backplane_add_us']:.2f} us, aten.add {o['aten_add_us']:.2f} us, "
          f"difference {o['difference_us']:+.2f} us")
    names = ["backplane", "F.rms_norm", "composite", "compile(composite)", "copy_"]
    print("\n| tokens x hidden | dtype | " + " | ".join(f"{n} GB/s" for n in names) + " | backplane % of copy_ |")
    print("|---|---|" + "---|" * (len(names) + 1))
    for r in result["rms_norm"]:
        cells = " | ".join(f"{r[n]['GBps']:.0f}" for n in names)
        share = 100 * r["backplane"]["GBps"] / r["copy_"]["GBps"]
        print(f"| {r['tokens']} x {r['hidden']} | {r['dtype']} | {cells} | {share:.0f}% |")


def print_elementwise(result):
    names = ["identity_conv", "clone", "add", "torch.add", "copy_"]
    print("\n| float32 elements (MiB) | " + " | ".join(f"{n} GB/s" for n in names)
          + " | identity % of copy_ | add % of copy_ |")
    print("|---|" + "---|" * (len(names) + 2))
    for r in result["elementwise"]:
        cells = " | ".join(f"{r[n]['GBps']:.0f}" for n in names)
        ident = 100 * r["identity_conv"]["GBps"] / r["copy_"]["GBps"]
        add = 100 * r["add"]["GBps"] / r["copy_"]["GBps"]
        print(f"| {r['elements']} ({r['MiB']:.0f}) | {cells} | {ident:.0f}% | {add:.0f}% |")


if __name__ == "__main__":
    main()
