"""register_device_collectives: a device's c10d backend, made of HostStagedProcessGroup."""
from __future__ import annotations

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
