"""Where Inductor asks "is this the CPU?" and means "is this C++ code generation?".

A device whose scheduling is Inductor's CppScheduling generates the same C++ as the CPU,
but Inductor keys two questions on `device.type == "cpu"` with no per-device hook
(pytorch RFC #189137 lists such sites; torch 2.11 to 2.14 have these):
- `get_current_backend()` answers config.cuda_backend ("triton") for any other device,
  so the C++ kernel's CSE loses the dtypes it needs (indirect indexing, an embedding
  lookup, fails: "expected var.dtype is not None");
- `BaseSchedulerNode.is_cpu()` gates GPU-only loop reindexing in fusion; fusing a
  reduction with a pointwise node then fails in _try_reindex_pointwise_for_reduction.
Both are answered as for the CPU for the devices registered here, and only for them.
The functions are replaced where Inductor's modules bound them by name. Applied once
per process, when Inductor first schedules code for such a device; a torch whose
Inductor gains the hooks makes this module unnecessary.
"""
from __future__ import annotations

import sys

_CPP_DEVICES: set[str] = set()


def treat_as_cpp(device: str) -> None:
    if not _CPP_DEVICES:
        _patch_current_backend()
        _patch_is_cpu()
    _CPP_DEVICES.add(device)


def _patch_current_backend() -> None:
    import torch._inductor.utils as utils

    original = utils.get_current_backend

    def get_current_backend(device_type: str | None = None) -> str:
        if not device_type:
            from torch._inductor.virtualized import V

            device_type = V.graph.get_current_device_or_throw().type
        return "cpp" if device_type in _CPP_DEVICES else original(device_type)

    for name in ("torch._inductor.utils", "torch._inductor.codegen.common", "torch._inductor.scheduler"):
        module = sys.modules.get(name)
        if module is not None and getattr(module, "get_current_backend", None) is original:
            module.get_current_backend = get_current_backend


def _patch_is_cpu() -> None:
    from torch._inductor.scheduler import BaseSchedulerNode

    original = BaseSchedulerNode.is_cpu

    def is_cpu(self) -> bool:
        device = self.get_device()
        return original(self) or (device is not None and device.type in _CPP_DEVICES)

    BaseSchedulerNode.is_cpu = is_cpu
