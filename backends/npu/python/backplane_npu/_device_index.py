"""Device indices at the Python/C boundary: every torch.npu function that takes a device
turns it into an index here, checked, before a C function or torch.device sees it.

The check cannot wait for C: ctypes narrows a Python int to a C int without a word, so
2**32 + 1 would reach the plugin as 1 and name npu:1 (torch.device("npu", 2**32 + 1)
narrows the same way, to c10's 8-bit index). Some calls also reach c10 functions
declared noexcept (torch.accelerator's current stream), which cannot raise: a bad index
there would abort the process. The plugin checks again what reaches it (c_api.h:
device_index), with the same message."""
from __future__ import annotations

import ctypes

import torch

_lib = None


def on_load(lib) -> None:
    global _lib
    _lib = lib


def current_device() -> int:
    buf = ctypes.create_string_buffer(1024)
    index = _lib.backplane_npu_current_device(buf, len(buf))
    if index < 0:
        raise RuntimeError(buf.value.decode(errors="replace"))
    return index


def device_index(device) -> int:
    """An npu device (torch.device, "npu:1", "npu", an int index, or None) as an index in
    0 <= index < device_count(). None, -1 and a device without an index are the current
    device (torch's convention). Another device type is a ValueError; an index out of
    range a RuntimeError naming it and the range."""
    if device is None:
        return current_device()
    if isinstance(device, int):
        index = device
    else:
        device = torch.device(device)
        if device.type != "npu":
            raise ValueError(f"backplane npu: expected an npu device, got {device}")
        index = -1 if device.index is None else device.index
    if index == -1:
        return current_device()
    count = _lib.backplane_npu_device_count()
    if not 0 <= index < count:
        raise RuntimeError(
            f"backplane npu: device index {index} out of range; expected 0 <= index < {count} (or -1: the current device)")
    return index
