"""A tensor-parallel Llama-style decoder (models.tp_decoder, torchtitan's plan) whose norms,
residual adds, rotary and silu_mul run on Backplane ops, checked against one device; or,
with --bench, timed beside the same TP model on PyTorch's own ops (models.tp_bench).

    torchrun --nproc-per-node 2 -m models.train_tp [--device cuda|cpu] [--steps 2]
    torchrun --nproc-per-node 2 -m models.train_tp --bench [--dim 4096 --hidden 11008 ...]

The check, in float32: every rank builds the same model (one seed), keeps a plain copy on
its device and shards the other over all ranks, and feeds both the same batch. The first
TP forward and backward must issue exactly the plan's collectives (CommDebugMode; a
sharding rule that gathers where the math need not shows here), and the norms, residual
adds and norms' backward must reach Backplane's ops as DTensors. Then, at every step, the loss must equal the copy's, every
parameter's gradient, gathered whole, must equal the copy's, and both take an AdamW step;
after the last step the loss must agree once more. Tolerance rtol 1e-4, atol 1e-5: the
row-parallel projections sum their halves in another order than one matmul does.
Prints one line per check; the last, on success, starts with "TP check passed".
"""
from __future__ import annotations

import argparse
import copy
import sys
from collections import Counter
from typing import NoReturn

import torch
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor
from torch.distributed.tensor.debug import CommDebugMode
from torch.utils._python_dispatch import TorchDispatchMode

from .distributed import device_name, finish, largest_difference, start
from .tp_bench import bench
from .tp_decoder import (LlamaDecoder, Shape, backward_collectives, forward_collectives, loss_of, parallelize,
                         token_batch)

TOLERANCE = dict(rtol=1e-4, atol=1e-5)
CHECK_SHAPE = Shape(vocab=64, dim=64, heads=4, hidden=128, layers=2, seq=16)
BENCH_SHAPE = Shape(vocab=32000, dim=4096, heads=32, hidden=11008, layers=8, seq=2048)


class BackplaneOpsOnDTensors(TorchDispatchMode):
    """Counts the backplane ops called with DTensor arguments, by name."""

    def __init__(self):
        super().__init__()
        self.counts = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if any(issubclass(t, DTensor) for t in types):
            if getattr(func, "namespace", None) == "backplane":
                self.counts[func._opname] += 1
            return NotImplemented  # lets DTensor run the op; its local calls come back here as plain tensors
        return func(*args, **(kwargs or {}))


def traced(what: str, run, collectives: int, backplane_ops: Counter):
    """run(), required to issue exactly `collectives` collectives and to call exactly
    `backplane_ops` on DTensors; returns run()'s result and a line saying what it issued."""
    with CommDebugMode() as comm, BackplaneOpsOnDTensors() as seen:
        result = run()
    if comm.get_total_counts() != collectives:
        raise RuntimeError(f"the TP {what} issued {comm.get_total_counts()} collectives "
                           f"({dict(comm.get_comm_counts())}), expected the plan's {collectives}: a sharding rule "
                           "gathers or reduces more than the math needs")
    if seen.counts != backplane_ops:
        raise RuntimeError(f"the TP {what} called backplane ops with DTensors {dict(seen.counts)}, "
                           f"expected {dict(backplane_ops)}")
    return result, (f"{collectives} collectives (the plan's), backplane ops on DTensors "
                    f"{dict(sorted(seen.counts.items()))}")


def check(shape: Shape, batch: int, steps: int, use_backplane: bool, device, mesh, log) -> None:
    torch.manual_seed(0)
    with torch.device(device):
        single = LlamaDecoder(shape, use_backplane)
    tp = parallelize(copy.deepcopy(single), mesh)
    tokens, targets = token_batch(shape, batch, device)
    norms, layers = 2 * shape.layers + 1, shape.layers
    ops = ((Counter(rms_norm=norms, add=2 * layers), Counter(rms_norm_backward=norms)) if use_backplane
           else (Counter(), Counter()))
    opt_tp, opt_single = (torch.optim.AdamW(m.parameters(), lr=1e-3) for m in (tp, single))
    for step in range(steps + 1):
        for opt in (opt_tp, opt_single):
            opt.zero_grad(set_to_none=True)
        logits_single = single(tokens)
        if step == 0:
            logits_tp, issued = traced("forward", lambda: tp(tokens), forward_collectives(layers), ops[0])
            worst = largest_difference(logits_tp, logits_single, "logits", **TOLERANCE)
            log(f"TP forward: logits equal the one-device run (largest difference {worst:.2e}); {issued}")
        else:
            logits_tp = tp(tokens)
        loss_tp, loss_single = (loss_of(logits, targets) for logits in (logits_tp, logits_single))
        largest_difference(loss_tp, loss_single, f"loss after {step} AdamW steps", **TOLERANCE)
        if step == steps:
            log(f"TP loss after {steps} AdamW steps: {loss_tp.item():.6f}, one device {loss_single.item():.6f}")
            return
        if step == 0:
            log(f"TP backward: {traced('backward', loss_tp.backward, backward_collectives(layers), ops[1])[1]}")
        else:
            loss_tp.backward()
        loss_single.backward()
        worst = 0.0
        for (name, p), q in zip(tp.named_parameters(), single.parameters()):
            if p.grad is None:
                raise RuntimeError(f"step {step + 1}: parameter {name} got no gradient through the TP model")
            worst = max(worst, largest_difference(p.grad.full_tensor(), q.grad, f"step {step + 1}, gradient of {name}",
                                                   **TOLERANCE))
        log(f"TP step {step + 1}: loss {loss_tp.item():.6f} (one device {loss_single.item():.6f}); all "
            f"{len(list(single.parameters()))} parameters' gradients, gathered whole, equal the one-device run "
            f"(largest difference {worst:.2e})")
        opt_tp.step()
        opt_single.step()


def main(argv=None) -> NoReturn:
    p = argparse.ArgumentParser(prog="torchrun --nproc-per-node N -m models.train_tp",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda", help="cuda: NCCL; cpu: gloo")
    p.add_argument("--ops", choices=["backplane", "pytorch"], default="backplane",
                   help="the check's ops (--bench times both)")
    p.add_argument("--steps", type=int, default=2, help="AdamW steps the check compares")
    p.add_argument("--bench", action="store_true", help="time Backplane ops against PyTorch's (models.tp_bench)")
    p.add_argument("--batch", type=int, default=2, help="sequences per step")
    for name in Shape.__dataclass_fields__:
        p.add_argument(f"--{name}", type=int, help=f"default: {getattr(CHECK_SHAPE, name)} for the check, "
                                                   f"{getattr(BENCH_SHAPE, name)} for --bench")
    p.add_argument("--dtype", choices=["bfloat16", "float32"], default="bfloat16",
                   help="--bench only; the check is float32")
    p.add_argument("--repeats", type=int, default=20, help="--bench: timed steps of each")
    p.add_argument("--warmup", type=int, default=3, help="--bench: untimed steps of each first")
    args = p.parse_args(argv)
    defaults = BENCH_SHAPE if args.bench else CHECK_SHAPE
    shape = Shape(**{name: getattr(args, name) or getattr(defaults, name) for name in Shape.__dataclass_fields__})
    rank, world, device = start(args.device)
    if world < 2:
        raise SystemExit(f"models.train_tp: expected two or more ranks (torchrun --nproc-per-node 2 or more), found "
                         f"{world}: one rank has nothing to split")
    shape.check_divides(world)
    mesh = init_device_mesh(args.device, (world,))

    def log(line):
        if rank == 0:
            print(line, flush=True)

    if args.bench:
        bench(shape, args.batch, getattr(torch, args.dtype), args.warmup, args.repeats, device, mesh, log,
              argv if argv is not None else sys.argv[1:])
    else:
        check(shape, args.batch, args.steps, args.ops == "backplane", device, mesh, log)
        log(f"TP check passed: {world} ranks ({device_name(device)}), {args.ops} ops, {shape}, batch "
            f"{args.batch}, {args.steps} AdamW steps; tolerance rtol {TOLERANCE['rtol']}, "
            f"atol {TOLERANCE['atol']}")
    finish(0, device)


if __name__ == "__main__":
    main()
