"""The npu device in torch.distributed: the plugin's c10d backend (collectives/ in C++).

Loading the plugin registers `npu_gloo` with c10d as the npu's default backend, so
dist.init_process_group() with no backend named (or "npu_gloo") serves npu and CPU
tensors. Each collective runs on a communication stream of the device, after the work
queued on the current stream, and its work waits on the device
(collectives/process_group.h): DDP's bucket all-reduce overlaps the backward.

The backend is C++ (collectives/process_group.cpp, the file a vendor replaces with their
collective library); the library does not link Python, so Python reaches it through two
operators (collectives/register.cpp): a group carrying gloo is boxed, the npu backend is
attached to it for npu and CPU tensors, and c10d gets that group (`_create`).

A plugin built without collectives/ has no such operators: torch.distributed is then
served by backplane.distributed's host-staged Python group (synchronous: nothing overlaps).

BACKPLANE_NPU_SYNC_COLLECTIVES=1 makes the groups created afterwards synchronous (the
host waits for each collective): the baseline the overlap is measured against.
"""
from __future__ import annotations

import os

import torch
import torch.distributed as dist

BACKEND_NAME = "npu_gloo"  # the name a group on this device reports (its npu backend's name())
_OPS = "backplane_npu_collectives"


def on_load(lib) -> None:
    if not dist.is_available():  # a torch built without distributed: nothing to register with
        return
    from backplane.distributed import register_device_collectives

    register_device_collectives("npu", BACKEND_NAME, create=_create if _native() else None)


def _native() -> bool:
    return hasattr(getattr(torch.ops, _OPS), "attach")


def _synchronous() -> bool:
    value = os.environ.get("BACKPLANE_NPU_SYNC_COLLECTIVES", "0")
    if value not in ("0", "1"):
        raise ValueError(f"BACKPLANE_NPU_SYNC_COLLECTIVES: expected 0 or 1; got {value!r}")
    return value == "1"


def _create(store, rank: int, world_size: int, timeout):
    # Its own gloo, under a prefix: a torch whose init_process_group() with no backend named
    # makes a backend per device would make c10d's gloo for the CPU over the same store.
    gloo = dist.ProcessGroupGloo(dist.PrefixStore(f"{BACKEND_NAME}/", store), rank, world_size, timeout)
    # The group itself, not its npu Backend: c10d then uses it as it is, for CPU tensors too.
    group = dist.ProcessGroup(store, rank, world_size)  # c10d boxes ProcessGroups, not Backends
    group._register_backend(torch.device("cpu"), dist.ProcessGroup.BackendType.GLOO, gloo)
    getattr(torch.ops, _OPS).attach(group.boxed(), BACKEND_NAME, _synchronous())
    return group


def comm_stream(group=None) -> torch.Stream | None:
    """The communication stream of `group`'s npu backend (the default group's if None);
    None before its first collective. Tests hold it to see that collectives run there."""
    group = group if group is not None else dist.group.WORLD
    where = getattr(torch.ops, _OPS).comm_stream(group.boxed())
    if not where:
        return None
    device_type = torch.accelerator.current_stream(torch.device("npu", where[0])).device_type
    return torch.Stream(stream_id=where[1], device_index=where[0], device_type=device_type)
