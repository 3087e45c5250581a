"""One training step (forward, backward, AdamW) of models.train's decoder LM with
Backplane ops against its pure-PyTorch twin, eager and torch.compile'd, timed with CUDA
events (median of N after warm-up).

    python -m models.step_time [--batch 32] [--repeats 50]
"""
from __future__ import annotations

import argparse
import statistics
import sys

import torch

import backplane

from .train import DecoderLM, batch, loss_of


def median_step_ms(step, repeats, warmup=5):
    """Median CUDA-event time of `step()` (one training step) over `repeats` calls, after
    `warmup` calls (the first compile, or warm up)."""
    times = []
    for i in range(repeats + warmup):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        step()
        end.record()
        torch.cuda.synchronize()
        if i >= warmup:
            times.append(start.elapsed_time(end))
    return statistics.median(times)


def training_step(model, loss_fn, lr=3e-3):
    """A function taking one AdamW step of `model` on loss_fn()."""
    opt = torch.optim.AdamW(model.parameters(), lr=lr)

    def step():
        opt.zero_grad(set_to_none=True)
        loss_fn().backward()
        opt.step()

    return step


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m models.step_time", description=__doc__.split("\n\n")[0])
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--repeats", type=int, default=50)
    args = p.parse_args(argv)
    backplane.load("cuda")
    tokens, targets = batch(args.batch, torch.Generator().manual_seed(1), "cuda")
    for compiled in (False, True):
        row = []
        for use_backplane in (True, False):
            model = DecoderLM(use_backplane=use_backplane).cuda()
            run = torch.compile(model) if compiled else model
            row.append(median_step_ms(training_step(model, lambda run=run: loss_of(run, tokens, targets)), args.repeats))
        print(f"{'compiled' if compiled else 'eager':8} step: Backplane {row[0]:.3f} ms, PyTorch {row[1]:.3f} ms "
              f"({row[1] / row[0]:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
