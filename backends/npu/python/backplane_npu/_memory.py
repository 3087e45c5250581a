"""torch.npu's memory API, torch.cuda's names and meanings, over the plugin's caching
allocator (device/caching_allocator.h): statistics under PyTorch's key names, the cache,
the device's free memory, snapshots, the pinned host cache and private pools.

`device` is an index, "npu:1", a torch.device or None (the current device).
torch.accelerator's memory functions reach the same allocator through c10 and agree."""
from __future__ import annotations

import collections
import ctypes
import json

from ._device_index import device_index as _index

_lib = None


def on_load(lib) -> None:
    global _lib
    msg = [ctypes.c_char_p, ctypes.c_size_t]
    i64 = ctypes.POINTER(ctypes.c_int64)
    text = [ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t), *msg]
    pool = [ctypes.c_int, ctypes.c_uint64, ctypes.c_uint64]
    for fn, args, res in [
        ("backplane_npu_memory_stats", [ctypes.c_int, i64, *msg], ctypes.c_int),
        ("backplane_npu_memory_stats_json", [ctypes.c_int, *text], ctypes.c_int),
        ("backplane_npu_memory_snapshot", [ctypes.c_int, *text], ctypes.c_int),
        ("backplane_npu_reset_peak", [ctypes.c_int, *msg], ctypes.c_int),
        ("backplane_npu_reset_accumulated", [ctypes.c_int, *msg], ctypes.c_int),
        ("backplane_npu_empty_cache", [ctypes.c_int, *msg], ctypes.c_int),
        ("backplane_npu_mem_get_info", [ctypes.c_int, i64, *msg], ctypes.c_int),
        ("backplane_npu_host_memory_stats", [i64], None),
        ("backplane_npu_empty_host_cache", [], None),
        ("backplane_npu_begin_allocate_to_pool", [*pool, ctypes.c_int64, *msg], ctypes.c_int),
        ("backplane_npu_end_allocate_to_pool", [*pool, *msg], ctypes.c_int),
        ("backplane_npu_release_pool", [*pool, *msg], ctypes.c_int),
        ("backplane_npu_new_pool_id", [ctypes.POINTER(ctypes.c_uint64)], None),
    ]:
        getattr(lib, fn).argtypes = args
        getattr(lib, fn).restype = res
    _lib = lib


def _call(fn: str, *args) -> None:
    buf = ctypes.create_string_buffer(1024)
    if getattr(_lib, fn)(*args, buf, len(buf)) != 0:
        raise RuntimeError(buf.value.decode(errors="replace"))


def _json(fn: str, index: int):
    size, needed = 1 << 14, ctypes.c_size_t(0)
    while True:  # the text may grow between the two calls (another thread allocating)
        out = ctypes.create_string_buffer(size)
        _call(fn, index, out, size, ctypes.byref(needed))
        if needed.value <= size:
            return json.loads(out.value.decode())
        size = needed.value * 2


def memory_stats(device=None) -> collections.OrderedDict:
    """The caching allocator's counters, with torch.cuda.memory_stats()'s keys
    ("allocated_bytes.all.current", "reserved_bytes.small_pool.peak", "num_ooms", ...)."""
    stats = _json("backplane_npu_memory_stats_json", _index(device))
    return collections.OrderedDict(sorted(stats.items()))


def memory_allocated(device=None) -> int:
    """Bytes in blocks handed to tensors now (rounded up to 512 each)."""
    return memory_stats(device)["allocated_bytes.all.current"]


def max_memory_allocated(device=None) -> int:
    return memory_stats(device)["allocated_bytes.all.peak"]


def memory_reserved(device=None) -> int:
    """Bytes the caching allocator holds from the device: allocated plus cached."""
    return memory_stats(device)["reserved_bytes.all.current"]


def max_memory_reserved(device=None) -> int:
    return memory_stats(device)["reserved_bytes.all.peak"]


def reset_peak_memory_stats(device=None) -> None:
    _call("backplane_npu_reset_peak", _index(device))


def reset_accumulated_memory_stats(device=None) -> None:
    _call("backplane_npu_reset_accumulated", _index(device))


def empty_cache() -> None:
    """Returns the unused cached segments of every device to the driver (as torch.cuda's)."""
    for index in range(_lib.backplane_npu_device_count()):
        _call("backplane_npu_empty_cache", index)


def mem_get_info(device=None) -> tuple[int, int]:
    """(free, total) bytes of the device: its capacity (BACKPLANE_NPU_MEMORY_MB) less what
    the caching allocator reserved."""
    out = (ctypes.c_int64 * 2)()
    _call("backplane_npu_mem_get_info", _index(device), out)
    return out[0], out[1]


def memory_snapshot(device=None) -> list:
    """The segments of the device with their blocks, in torch.cuda.memory_snapshot()'s
    shape (no allocation stack traces: no history is recorded)."""
    return _json("backplane_npu_memory_snapshot", _index(device))


def host_memory_stats() -> dict:
    """Pinned host memory: bytes handed out, bytes held (handed out plus cached), blocks out."""
    out = (ctypes.c_int64 * 3)()
    _lib.backplane_npu_host_memory_stats(out)
    return {"allocated_bytes": out[0], "reserved_bytes": out[1], "allocations": out[2]}


def empty_host_cache() -> None:
    _lib.backplane_npu_empty_host_cache()


def graph_pool_handle() -> tuple[int, int]:
    """A fresh private pool id, as torch.cuda.graph_pool_handle()."""
    out = (ctypes.c_uint64 * 2)()
    _lib.backplane_npu_new_pool_id(out)
    return out[0], out[1]


# --- private pools, for tests: graph capture calls the C++ API (caching_allocator.h) ---
def _begin_allocate_to_pool(pool: tuple[int, int], stream, device=None) -> None:
    """Routes allocations on `stream` (a torch.Stream of the device) to `pool`."""
    _call("backplane_npu_begin_allocate_to_pool", _index(device), pool[0], pool[1], stream.stream_id)


def _end_allocate_to_pool(pool: tuple[int, int], device=None) -> None:
    _call("backplane_npu_end_allocate_to_pool", _index(device), pool[0], pool[1])


def _release_pool(pool: tuple[int, int], device=None) -> None:
    _call("backplane_npu_release_pool", _index(device), pool[0], pool[1])
