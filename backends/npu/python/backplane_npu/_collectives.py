"""The npu device in torch.distributed: the plugin's c10d backend (collectives/ in C++).

Loading the plugin registers `npu_gloo` with c10d as the npu's default backend, so
dist.init_process_group() with no backend named (or "npu_gloo") serves npu and CPU
tensors. Each collective runs on a communication stream of the device, after the work
queued on the current stream, and its work waits on the device
(collectives/process_group.h): DDP's bucket all-reduce overlaps the backward.

The backend is C++ (collectives/process_group.cpp, the file a vendor replaces with their
collective library). The library does not link Python and defines no operator for this,
so Python reaches it through two C functions (collectives/c_api.cpp) and a group crosses
by name: `_create` makes a group carrying gloo, registers it in c10d's group registry
under a name of its own for the call, has the C++ side attach the npu backend to it (for
npu and CPU tensors), and hands the group to c10d.

A plugin built without collectives/ has no such functions: torch.distributed is then
served by backplane.distributed's host-staged Python group (synchronous: nothing overlaps).

BACKPLANE_NPU_SYNC_COLLECTIVES=1 makes the groups created afterwards synchronous (the
host waits for each collective): the baseline the overlap is measured against.
"""
from __future__ import annotations

import contextlib
import ctypes
import itertools
import os

import torch
import torch.distributed as dist

BACKEND_NAME = "npu_gloo"  # the name a group on this device reports (its npu backend's name())
_ATTACH, _COMM_STREAM = "backplane_npu_collectives_attach", "backplane_npu_collectives_comm_stream"
_lib = None
_names = itertools.count()  # the registry names of groups crossing to C++, unique in the process


def on_load(lib) -> None:
    global _lib
    if not dist.is_available():  # a torch built without distributed: nothing to register with
        return
    from backplane.distributed import register_device_collectives

    native = hasattr(lib, _ATTACH)  # False: a plugin built without collectives/
    if native:
        msg = [ctypes.c_char_p, ctypes.c_size_t]
        getattr(lib, _ATTACH).argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int, *msg]
        getattr(lib, _ATTACH).restype = ctypes.c_int
        out = [ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int64)]
        getattr(lib, _COMM_STREAM).argtypes = [ctypes.c_char_p, *out, *msg]
        getattr(lib, _COMM_STREAM).restype = ctypes.c_int
        _lib = lib
    register_device_collectives("npu", BACKEND_NAME, create=_create if native else None)


def _synchronous() -> bool:
    value = os.environ.get("BACKPLANE_NPU_SYNC_COLLECTIVES", "0")
    if value not in ("0", "1"):
        raise ValueError(f"BACKPLANE_NPU_SYNC_COLLECTIVES: expected 0 or 1; got {value!r}")
    return value == "1"


@contextlib.contextmanager
def _registered(group):
    """`group`'s name in c10d's group registry inside the block: how the C functions find it.
    A name of its own, not the group's: c10d registers a group under its name only after
    the creator has returned it, and some groups (made by hand) are never registered."""
    name = f"backplane_npu_collectives/{next(_names)}"
    torch._C._distributed_c10d._register_process_group(name, group)
    try:
        yield name.encode()
    finally:
        torch._C._distributed_c10d._unregister_process_group(name)


def _call(fn: str, *args) -> None:
    buf = ctypes.create_string_buffer(1024)
    if getattr(_lib, fn)(*args, buf, len(buf)) != 0:
        raise RuntimeError(buf.value.decode(errors="replace"))


def _attach(group, name: str, synchronous: bool) -> None:
    """Makes the npu backend, over `group`'s CPU backend (gloo), `group`'s backend for npu
    and CPU tensors, reporting `name`."""
    with _registered(group) as registered:
        _call(_ATTACH, registered, name.encode(), int(synchronous))


def _create(store, rank: int, world_size: int, timeout):
    # Its own gloo, under a prefix: a torch whose init_process_group() with no backend named
    # makes a backend per device would make c10d's gloo for the CPU over the same store.
    gloo = dist.ProcessGroupGloo(dist.PrefixStore(f"{BACKEND_NAME}/", store), rank, world_size, timeout)
    # The group itself, not its npu Backend: c10d then uses it as it is, for CPU tensors too.
    group = dist.ProcessGroup(store, rank, world_size)
    group._register_backend(torch.device("cpu"), dist.ProcessGroup.BackendType.GLOO, gloo)
    _attach(group, BACKEND_NAME, _synchronous())
    return group


def comm_stream(group=None) -> torch.Stream | None:
    """The communication stream of `group`'s npu backend (the default group's if None);
    None before its first collective. Tests hold it to see that collectives run there."""
    group = group if group is not None else dist.group.WORLD
    bound, device, stream_id = ctypes.c_int(0), ctypes.c_int(0), ctypes.c_int64(0)
    with _registered(group) as registered:
        _call(_COMM_STREAM, registered, ctypes.byref(bound), ctypes.byref(device), ctypes.byref(stream_id))
    if not bound.value:
        return None
    device_type = torch.accelerator.current_stream(torch.device("npu", device.value)).device_type
    return torch.Stream(stream_id=stream_id.value, device_index=device.value, device_type=device_type)
