"""Host cost of one call, and of one forward+backward through autograd, of Backplane ops
beside PyTorch's, on tiny tensors: the time the Python and C++ layers take when the kernels
take none (a forward+backward row is bound by this wherever it exceeds the GPU's time).

    python bench/host_cost.py --device cuda

Each row: microseconds per call, the best of 5 runs of 2000 calls, each run ending in a
device synchronize.
"""
from __future__ import annotations

import argparse
import sys
import time

import torch
import torch.nn.functional as F

import backplane


def host_us(fn, device, calls=2000, runs=5):
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    for _ in range(100):
        fn()
    sync()
    best = float("inf")
    for _ in range(runs):
        begin = time.perf_counter()
        for _ in range(calls):
            fn()
        sync()
        best = min(best, (time.perf_counter() - begin) / calls)
    return best * 1e6


def cases(device):
    def rand(*shape, grad=False):
        return torch.randn(*shape, device=device).requires_grad_(grad)

    q, cos, sin = rand(1, 1, 2, 8, grad=True), rand(2, 4), rand(2, 4)
    x, w = rand(2, 8, grad=True), rand(8, grad=True)
    a, b = rand(4, grad=True), rand(4, grad=True)
    ad, bd = a.detach(), b.detach()
    gq, gx, ga = torch.ones_like(q), torch.ones_like(x), torch.ones_like(a)
    bp = torch.ops.backplane
    return {
        "backplane add (torch.ops.backplane.add)": lambda: bp.add(ad, bd),
        "torch.add": lambda: torch.add(ad, bd),
        "torch.ops.aten.add.Tensor": lambda: torch.ops.aten.add.Tensor(ad, bd),
        "backplane rotary": lambda: bp.rotary(q.detach(), cos, sin),
        "fwd+bwd backplane rotary": lambda: torch.autograd.grad(bp.rotary(q, cos, sin), (q,), gq),
        "fwd+bwd backplane rms_norm": lambda: torch.autograd.grad(bp.rms_norm(x, w, 1e-6), (x, w), gx),
        "fwd+bwd F.rms_norm": lambda: torch.autograd.grad(F.rms_norm(x, (8,), w, 1e-6), (x, w), gx),
        "fwd+bwd backplane add": lambda: torch.autograd.grad(bp.add(a, b), (a, b), ga),
        "fwd+bwd torch.add": lambda: torch.autograd.grad(torch.add(a, b), (a, b), ga),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda", "npu"])
    args = parser.parse_args(argv)
    backplane.load(args.device)
    print(f"host cost per call on {args.device}, torch {torch.__version__}")
    for name, fn in cases(args.device).items():
        print(f"{name:<42} {host_us(fn, args.device):8.2f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
