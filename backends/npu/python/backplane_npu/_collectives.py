"""The npu device in torch.distributed: the collective library, the part a vendor replaces.

Here it is gloo over host buffers (backplane.distributed): each collective copies npu
tensors to the host, runs gloo there and copies the results back, so that
dist.init_process_group() with no backend named serves npu and CPU tensors, and DDP and
FSDP2 run on npu. A device with a collective library of its own (one that reads device
memory, on the current stream) replaces the call in on_load with its library's c10d
backend, registered for the device:

    dist.Backend.register_backend("npu_ccl", create_npu_ccl, devices=["npu"])
"""
from __future__ import annotations

import torch.distributed as dist

BACKEND_NAME = "npu_gloo"  # the name a group on this device reports (group.name())


def on_load(lib) -> None:
    if not dist.is_available():  # a torch built without distributed: nothing to register with
        return
    from backplane.distributed import register_device_collectives

    register_device_collectives("npu", BACKEND_NAME)
