"""What torch.autocast and torch.amp.GradScaler ask of the npu device module.

torch.autocast("npu", dtype=...) asks only get_amp_supported_dtype; the casting itself is
the plugin's (autocast.cpp: PyTorch's CUDA lists on AutocastPrivateUse1) and the core's
(every Backplane op's `autocast:` rule). torch.amp.GradScaler("npu") needs nothing here:
its two aten ops (_amp_foreach_non_finite_check_and_unscale_, _amp_update_scale_) run
through the CPU fallback, as the emulated device keeps its data in host memory; a real
device gives them kernels of its own.
"""
from __future__ import annotations

import torch


def get_amp_supported_dtype() -> list:
    return [torch.float16, torch.bfloat16]


def is_bf16_supported(including_emulation: bool = True) -> bool:
    return True
