"""Where Inductor asks "is this the CPU?" (or "a GPU?") and means "C++ code generation?".

A device whose scheduling is Inductor's CppScheduling generates the same C++ as the CPU,
but Inductor keys three questions on the device type, with no per-device hook
(pytorch RFC #189137 lists such sites; torch 2.11 to 2.14 have these):
- `get_current_backend()` (utils) answers config.cuda_backend ("triton") for any device
  but the CPU, so the C++ kernel's CSE loses the dtypes it needs: an embedding lookup
  (indirect indexing) fails with "expected var.dtype is not None".
- `BaseSchedulerNode.is_cpu()` (scheduler) gates GPU-only loop reindexing in fusion:
  fusing a reduction with a pointwise node fails in _try_reindex_pointwise_for_reduction.
- `is_gpu()` (lowering) decides which device a pointwise node takes when a 0-dim CPU
  scalar meets a device tensor: a GPU wins over the CPU scalar; any other device loses
  to it when the scalar comes first (`s * x`), and the node becomes a CPU kernel over
  device memory.
For the devices registered here, and only for them, the first two answer as for the CPU
and the third as for a GPU (its other use in lowering, index_put's accumulate fallback
for bfloat16, then also applies: slower, not wrong). Each is replaced where Inductor's
modules bound it by name, right after the module is imported (backplane.import_hooks), before
any other module binds it. A torch whose Inductor gains the hooks makes this unneeded.
"""
from __future__ import annotations

from backplane.import_hooks import when_imported

_CPP_DEVICES: set[str] = set()


def treat_as_cpp(device: str) -> None:
    if not _CPP_DEVICES:
        when_imported("torch._inductor.utils", _patch_current_backend)
        when_imported("torch._inductor.scheduler", _patch_is_cpu)
        when_imported("torch._inductor.lowering", _patch_is_gpu)
    _CPP_DEVICES.add(device)


def _device_type_now() -> str:
    from torch._inductor.virtualized import V

    return V.graph.get_current_device_or_throw().type


def _patch_current_backend(utils) -> None:
    import sys

    original = utils.get_current_backend

    def get_current_backend(device_type: str | None = None) -> str:
        device_type = device_type or _device_type_now()
        return "cpp" if device_type in _CPP_DEVICES else original(device_type)

    # Modules imported before this one bound the original by name (utils itself, and any
    # that ran while it was being imported).
    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").startswith("torch._inductor") and \
                getattr(module, "get_current_backend", None) is original:
            module.get_current_backend = get_current_backend


def _patch_is_cpu(scheduler) -> None:
    original = scheduler.BaseSchedulerNode.is_cpu

    def is_cpu(self) -> bool:
        device = self.get_device()
        return original(self) or (device is not None and device.type in _CPP_DEVICES)

    scheduler.BaseSchedulerNode.is_cpu = is_cpu


def _patch_is_gpu(lowering) -> None:
    original = lowering.is_gpu

    def is_gpu(device) -> bool:
        return original(device) or device in _CPP_DEVICES

    lowering.is_gpu = is_gpu
