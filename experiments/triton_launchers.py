"""A first look at the Triton plugin's launchers on a GPU, called directly (not through the
core): CUDA-graph replays of 20 calls against PyTorch's eager op, at one large size per op,
results checked first; and the eager host cost of one rms_norm launcher call (wall clock
over 200 calls). `backplane bench --backends cuda,triton` is the product's measurement once
the plugin loads through the core; this is the kernels' speed before that.

    python experiments/triton_launchers.py        # from the repository root, on a CUDA machine
"""
import statistics
import sys

import torch

sys.path.insert(0, "backends/triton")
import backplane_triton
K = backplane_triton.kernels()
import triton
print("triton", triton.__version__, "torch", torch.__version__, torch.cuda.get_device_name())
def graph_us(fn, n=20):
    s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3): fn()
    torch.cuda.current_stream().wait_stream(s); torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(n): fn()
    ts = []
    for _ in range(10):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); g.replay(); b.record(); torch.cuda.synchronize(); ts.append(a.elapsed_time(b) * 1000 / n)
    return statistics.median(ts)
def eager_us(fn, n=200):
    for _ in range(10): fn()
    torch.cuda.synchronize()
    import time; t = time.perf_counter()
    for _ in range(n): fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t) / n * 1e6
def row(name, dtype, ours, theirs, nbytes, check):
    check()
    o, t = graph_us(ours), graph_us(theirs)
    print(f"{name:28} {str(dtype)[6:]:9} triton {o:8.1f} us {nbytes/o/1e3:6.0f} GB/s | torch {t:8.1f} us {nbytes/t/1e3:6.0f} GB/s | {t/o:5.2f}x", flush=True)
for dt in (torch.float32, torch.bfloat16):
    e = torch.tensor([], dtype=dt).element_size()
    a = torch.randn(64 << 20, device="cuda", dtype=dt); b = torch.randn_like(a); out = torch.empty_like(a)
    row("add 64M", dt, lambda: K["add"](out, a, b, 1), lambda: torch.add(a, b), 3 * a.numel() * e,
        lambda: (K["add"](out, a, b, 1), torch.testing.assert_close(out, a + b)))
    x = torch.randn(16384, 4096, device="cuda", dtype=dt); w = torch.randn(4096, device="cuda", dtype=dt); y = torch.empty_like(x)
    ref = lambda: torch.nn.functional.rms_norm(x, (4096,), w, 1e-6)
    row("rms_norm 16384x4096", dt, lambda: K["rms_norm"](y, x, w, 1e-6), ref, 2 * x.numel() * e,
        lambda: (K["rms_norm"](y, x, w, 1e-6), torch.testing.assert_close(y, ref(), rtol=2e-2, atol=2e-2)))
    s = torch.randn(4096, 4096, device="cuda", dtype=dt); so = torch.empty_like(s)
    row("softmax 4096x4096", dt, lambda: K["softmax"](so, s), lambda: torch.softmax(s, -1), 2 * s.numel() * e,
        lambda: (K["softmax"](so, s), torch.testing.assert_close(so, torch.softmax(s, -1))))
    g_ = torch.randn(8192, 14336, device="cuda", dtype=dt); u = torch.randn_like(g_); sm = torch.empty_like(g_)
    row("silu_mul 8192x14336", dt, lambda: K["silu_mul"](sm, g_, u), lambda: torch.nn.functional.silu(g_) * u, 3 * g_.numel() * e,
        lambda: (K["silu_mul"](sm, g_, u), torch.testing.assert_close(sm, torch.nn.functional.silu(g_) * u, rtol=2e-2, atol=2e-2)))
    print(f"eager host cost, rms_norm 256x4096 {dt}: ", end="")
    xs = torch.randn(256, 4096, device="cuda", dtype=dt); ys = torch.empty_like(xs)
    print(f"triton launcher {eager_us(lambda: K['rms_norm'](ys, xs, w, 1e-6)):.1f} us/call, torch {eager_us(lambda: torch.nn.functional.rms_norm(xs, (4096,), w, 1e-6)):.1f} us/call")
