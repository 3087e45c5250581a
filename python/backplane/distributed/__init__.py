"""torch.distributed for a device without a collective library of its own.

    from backplane.distributed import register_device_collectives
    register_device_collectives("npu", "npu_gloo")   # what the npu plugin does when it loads
    dist.init_process_group()                        # no backend named: npu and CPU tensors

Collectives copy the device's tensors to the host, run gloo there and copy the results
back (host_staged.py states the limits). Backplane's npu device and every PrivateUse1
device `backplane new-backend` writes register it when they load; a device with its own
collective library registers that library's c10d backend instead (docs/adding-a-device.md).
"""
from .host_staged import HostStagedProcessGroup
from .registration import register_device_collectives

__all__ = ["HostStagedProcessGroup", "register_device_collectives"]
