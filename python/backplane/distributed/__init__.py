"""torch.distributed for a device without a collective library of its own.

    from backplane.distributed import register_device_collectives
    register_device_collectives("npu", "npu_gloo", create=...)   # what the npu plugin does when it loads
    dist.init_process_group()                                     # no backend named: npu and CPU tensors

The npu plugin passes its C++ backend's creator (backends/npu/collectives: collectives on
a stream of their own, overlapping compute). Without `create`, as for a plugin built
without collectives/, collectives copy the device's tensors to the host, run gloo there
and copy the results back, synchronously (host_staged.py states the limits).
"""
from .host_staged import HostStagedProcessGroup
from .registration import register_device_collectives

__all__ = ["HostStagedProcessGroup", "register_device_collectives"]
