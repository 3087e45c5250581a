"""fp32 add of a transposed 8192^2 tensor and a contiguous one, timed as a client outside the
repository would: backplane::add against torch.add, eager (CUDA events around 20 back-to-back
calls) and as CUDA-graph replays (20 calls captured), medians of 15, the two timed in
alternation, results checked equal. Needs the CUDA plugin and a GPU.

    PYTHONPATH=python BACKPLANE_LIB_DIR=build/lib python experiments/mixed_layout_add.py
"""
import statistics

import torch

import backplane

backplane.load("cuda")
n = 8192
x = torch.randn(n, n, device="cuda")
t = torch.randn(n, n, device="cuda").t()
ours = torch.ops.backplane.add
def per_call_us(fn, graph):
    if graph:
        s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3): fn()
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(20): fn()
        run = g.replay
    else:
        def run():
            for _ in range(20): fn()
    for _ in range(3): run()
    def once():
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); run(); b.record(); torch.cuda.synchronize()
        return a.elapsed_time(b) * 1000 / 20
    return once
bytes_moved = 3 * n * n * 4
for graph in (False, True):
    for name, args in (("transposed + contiguous", (t, x)), ("contiguous + transposed", (x, t))):
        fns = [per_call_us(lambda: ours(*args, alpha=1), graph), per_call_us(lambda: torch.add(*args), graph)]
        times = [[], []]
        for _ in range(15):
            for f, ts in zip(fns, times): ts.append(f())
        o, r = (statistics.median(ts) for ts in times)
        assert torch.equal(ours(*args, alpha=1), torch.add(*args))
        print(f"{'graph' if graph else 'eager':5} {name}: backplane {o:.1f} us ({bytes_moved / o / 1e3:.0f} GB/s), "
              f"torch.add {r:.1f} us ({bytes_moved / r / 1e3:.0f} GB/s): {r / o:.3f}x; out strides {ours(*args, alpha=1).stride()} vs {torch.add(*args).stride()}")
