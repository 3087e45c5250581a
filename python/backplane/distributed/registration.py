"""register_device_collectives: a device's c10d backend, by default a HostStagedProcessGroup."""
from __future__ import annotations

import functools

import torch
import torch.distributed as dist

from .host_staged import HostStagedProcessGroup

_registered: dict[str, str] = {}  # device type -> its backend's name, for get_backend below


def register_device_collectives(device_type: str, backend_name: str, create=None) -> None:
    """Registers `backend_name` with c10d as the default backend of `device_type`:
    dist.init_process_group() with no backend named then serves that device's tensors, and
    `init_process_group(backend_name)` picks it by name, for that device's and CPU tensors.

    `create(store, rank, world_size, timeout)` makes the device's c10d Backend (the npu
    plugin's C++ one, backends/npu/collectives); without it, a HostStagedProcessGroup over
    gloo serves the device (synchronous). Once per process; a second call with the same
    names does nothing."""
    current = dist.Backend.default_device_backend_map.get(device_type)
    if current == backend_name:
        return
    if current is not None:
        raise RuntimeError(
            f"backplane.distributed: c10d already has backend {current!r} as the default for device "
            f"{device_type!r}; expected none, to register {backend_name!r}")

    def create_host_staged(store, rank: int, world_size: int, timeout) -> HostStagedProcessGroup:
        host = dist.ProcessGroupGloo(store, rank, world_size, timeout)
        return HostStagedProcessGroup(host, rank, world_size, backend_name)

    dist.Backend.register_backend(backend_name, create or create_host_staged, devices=[device_type, "cpu"])
    _registered[device_type] = backend_name
    _answer_backend_names()


def _device_backend_name(pg) -> str | None:
    """The name of a registered device backend serving `pg`, if one does."""
    if isinstance(pg, HostStagedProcessGroup):
        return pg.getBackendName()
    for device_type, name in _registered.items():
        try:
            backend = pg._get_backend(torch.device(device_type))
        except (RuntimeError, AttributeError):  # no backend for that device in this group
            continue
        if backend.name() == name:
            return name
    return None


def _answer_backend_names() -> None:
    """Makes dist.get_backend() name a device's backend.

    c10d records a group made with no backend named as "undefined", its word for a backend
    to be chosen per device at first use; so dist.get_backend() under the default group of
    `init_process_group()` would answer "undefined". A group whose device backend is a
    registered one answers that backend's name instead: what `init_process_group(name)`
    records. Every other answer is c10d's own.
    Limit: code that took its own reference to c10d's get_backend before the device
    registered (torch.distributed.device_mesh imports it by name) still reads "undefined"."""
    c10d = dist.distributed_c10d
    if getattr(c10d.get_backend, "_backplane_host_staged", False):
        return
    c10d_get_backend = c10d.get_backend

    @functools.wraps(c10d_get_backend)
    def get_backend(group=None) -> dist.Backend:
        name = c10d_get_backend(group)  # c10d's checks and errors first
        if name == dist.Backend.UNDEFINED:
            device_name = _device_backend_name(group if group is not None else dist.group.WORLD)
            if device_name is not None:
                return dist.Backend(device_name)
        return name

    get_backend._backplane_host_staged = True
    # c10d's own callers (new_group without a backend, for one) look it up in their module.
    c10d.get_backend = dist.get_backend = get_backend
