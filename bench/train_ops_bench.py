"""Forward + backward of the training ops, side by side in one process: the Backplane op
(its registry backward), PyTorch eager (the composite, and F.rms_norm for rms_norm) and
torch.compile of the composite, with the device's copy_ bandwidth measured in the same run.

    python bench/train_ops_bench.py --device cuda [--dtypes float32,bfloat16] [--json out.json] [--profile]

--profile also prints, per op and dtype, the device kernels one forward+backward of the
Backplane op runs and their times (torch.profiler): where a slow row's time goes.

GB/s (10^9 bytes) counts the minimum each pass must move, as the issue defines it:
rms_norm 5 tensors of x's size (forward reads x, writes y; backward reads grad and x,
writes dx), silu_mul 8 (2 + 1 forward, 3 + 2 backward), rotary 4 (1 + 1, 1 + 1), softmax 5
(1 + 1 forward; backward reads grad and y, writes dx); the small weight and cos/sin caches
are left out. --forward-only times the forward alone (bytes: 2 + 1 for silu_mul, 2 for the
others). Times: CUDA events around a batch of calls, median
of several batches, after a warm-up (the CPU: wall clock).

--cuda-graph replays each variant's step from a CUDA graph (captured after a warm-up on a
side stream): one launch a step, so the time is the device's and not the host's. Without
it a step is as slow as its Python and autograd calls where those take longer than the
kernels (on the GPU machine, a forward+backward of torch.add on tiny tensors costs about
100 us of host time).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
import backplane  # noqa: E402
from python_bench import device_ms  # noqa: E402  (bench/ is on sys.path when run as a script)

EPS = 1e-6


def plain_rotary(x, cos, sin):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


def workloads(device, dtype, rows=8192):
    """(op, shape text, bytes moved, inputs needing grad, {variant: forward fn}); `rows`
    scales the leading dimension (8192: the issue's shapes)."""
    g = torch.Generator(device="cpu").manual_seed(0)

    def rand(*shape, grad=True):
        return torch.randn(*shape, generator=g).to(device=device, dtype=dtype).requires_grad_(grad)

    size = torch.tensor([], dtype=dtype).element_size()
    x, w = rand(rows, 4096), rand(4096)
    yield ("rms_norm", f"{rows}x4096", 5 * x.numel() * size, (x, w), {
        "backplane": lambda: torch.ops.backplane.rms_norm(x, w, EPS),
        "F.rms_norm": lambda: F.rms_norm(x, (4096,), w, EPS),
        "eager composite": lambda: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * w,
    })
    gate, up = rand(rows, 14336), rand(rows, 14336)
    yield ("silu_mul", f"{rows}x14336", 8 * gate.numel() * size, (gate, up), {
        "backplane": lambda: torch.ops.backplane.silu_mul(gate, up),
        "eager composite": lambda: F.silu(gate) * up,
    })
    q = rand(4, 32, rows // 4, 128)
    angles = torch.rand(rows // 4, 64, generator=g).to(device) * 100
    cos, sin = angles.cos().to(dtype), angles.sin().to(dtype)
    yield ("rotary", f"4x32x{rows // 4}x128", 4 * q.numel() * size, (q,), {
        "backplane": lambda: torch.ops.backplane.rotary(q, cos, sin),
        "eager composite": lambda: plain_rotary(q, cos, sin),
    })
    # softmax: attention scores and one decoding step's logits (the registry's bench presets).
    for shape in ((rows // 2, 4096), (32, 32000)):
        s = rand(*shape)
        yield ("softmax", "x".join(map(str, shape)), 5 * s.numel() * size, (s,), {
            "backplane": lambda s=s: torch.ops.backplane.softmax(s),
            "torch.softmax": lambda s=s: torch.softmax(s, -1),
            "eager composite": lambda s=s: (s - s.amax(-1, keepdim=True)).exp() / (s - s.amax(-1, keepdim=True)).exp().sum(-1, keepdim=True),
        })


def median_us(fn, device):
    """Median microseconds per call: python_bench's device timer (CUDA events), 10 calls a batch."""
    return device_ms(fn, device, reps=10, rounds=7) * 1e3


def fwd_bwd(forward, inputs):
    out = forward()
    grad = torch.ones_like(out)

    def step():
        torch.autograd.grad(forward(), inputs, grad)
    return step


def graphed(step):
    """`step` captured in a CUDA graph after a warm-up on a side stream; returns its replay."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    return graph.replay


def profile_table(step, device) -> str:
    """The device kernels of one call of `step` (after a warm-up), with their times."""
    from torch.profiler import ProfilerActivity, profile

    step()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    with profile(activities=activities) as prof:
        step()
        if device == "cuda":
            torch.cuda.synchronize()
    sort = "cuda_time_total" if device == "cuda" else "cpu_time_total"
    return prof.key_averages().table(sort_by=sort, row_limit=8, max_name_column_width=70)


def copy_gbps(device, dtype):
    src = torch.empty(256 * 2**20 // torch.tensor([], dtype=dtype).element_size(), dtype=dtype, device=device)
    dst = torch.empty_like(src)
    us = median_us(lambda: dst.copy_(src), device)
    return 2 * src.numel() * src.element_size() / us / 1e3


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtypes", default="float32,bfloat16")
    parser.add_argument("--rows", type=int, default=8192, help="leading dimension (default: the issue's shapes)")
    parser.add_argument("--json")
    parser.add_argument("--profile", action="store_true", help="print each Backplane op's kernels (torch.profiler)")
    parser.add_argument("--forward-only", action="store_true", help="time the forward pass alone")
    parser.add_argument("--ops", default="", help="these ops only (default: all)")
    parser.add_argument("--cuda-graph", action="store_true", help="time replays of a CUDA graph of each step")
    args = parser.parse_args(argv)
    if args.cuda_graph and args.device != "cuda":
        parser.error("--cuda-graph needs --device cuda")
    backplane.load(args.device)
    rows, to_profile = [], []
    print(f"{torch.cuda.get_device_name() if args.device == 'cuda' else 'cpu'}, torch {torch.__version__}")
    for dtype_name in args.dtypes.split(","):
        dtype = getattr(torch, dtype_name)
        copy = copy_gbps(args.device, dtype)
        print(f"\n{dtype_name}: copy_ {copy:.0f} GB/s")
        print(f"{'op':<10} {'shape':<15} {'variant':<18} {'fwd us' if args.forward_only else 'fwd+bwd us':>11} {'GB/s':>7} {'% copy':>7}  speedup over the best PyTorch"
              + ("  (CUDA graph replays)" if args.cuda_graph else ""))
        for op, shape, nbytes, inputs, variants in workloads(args.device, dtype, args.rows):
            if args.ops and op not in args.ops.split(","):
                continue
            variants["torch.compile"] = torch.compile(variants["eager composite"])
            if args.forward_only:
                nbytes = nbytes * 3 // 8 if op == "silu_mul" else nbytes * 2 // (4 if op == "rotary" else 5)
                steps = dict(variants)
            else:
                steps = {name: fwd_bwd(fn, inputs) for name, fn in variants.items()}
            timed = {name: graphed(step) for name, step in steps.items()} if args.cuda_graph else steps
            times = {name: median_us(step, args.device) for name, step in timed.items()}
            if args.profile:  # after every timing: the profiler slows the launches that follow it
                to_profile.append((f"{op} {shape} {dtype_name}", steps["backplane"]))
            best_torch = min(t for name, t in times.items() if name != "backplane")
            for name, us in times.items():
                gbps = nbytes / us / 1e3
                speedup = f"{best_torch / us:.2f}x" if name == "backplane" else ""
                print(f"{op:<10} {shape:<15} {name:<18} {us:>11.1f} {gbps:>7.0f} {100 * gbps / copy:>6.0f}%  {speedup}")
                rows.append({"op": op, "shape": shape, "dtype": dtype_name, "variant": name, "us": us,
                             "gbps": gbps, "copy_gbps": copy, "passes": "forward" if args.forward_only else "forward+backward",
                             "cuda_graph": args.cuda_graph})
            torch._dynamo.reset()
    for what, step in to_profile:
        print(f"\n{what}, Backplane, one {'forward' if args.forward_only else 'forward+backward'}:\n"
              f"{profile_table(step, args.device)}")
    if args.json:
        Path(args.json).write_text(json.dumps({"torch": torch.__version__, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
