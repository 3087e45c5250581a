"""Times every launch configuration of the Triton plugin's rms_norm_backward at one shape
(a wider set than the tuner's), beside the CUDA plugin's kernel, to find why bfloat16
8192x4096 reads 0.83x the CUDA plugin (bench/results/triton/README.md).

    PYTHONPATH=python:backends/triton BACKPLANE_LIB_DIR=build/lib \
        python experiments/triton_rms_norm_backward_sweep.py [--rows 8192] [--cols 4096] [--dtype bfloat16]
"""
import argparse
import itertools

import torch
import triton.testing

import backplane
import backplane_triton.kernels.rms_norm_backward as rnb
from backplane_triton import tuning
from backplane_triton.rows import Config


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, default=8192)
    p.add_argument("--cols", type=int, default=4096)
    p.add_argument("--dtype", default="bfloat16")
    a = p.parse_args()
    dtype = getattr(torch, a.dtype)
    g = torch.randn(a.rows, a.cols, device="cuda", dtype=dtype)
    x = torch.randn_like(g)
    w = torch.randn(a.cols, device="cuda", dtype=dtype)
    dx, dw = torch.empty_like(x), torch.empty_like(w)
    moved = 3 * x.numel() * x.element_size()

    def report(name, ms):
        print(f"{name:48} {ms * 1e3:8.1f} us  {moved / ms / 1e6:7.0f} GB/s", flush=True)

    backplane.load("cuda")
    ms = triton.testing.do_bench(lambda: torch.ops.backplane.rms_norm_backward(g, x, w, 1e-6), warmup=25, rep=200)
    report("cuda plugin", ms)

    wide = []
    for bm, warps, per_sm, stages in itertools.product((1, 2, 4), (4, 8, 16), (1, 2, 4, 8), (1, 2)):
        wide.append(Config(bm, triton.next_power_of_2(a.cols), warps, per_sm, stages))
    rnb._with_grids = lambda configs, looped: wide

    def timed_pick(key, candidates, launch):
        results = []
        for c in candidates:
            try:
                results.append((triton.testing.do_bench(lambda: launch(c), warmup=10, rep=100), c))
            except Exception as e:  # noqa: BLE001
                print(f"{str(c):48} failed: {str(e).splitlines()[0][:80]}")
        results.sort(key=lambda r: r[0])
        for ms, c in results[:12]:
            report(f"triton bm={c.block_m} warps={c.warps} per_sm={c.per_sm} stages={c.stages}", ms)
        return results[0][1]

    tuning.pick = timed_pick
    rnb.rms_norm_backward(dx, dw, g, x, w, 1e-6)


if __name__ == "__main__":
    main()
