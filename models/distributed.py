"""What the distributed model scripts (train_ddp, train_fsdp2, train_tp) share: NVLink
multicast kept off, one process per device started by torchrun, the process group
for that device, and how a rank ends (finish).

NCCL_NVLS_ENABLE=0 and friends are set when this module is imported, for this process
and its children, where the caller did not set them: NCCL reads them when the first
communicator is created, after the import.
"""
from __future__ import annotations

import os
import sys
from typing import NoReturn

for _name in ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS"):
    os.environ.setdefault(_name, "0" if _name == "NCCL_NVLS_ENABLE" else "1")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import backplane  # noqa: E402

# The process group's backend for each device type this project's scripts run on.
PROCESS_GROUP_BACKEND = {"cuda": "nccl", "cpu": "gloo"}


def start(device_type: str) -> tuple[int, int, torch.device]:
    """Joins the process group torchrun describes (NCCL for cuda, gloo for cpu), loads the
    Backplane backend of device_type, and returns (rank, world size, this rank's device):
    cuda:LOCAL_RANK, or the CPU."""
    if device_type not in PROCESS_GROUP_BACKEND:
        raise SystemExit(f"device type must be one of {sorted(PROCESS_GROUP_BACKEND)}, found '{device_type}'")
    dist.init_process_group(PROCESS_GROUP_BACKEND[device_type])
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cpu")
    if device_type == "cuda":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", rank)))
        torch.cuda.set_device(device)
    backplane.load(device_type)
    return rank, world, device


def finish(returncode: int, device: torch.device) -> NoReturn:
    """Ends this rank: waits at a barrier until every rank is done (NCCL: on `device`),
    leaves the process group, flushes the output and exits with `returncode`, skipping the
    interpreter's teardown.

    Why not a normal exit: gloo runs collectives on threads of its own, and whichever
    thread drops a finished collective last frees its tensors; where Python has already
    let go of such a tensor, that thread must take the GIL to free it. When the main thread
    holds the GIL into interpreter teardown, Python ends the waiting thread inside a C++
    destructor and the process aborts ("terminate called without an active exception"),
    after every check passed: seen in CI with models.train_tp on gloo (torch 2.14.1), and
    a barrier alone did not prevent it. torch offers no way to wait for those threads, so
    the rank leaves with os._exit. The barrier stays: no rank leaves while another may
    still need it for a collective."""
    dist.barrier(device_ids=[device.index] if device.type == "cuda" else None)
    dist.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(returncode)


def rank_share(global_batch: int, rank: int, world: int) -> slice:
    """The rows of a global batch that `rank` trains on; raises SystemExit where the batch
    does not split evenly (uneven shares would weigh the ranks' mean losses unequally)."""
    if global_batch % world:
        raise SystemExit(f"--global-batch {global_batch} does not split over {world} ranks")
    share = global_batch // world
    return slice(rank * share, (rank + 1) * share)


def largest_difference(actual, expected, what: str, rtol: float, atol: float) -> float:
    """The largest absolute difference between a distributed run's tensor and the one-device
    run's; raises AssertionError naming `what` where they differ beyond the tolerance."""
    torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol, msg=lambda m: f"{what}: {m}")
    return (actual - expected).abs().max().item()


def device_name(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
