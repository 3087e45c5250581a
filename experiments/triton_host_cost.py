"""Host cost of one eager call through the core into a Triton kernel, against the CUDA
plugin's (issue 48's target: at most 2x): rms_norm 256x4096 in float32 and bfloat16, each
plugin preferred in turn in one process, plus the plugin's Python launcher called directly.
A child process repeats the Triton row with BACKPLANE_TRITON_LAUNCH_CACHE=0 (the cache is
read when the plugin loads), so one run shows cached, uncached and CUDA side by side.

Host time: a loop of CALLS calls timed up to its last enqueue (no synchronize inside, the
GPU runs behind), a synchronize between samples; the median of SAMPLES samples per call.
The launch queue (about a thousand launches) is far larger than CALLS, so the loop never
waits for the GPU. Also printed: the launch cache's counters (a hit per call is expected).

    python experiments/triton_host_cost.py      # from the repository root, on a CUDA machine
"""
import json
import os
import statistics
import subprocess
import sys
import time
import warnings

import torch

CALLS, SAMPLES, ROWS, COLS = 200, 25, 256, 4096


def host_us(fn):
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(SAMPLES):
        start = time.perf_counter()
        for _ in range(CALLS):
            fn()
        samples.append((time.perf_counter() - start) / CALLS * 1e6)
        torch.cuda.synchronize()
    return statistics.median(samples)


def measure(plugins):
    import backplane
    from backplane import triton_kind

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loaded = {p.name: p for p in backplane.load(*plugins)}
    rows = {}
    for dtype in (torch.float32, torch.bfloat16):
        x = torch.randn(ROWS, COLS, device="cuda", dtype=dtype)
        w = torch.randn(COLS, device="cuda", dtype=dtype)
        for name in plugins:
            if loaded[name].status != "loaded":
                rows[f"{name} {dtype}"] = f"not loaded: {loaded[name].reason}"
                continue
            with backplane.prefer("rms_norm", name):
                rows[f"{name} {dtype}"] = host_us(lambda: torch.ops.backplane.rms_norm(x, w, 1e-6))
        if "triton" in plugins and loaded["triton"].status == "loaded":
            launcher, y = triton_kind.launcher_of(loaded["triton"], "rms_norm"), torch.empty_like(x)
            rows[f"triton launcher alone {dtype}"] = host_us(lambda: launcher(y, x, w, 1e-6))
    native = triton_kind._native
    rows["cache"] = native.launch_cache_stats().get("backplane::rms_norm@triton") if native else None
    return rows


def shown(value):
    return f"{value:.1f}" if isinstance(value, float) else str(value)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        print(json.dumps(measure(["triton"])))
        return
    print("torch", torch.__version__, torch.cuda.get_device_name(), flush=True)
    cached = measure(["cuda", "triton"])
    child = subprocess.run([sys.executable, __file__, "--child"], capture_output=True, text=True,
                           env={**os.environ, "BACKPLANE_TRITON_LAUNCH_CACHE": "0"})
    uncached = json.loads(child.stdout.strip().splitlines()[-1]) if child.returncode == 0 else {}
    if child.returncode != 0:
        print("the uncached child failed:", child.stderr[-2000:])
    for dtype in (torch.float32, torch.bfloat16):
        cuda, triton = cached.get(f"cuda {dtype}"), cached.get(f"triton {dtype}")
        ratio = f"{triton / cuda:.2f}x" if isinstance(cuda, float) and isinstance(triton, float) else "-"
        print(f"rms_norm {ROWS}x{COLS} {str(dtype)[6:]:9} us/call host: cuda {shown(cuda)}  triton cached "
              f"{shown(triton)} ({ratio})  triton uncached {shown(uncached.get(f'triton {dtype}'))}  launcher alone "
              f"{shown(cached.get(f'triton launcher alone {dtype}'))}", flush=True)
    print("launch cache (cached run):", cached["cache"])
    print("launch cache (uncached run):", uncached.get("cache"))


if __name__ == "__main__":
    main()
