"""The decoder LM of models.train, on Backplane ops, under FSDP2 (fully_shard per decoder
block and the root), one process per GPU, checked against a one-GPU run of the same
global batch.

    torchrun --nproc-per-node 2 -m models.train_fsdp2 [--device cuda|cpu] --steps 5

Each step draws one global batch (the same generator on every rank); rank r trains on its
slice. fully_shard keeps every parameter sharded over the ranks by rows, gathers a
block's parameters for its forward and backward, and reduce-scatters the gradients
averaged over the ranks. Rank 0 also runs a plain copy of the model, with the same
weights, on the whole global batch: what one GPU computes. At every step the mean of the
ranks' losses must equal the copy's loss, and every gradient, gathered whole, the copy's,
within rtol 1e-4, atol 1e-5 (the same float32 sums in another order); after the AdamW
step every parameter must equal the copy's within atol 1e-4: AdamW moves a weight by
about lr * g / (|g| + eps), so where a gradient is within rounding of zero the two runs'
steps differ by more than the gradients do (1.6e-5 seen on two H200s), while a step
lost or taken twice moves weights by lr = 3e-3. Prints one line, starting "FSDP2 over",
with the largest differences and the loss.
"""
from __future__ import annotations

import argparse
import copy
from typing import NoReturn

import torch
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard

from .distributed import device_name, finish, largest_difference, rank_share, start
from .train import DecoderLM, batch, loss_of

TOLERANCE = dict(rtol=1e-4, atol=1e-5)
PARAMETER_TOLERANCE = dict(rtol=1e-4, atol=1e-4)


def mean_over_ranks(loss: torch.Tensor, world: int) -> torch.Tensor:
    total = loss.detach().clone()
    dist.all_reduce(total)  # a sum: gloo has no average
    return total / world


def main(argv=None) -> NoReturn:
    p = argparse.ArgumentParser(prog="torchrun --nproc-per-node N -m models.train_fsdp2",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda", help="cuda: NCCL; cpu: gloo")
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--global-batch", type=int, default=64)
    args = p.parse_args(argv)
    rank, world, device = start(args.device)
    mine = rank_share(args.global_batch, rank, world)
    model = DecoderLM(use_backplane=True).to(device)
    single = copy.deepcopy(model) if rank == 0 else None  # one GPU, the whole global batch, the same weights
    for block in model.blocks:
        fully_shard(block)
    fully_shard(model)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    opt_single = torch.optim.AdamW(single.parameters(), lr=3e-3) if single is not None else None
    g = torch.Generator().manual_seed(1)
    worst_loss, worst_grad, worst_param, losses = 0.0, 0.0, 0.0, []
    for step in range(args.steps):
        tokens, targets = batch(args.global_batch, g, device)
        opt.zero_grad(set_to_none=True)
        loss = loss_of(model, tokens[mine], targets[mine])
        loss.backward()  # fully_shard reduce-scatters (averages) the gradients here
        grads = [p.grad.full_tensor() for p in model.parameters()]  # collectives: every rank takes part
        opt.step()
        mean_loss = mean_over_ranks(loss, world)
        gathered = [p.full_tensor() for p in model.parameters()]
        if rank == 0:
            opt_single.zero_grad(set_to_none=True)
            loss_single = loss_of(single, tokens, targets)
            loss_single.backward()
            worst_loss = max(worst_loss, largest_difference(mean_loss, loss_single.detach(),
                                                            f"step {step + 1}, loss", **TOLERANCE))
            for (name, q), grad in zip(single.named_parameters(), grads):
                worst_grad = max(worst_grad, largest_difference(grad, q.grad, f"step {step + 1}, gradient of {name}",
                                                                **TOLERANCE))
            opt_single.step()
            losses.append(loss_single.item())
            for (name, q), p in zip(single.named_parameters(), gathered):
                worst_param = max(worst_param, largest_difference(p, q.detach(), f"after step {step + 1}, {name}",
                                                                  **PARAMETER_TOLERANCE))
    if rank == 0:
        print(f"FSDP2 over {world} ranks ({device_name(device)}), fully_shard per block and the root, global batch "
              f"{args.global_batch}, {args.steps} AdamW steps: the mean loss over ranks, every gradient and every "
              f"parameter, gathered whole, matched the one-GPU run after every step (largest differences: loss "
              f"{worst_loss:.2e}, gradients {worst_grad:.2e}, parameters {worst_param:.2e}); one-GPU loss "
              f"{losses[0]:.3f} -> {losses[-1]:.3f}", flush=True)
    finish(0, device)


if __name__ == "__main__":
    main()
