"""Device time in torch.profiler.

At load the plugin registers its kernel timer with Kineto (profiler.cpp), so the
ordinary profiler shows the device:

    from torch.profiler import profile, ProfilerActivity
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        y = torch.ops.backplane.rms_norm(x, w, 1e-6)
    print(prof.key_averages().table(sort_by="device_time_total"))
    prof.export_chrome_trace("trace.json")  # kernels on the row of their device and stream

Each kernel a stream worker runs while the profile records is a device event named as it
was queued (`backplane::rms_norm`, `copy cpu to npu`, ...), counted as device time of the
op that queued it. Profiling only the CPU times nothing on the device. Kernels are
stamped on the device's own clock and shown in host time, mapped as each profile starts.
"""
from __future__ import annotations

import ctypes

from ._device_index import device_index as _index

_lib: ctypes.CDLL | None = None
_available = False


def on_load(lib) -> None:
    global _lib, _available
    lib.backplane_npu_profiler_register.argtypes = []
    lib.backplane_npu_profiler_register.restype = ctypes.c_int
    lib.backplane_npu_profiler_kernels_recorded.argtypes = []
    lib.backplane_npu_profiler_kernels_recorded.restype = ctypes.c_int64
    lib.backplane_npu_profiler_device_clock.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_int64), ctypes.c_char_p,
                                                        ctypes.c_size_t]
    lib.backplane_npu_profiler_device_clock.restype = ctypes.c_int
    _lib = lib
    _available = lib.backplane_npu_profiler_register() == 1


def is_available() -> bool:
    """Whether torch.profiler can show the device's kernels (False for a torch without Kineto)."""
    return _available


def _kernels_recorded() -> int:
    """Kernels the stream workers have timed since load. Tests only."""
    return _lib.backplane_npu_profiler_kernels_recorded() if _lib is not None else 0


def _device_clock_ns(device=None) -> int:
    """The device's own clock now, in nanoseconds (unrelated to any host clock). Tests only."""
    ns, buf = ctypes.c_int64(), ctypes.create_string_buffer(1024)
    if _lib.backplane_npu_profiler_device_clock(_index(device), ctypes.byref(ns), buf, len(buf)) != 0:
        raise RuntimeError(buf.value.decode(errors="replace"))
    return ns.value
