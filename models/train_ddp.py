"""The decoder LM of models.train under DistributedDataParallel (NCCL), one process per
GPU, checked against a one-GPU run of the same global batch.

    torchrun --nproc-per-node 2 -m models.train_ddp --steps 20

Each step draws one global batch (the same generator on every rank); rank r trains on its
slice under DDP, which averages the gradients over ranks. Rank 0 also runs a plain copy
of the model, with the same weights, on the whole global batch: its gradients are what
one GPU computes. They must match DDP's within float32 tolerance at every step; then both
take the same AdamW step. Prints the largest difference and the loss.

NVLink multicast stays off (NCCL_NVLS_ENABLE=0 and friends, set here for this process
and its children if the caller did not).
"""
from __future__ import annotations

import argparse
import os
import sys

for _name in ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS"):
    os.environ.setdefault(_name, "0" if _name == "NCCL_NVLS_ENABLE" else "1")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.nn.parallel import DistributedDataParallel  # noqa: E402

import backplane  # noqa: E402

from .train import DecoderLM, batch, check_gradients, loss_of  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="torchrun --nproc-per-node N -m models.train_ddp", description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--global-batch", type=int, default=64)
    args = p.parse_args(argv)
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    if args.global_batch % world:
        raise SystemExit(f"--global-batch {args.global_batch} does not split over {world} ranks")
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", rank)))
    torch.cuda.set_device(device)
    backplane.load("cuda")
    model = DecoderLM(use_backplane=True).to(device)
    ddp = DistributedDataParallel(model, device_ids=[device.index])
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    single = opt_single = None
    if rank == 0:  # one GPU, the whole global batch, the same weights
        single = DecoderLM(use_backplane=True).to(device)
        single.load_state_dict(model.state_dict())
        opt_single = torch.optim.AdamW(single.parameters(), lr=3e-3)
    g = torch.Generator().manual_seed(1)
    share = args.global_batch // world
    worst, first_loss, loss = 0.0, None, None
    for step in range(args.steps):
        tokens, targets = batch(args.global_batch, g, device)
        opt.zero_grad(set_to_none=True)
        mine = slice(rank * share, (rank + 1) * share)
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
        print(f"DDP over {world} GPUs ({torch.cuda.get_device_name(device)}), global batch {args.global_batch}, "
              f"{args.steps} steps: every parameter's gradient matched the one-GPU run (largest difference "
              f"{worst:.2e}); one-GPU loss {first_loss:.3f} -> {loss.item():.3f}", flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
