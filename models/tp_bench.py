"""The training step of models.train_tp's tensor-parallel decoder on Backplane ops beside
the same model on PyTorch's own ops (models.train's Ops flag, flipped on one model: the
same weights, shards, optimizer and memory), timed in one run.

One step is forward, backward and an AdamW step. The two kinds alternate step by step
after the warm-up, so drift (clocks, heat) falls on both alike; each step starts after a
barrier and a device synchronize and ends at a synchronize (perf_counter). A rank's time
is the median of its steps; the step's time is the slowest rank's median. Prints a
markdown table row for bench/results/, with the command that made it.

The weights, gradients and AdamW state are all in --dtype (no float32 master copy): at the
default sizes about 0.94 billion parameters per rank of two, 7.5 GB of them in bfloat16,
15 GB in float32, besides the activations.
"""
from __future__ import annotations

import datetime
import statistics
import time

import torch
import torch.distributed as dist

from .distributed import device_name
from .tp_decoder import LlamaDecoder, Shape, loss_of, parallelize, token_batch

COLUMNS = ("device", "torch", "date", "sizes", "dtype", "PyTorch ops ms", "Backplane ops ms", "PyTorch / Backplane")


def synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def step_ms(step, device) -> float:
    if device.type == "cuda":
        dist.barrier(device_ids=[device.index])
    else:
        dist.barrier()
    synchronize(device)
    start = time.perf_counter()
    step()
    synchronize(device)
    return (time.perf_counter() - start) * 1e3


def slowest_rank(ms: float, device) -> float:
    t = torch.tensor([ms], dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.item()


def bench(shape: Shape, batch: int, dtype, warmup: int, repeats: int, device, mesh, log, argv) -> None:
    torch.manual_seed(0)
    with torch.device(device):
        model = parallelize(LlamaDecoder(shape, use_backplane=True).to(dtype), mesh)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
    tokens, targets = token_batch(shape, batch, device)

    def step():
        opt.zero_grad(set_to_none=True)
        loss_of(model(tokens), targets).backward()
        opt.step()

    with torch.no_grad():  # the same weights through both kinds of ops: their losses, for the reader
        losses = {}
        for use_backplane in (True, False):
            model.ops.use_backplane = use_backplane
            losses[use_backplane] = loss_of(model(tokens), targets).item()
    times = {True: [], False: []}
    for i in range(warmup + repeats):
        for use_backplane in (True, False):
            model.ops.use_backplane = use_backplane
            ms = step_ms(step, device)
            if i >= warmup:
                times[use_backplane].append(ms)
    ours, theirs = (slowest_rank(statistics.median(times[b]), device) for b in (True, False))
    world = dist.get_world_size()
    sizes = (f"TP {world}: dim {shape.dim}, hidden {shape.hidden}, heads {shape.heads}, layers {shape.layers}, "
             f"vocab {shape.vocab}, seq {shape.seq}, batch {batch}")
    log(f"loss before timing, same weights: Backplane ops {losses[True]:.6f}, PyTorch ops {losses[False]:.6f}")
    if device.type == "cuda":
        log(f"peak memory allocated on rank 0: {torch.cuda.max_memory_allocated(device) / 2**30:.1f} GiB")
    log(f"median of {repeats} steps (forward, backward, AdamW) after {warmup} warm-up steps each, slowest rank:")
    log("| " + " | ".join(COLUMNS) + " |")
    log("|" + "---|" * len(COLUMNS))
    log(f"| {world}x {device_name(device)} | {torch.__version__} | {datetime.date.today().isoformat()} | {sizes} | "
        f"{str(dtype).removeprefix('torch.')} | {theirs:.2f} | {ours:.2f} | {theirs / ours:.3f}x |")
    log(f"command: torchrun --standalone --nproc-per-node {world} -m models.train_tp {' '.join(argv)}")
