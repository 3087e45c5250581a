"""register_device_collectives: a device's c10d backend, made of HostStagedProcessGroup."""
from __future__ import annotations

import functools

import torch.distributed as dist

from .host_staged import HostStagedProcessGroup


def register_device_collectives(device_type: str, backend_name: str) -> None:
    """Registers `backend_name` with c10d as the default backend of `device_type`:
    dist.init_process_group() with no backend named then serves that device's tensors, and
    CPU tensors, with a HostStagedProcessGroup over gloo. `init_process_group(backend_name)`
    picks it by name. Once per process; a second call with the same names does nothing."""
    current = dist.Backend.default_device_backend_map.get(device_type)
    if current == backend_name:
        return
    if current is not None:
        raise RuntimeError(
            f"backplane.distributed: c10d already has backend {current!r} as the default for device "
            f"{device_type!r}; expected none, to register {backend_name!r}")

    def create(store, rank: int, world_size: int, timeout) -> HostStagedProcessGroup:
        host = dist.ProcessGroupGloo(store, rank, world_size, timeout)
        return HostStagedProcessGroup(host, rank, world_size, backend_name)

    dist.Backend.register_backend(backend_name, create, devices=[device_type, "cpu"])
    _answer_backend_names()


def _answer_backend_names() -> None:
    """Makes dist.get_backend() name a HostStagedProcessGroup's backend.

    c10d records a group made with no backend named as "undefined", its word for a backend
    to be chosen per device at first use; so dist.get_backend() under the default group of
    `init_process_group()` would answer "undefined". A HostStagedProcessGroup is made at
    once, as the backend it names, so get_backend answers that name instead: what
    `init_process_group(backend_name)` records. Every other answer is c10d's own.
    Limit: code that took its own reference to c10d's get_backend before the device
    registered (torch.distributed.device_mesh imports it by name) still reads "undefined"."""
    c10d = dist.distributed_c10d
    if getattr(c10d.get_backend, "_backplane_host_staged", False):
        return
    c10d_get_backend = c10d.get_backend

    @functools.wraps(c10d_get_backend)
    def get_backend(group=None) -> dist.Backend:
        name = c10d_get_backend(group)  # c10d's checks and errors first
        pg = group if group is not None else dist.group.WORLD
        if name == dist.Backend.UNDEFINED and isinstance(pg, HostStagedProcessGroup):
            return dist.Backend(pg.getBackendName())
        return name

    get_backend._backplane_host_staged = True
    # c10d's own callers (new_group without a backend, for one) look it up in their module.
    c10d.get_backend = dist.get_backend = get_backend
