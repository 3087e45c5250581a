"""Why `bench --mode compile` read add's selected row (torch.ops.backplane.add compiled, the
selection sending it to `inductor`) at 0.89x torch.compile of its reference at 1M elements,
float32 (bench/results/compile-selection/README.md): both compiled as the bench compiles
them, their generated code written out side by side, then timed in alternation as CUDA-graph
replays (20 calls a graph, medians of 15). Needs the CUDA plugin and a GPU.

    PYTHONPATH=python BACKPLANE_LIB_DIR=build/lib python experiments/compiled_add_probe.py OUT_DIR
"""
import statistics
import sys
import tempfile
from pathlib import Path

import torch
from torch._inductor.utils import run_and_get_code

import backplane
from backplane.bench.compiled import compile_reference

out = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
out.mkdir(parents=True, exist_ok=True)
selection = Path(tempfile.mkdtemp()) / "add_inductor.yaml"
selection.write_text("backplane_selection: 1\nops:\n  - op: add\n    dispatch_key: CUDA\n"
                     "    buckets:\n      - {plugin: inductor}\n")
backplane.load("cuda", selection=selection)

n = 1 << 20
a, b = (torch.randn(n, device="cuda") for _ in range(2))
candidates = {
    "reference": compile_reference(lambda x, y: x + 1.0 * y),  # add's reference, alpha fixed as the bench fixes it
    "selected": compile_reference(lambda x, y: torch.ops.backplane.add(x, y, alpha=1.0)),
    "reference_plain": compile_reference(lambda x, y: x + y),
}
for name, fn in candidates.items():
    result, codes = run_and_get_code(fn, a, b)
    torch.testing.assert_close(result, a + b, rtol=0, atol=0)
    (out / f"{name}.py").write_text("\n\n# ---- next module ----\n\n".join(codes))
    print(f"{name}: {len(codes)} module(s), {sum(c.count('@triton.jit') for c in codes)} Triton kernel(s)")
print("choices:", backplane.compile.resolutions())


def replay_us(fn):
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn(a, b)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(20):
            fn(a, b)

    def once():
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end) * 1000 / 20
    return once


timers = {name: replay_us(fn) for name, fn in candidates.items()}
for t in timers.values():
    t()
times = {name: [] for name in timers}
for _ in range(15):
    for name, t in timers.items():
        times[name].append(t())
ref = statistics.median(times["reference"])
for name, ts in times.items():
    m = statistics.median(ts)
    print(f"{name:16} {m:7.3f} us a call (replayed), {12 * n / m / 1e3:6.0f} GB/s, reference / this {ref / m:.3f}x")
