"""The decoder LM of models.train under DistributedDataParallel (NCCL), one process per
GPU, checked against a one-GPU run of the same global batch.

    torchrun --nproc-per-node 2 -m models.train_ddp --steps 20

Each step draws one global batch (the same generator on every rank); rank r trains on its
slice under DDP, which averages the gradients over ranks. Rank 0 also runs a plain copy
of the model, with the same weights, on the whole global batch: its gradients are what
one GPU computes. They must match DDP's within float32 tolerance at every step; then both
take the same AdamW step. Prints the largest difference and the loss.

NVLink multicast stays off (NCCL_NVLS_ENABLE=0 and friends, set by models.distributed for
this process and its children if the caller did not).
"""
from __future__ import annotations

import argparse
from typing import NoReturn

import torch
from torch.nn.parallel import DistributedDataParallel

from .distributed import device_name, finish, rank_share, start
from .train import DecoderLM, batch, check_gradients, loss_of


def main(argv=None) -> NoReturn:
    p = argparse.ArgumentParser(prog="torchrun --nproc-per-node N -m models.train_ddp", description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--global-batch", type=int, default=64)
    args = p.parse_args(argv)
    rank, world, device = start("cuda")
    mine = rank_share(args.global_batch, rank, world)
    model = DecoderLM(use_backplane=True).to(device)
    ddp = DistributedDataParallel(model, device_ids=[device.index])
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    single = opt_single = None
    if rank == 0:  # one GPU, the whole global batch, the same weights
        single = DecoderLM(use_backplane=True).to(device)
        single.load_state_dict(model.state_dict())
        opt_single = torch.optim.AdamW(single.parameters(), lr=3e-3)
    g = torch.Generator().manual_seed(1)
    worst, first_loss, loss = 0.0, None, None
    for step in range(args.steps):
        tokens, targets = batch(args.global_batch, g, device)
        opt.zero_grad(set_to_none=True)
        loss_of(ddp, tokens[mine], targets[mine]).backward()  # DDP all-reduces (averages) here
        if rank == 0:
            opt_single.zero_grad(set_to_none=True)
            loss = loss_of(single, tokens, targets)
            loss.backward()
            first_loss = loss.item() if first_loss is None else first_loss
            worst = max(worst, check_gradients(model, single, step))
            opt_single.step()
        opt.step()
    if rank == 0:
        print(f"DDP over {world} GPUs ({device_name(device)}), global batch {args.global_batch}, "
              f"{args.steps} steps: every parameter's gradient matched the one-GPU run (largest difference "
              f"{worst:.2e}); one-GPU loss {first_loss:.3f} -> {loss.item():.3f}", flush=True)
    finish(0, device)


if __name__ == "__main__":
    main()
