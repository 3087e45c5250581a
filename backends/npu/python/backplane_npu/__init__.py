"""torch.npu: the Python face of Backplane's npu plugin (a PrivateUse1 device).

The plugin's manifest names this package (python_module: backplane_npu); the build copies
it beside the library, and backplane.load() imports it and calls `on_load` once the
library is open. Nothing in the backplane package names npu.

Registered when the npu backend loads (`backplane.load("npu")`, BACKPLANE_BACKENDS, or
the torch.backends entry point): `torch.npu`, `tensor.npu()`, `tensor.is_npu`,
`module.npu()`. Streams and events are torch.Stream and torch.Event on the npu
device, served by the plugin's device guard.

    x = torch.ones(4, device="npu:1")
    s = torch.npu.Stream()
    with torch.npu.stream(s):
        y = torch.ops.backplane.scale_(x, 2.0)
    torch.npu.synchronize()
"""
from __future__ import annotations

import atexit
import contextlib
import ctypes
import importlib
import os
import sys

import torch

# The parts PyTorch 2 asks a device module for live in modules of their own, each named
# for what it serves: _amp (autocast), _memory (the allocators), _random (generators), _profiler, compile/
# (torch.compile and AOTInductor, entered through compile._inductor), _collectives
# (torch.distributed). Each has an on_load(lib) that on_load below calls.
from . import _amp, _device_index, _graphs, _memory, _random
from ._parts import PARTS
from ._amp import get_amp_supported_dtype, is_bf16_supported
from ._device_index import current_device, device_index as _checked_index
from ._graphs import NPUGraph, graph, is_current_stream_capturing
from ._memory import (empty_cache, empty_host_cache, graph_pool_handle, host_memory_stats, max_memory_allocated,
                      max_memory_reserved, mem_get_info, memory_allocated, memory_reserved, memory_snapshot, memory_stats,
                      reset_accumulated_memory_stats, reset_peak_memory_stats)
from ._random import (get_offset, get_rng_state, get_rng_state_all, initial_seed, manual_seed, manual_seed_all, seed,
                      seed_all, set_offset, set_rng_state, set_rng_state_all)

# The optional parts (`backplane new-backend --without PART` leaves one out), each by the
# module that installs it: exactly those PARTS names are imported, so a listed part that
# fails to import raises as any import does.
_PART_MODULES = {"profiler": "._profiler", "compile": ".compile._inductor", "collectives": "._collectives"}
_parts = [importlib.import_module(module, __name__) for part, module in _PART_MODULES.items() if part in PARTS]

__all__ = [
    "Event", "NPUGraph", "Stream", "current_device", "current_stream", "default_stream", "device_count", "is_available",
    "get_amp_supported_dtype", "graph", "get_rng_state", "get_rng_state_all", "initial_seed", "is_bf16_supported",
    "is_current_stream_capturing", "is_initialized", "manual_seed", "manual_seed_all", "seed", "seed_all", "set_device", "set_rng_state",
    "set_rng_state_all", "stream", "synchronize", "get_offset", "init", "set_offset",
    # _memory
    "empty_cache", "empty_host_cache", "graph_pool_handle", "host_memory_stats", "max_memory_allocated",
    "max_memory_reserved", "mem_get_info", "memory_allocated", "memory_reserved", "memory_snapshot", "memory_stats",
    "reset_accumulated_memory_stats", "reset_peak_memory_stats",
]

_lib: ctypes.CDLL | None = None


def on_load(plugin_path: str) -> None:
    """Called by backplane.load() when the plugin has opened: binds its C interface and
    installs torch.npu (once per process)."""
    global _lib
    if _lib is not None:
        return
    name = torch._C._get_privateuse1_backend_name()
    if name != "npu":
        raise RuntimeError(
            f"backplane npu: PrivateUse1 is registered as {name!r} in this process, expected 'npu'; "
            "PyTorch allows one PrivateUse1 backend per process"
        )
    lib = ctypes.CDLL(plugin_path)  # the handle the loader opened already
    msg = [ctypes.c_char_p, ctypes.c_size_t]
    for fn, args, res in [
        ("backplane_npu_device_count", [], ctypes.c_int),
        ("backplane_npu_current_device", msg, ctypes.c_int),
        ("backplane_npu_check_stream", [ctypes.c_int, ctypes.c_int64, *msg], ctypes.c_int),
        ("backplane_npu_set_device", [ctypes.c_int, *msg], ctypes.c_int),
        ("backplane_npu_synchronize", [ctypes.c_int, *msg], ctypes.c_int),
        ("backplane_npu_check_config", msg, ctypes.c_int),
        ("backplane_npu_set_skip_host_waits", [ctypes.c_int], None),
        ("backplane_npu_hold_current_stream", [ctypes.c_int, ctypes.POINTER(ctypes.c_void_p), *msg], ctypes.c_int),
        ("backplane_npu_release", [ctypes.c_void_p], ctypes.c_int),
        ("backplane_npu_queue_failure", [ctypes.c_int, ctypes.c_char_p, *msg], ctypes.c_int),
    ]:
        getattr(lib, fn).argtypes = args
        getattr(lib, fn).restype = res
    buf = ctypes.create_string_buffer(1024)
    if lib.backplane_npu_check_config(buf, len(buf)) != 0:
        raise RuntimeError(buf.value.decode(errors="replace"))
    _lib = lib
    _device_index.on_load(lib)
    atexit.register(_drain_at_exit)
    if not hasattr(torch, "npu"):
        torch._register_device_module("npu", sys.modules[__name__])
    if not hasattr(torch.Tensor, "is_npu"):
        torch.utils.generate_methods_for_privateuse1_backend(for_storage=True)  # storage.npu(), storage.is_npu too
    for part in (_memory, _random, *_parts, _graphs):
        part.on_load(lib)


# Tensors of the exit-time backward below: kept here, so that the autograd thread never
# drops the last reference to one.
_exit_backward_tensors: list = []


def _autograd_device_threads_started() -> bool:
    # PyTorch starts its per-device autograd threads at the first backward that needs
    # them and names each "pt_autograd_<index>" once it is past taking the GIL. Linux
    # only (/proc); elsewhere this answers False and nothing is drained.
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return False
    for task in tasks:
        try:
            with open(f"/proc/self/task/{task}/comm") as comm:
                if comm.read().startswith("pt_autograd_"):
                    return True
        except OSError:
            continue  # a thread that ended since the listing
    return False


def _drain_autograd_threads() -> None:
    # PyTorch runs an npu tensor's backward on an autograd thread per device index, which
    # drops the finished graph task just after waking the caller. The task keeps a copy of
    # the caller's thread-local state, and torch.autograd's Python entry stashes a
    # contextvars.Context there, so that drop needs the GIL. Once finalization has begun,
    # taking it ends the thread mid-unwind and the process aborts ("terminate called
    # without an active exception"; often, at the exit of a program that ran backward on
    # npu). A backward queued behind it on each index waits for the drop.
    # This backward enters the engine directly, so its own task stashes no Context and its
    # drop needs nothing from Python. It runs only where the threads exist already:
    # starting them now would have each take the GIL while Python finalizes.
    if not _autograd_device_threads_started():
        return
    import warnings

    run_backward = torch.autograd.Variable._execution_engine.run_backward
    with warnings.catch_warnings(), torch.enable_grad():  # a program may have turned gradients off
        warnings.simplefilter("ignore")
        for index in range(device_count()):
            try:
                x = torch.zeros((), device=f"npu:{index}", requires_grad=True)
                y, grad = x.clone(), torch.ones((), device=f"npu:{index}")  # grad given: one made inside would be dropped there
                _exit_backward_tensors.append((x, y, grad))
                run_backward((y,), (grad,), keep_graph=False, create_graph=False, inputs=(), allow_unreachable=True,
                             accumulate_grad=True)
            except RuntimeError:
                continue  # a device that fails now: drain the others


def _drain_at_exit() -> None:
    try:
        _drain_autograd_threads()
    except Exception:  # noqa: BLE001  (a torch without this private API: the queues below still finish)
        pass
    # Queued work holds tensors; the last reference to one that Python also knew
    # needs the GIL to go, which a worker cannot take once Python finalizes (it would
    # be killed mid-task). Finish the queues while Python still runs.
    for hold in list(_holds):
        hold.release()
    for index in range(device_count()):
        try:
            synchronize(index)
        except RuntimeError:
            pass  # a failure in queued work: nobody is left to report it to


def _checked(fn: str, *args) -> None:
    buf = ctypes.create_string_buffer(1024)
    if getattr(_lib, fn)(*args, buf, len(buf)) != 0:
        raise RuntimeError(buf.value.decode(errors="replace"))


def is_available() -> bool:
    return device_count() > 0


def is_initialized() -> bool:
    return _lib is not None


def _lazy_init() -> None:
    pass


def init() -> None:
    """Initializes the device, as torch.cuda.init does: nothing is left to do once loaded."""
    _lazy_init()


def _is_in_bad_fork() -> bool:
    return False


def device_count() -> int:
    return _lib.backplane_npu_device_count()


def set_device(device) -> None:
    _checked("backplane_npu_set_device", _checked_index(device))


@contextlib.contextmanager
def device(device):
    previous = current_device()
    set_device(device)
    try:
        yield
    finally:
        set_device(previous)


def synchronize(device=None) -> None:
    """Waits for every stream of the device; raises if queued work failed."""
    _checked("backplane_npu_synchronize", _checked_index(device))


class Stream(torch.Stream):
    """A stream of an npu device (the current device by default)."""

    def __new__(cls, device=None, priority: int = 0):
        return super().__new__(cls, device=torch.device("npu", _checked_index(device)), priority=priority)


def Event(enable_timing: bool = False) -> torch.Event:  # noqa: N802 (torch.cuda.Event's spelling)
    """A torch.Event on the current npu device (torch.Event methods check its exact type)."""
    return torch.Event(device=torch.device("npu", current_device()), enable_timing=enable_timing)


def current_stream(device=None) -> torch.Stream:
    return torch.accelerator.current_stream(torch.device("npu", _checked_index(device)))


def default_stream(device=None) -> torch.Stream:
    current = current_stream(device)
    return torch.Stream(stream_id=0, device_index=current.device_index, device_type=current.device_type)


@contextlib.contextmanager
def stream(s: torch.Stream):
    """Makes s the current stream of its device (and its device current) inside the block."""
    if s.device.type != "npu":
        raise ValueError(f"expected an npu stream, got one on {s.device}")
    _checked("backplane_npu_check_stream", _checked_index(s.device), s.stream_id)
    previous_device = current_device()
    previous = current_stream(s.device)
    set_device(s.device)
    torch.accelerator.set_stream(s)
    try:
        yield s
    finally:
        torch.accelerator.set_stream(previous)
        set_device(previous_device)


# --- test switches ----------------------------------------------------------------
def _set_skip_host_waits(skip: bool) -> None:
    """Host-side waits (synchronize, copies to the CPU) return at once. Tests only."""
    _lib.backplane_npu_set_skip_host_waits(int(skip))


_holds: set = set()  # unreleased holds: released at exit, so a failed test cannot hang the process


class _Hold:
    def __init__(self, handle):
        self._handle = handle
        _holds.add(self)

    def release(self) -> None:
        _lib.backplane_npu_release(self._handle)
        _holds.discard(self)


def _hold_stream(device=None) -> _Hold:
    """Holds the device's current stream: work queued after this waits for release(). Tests only."""
    handle = ctypes.c_void_p()
    _checked("backplane_npu_hold_current_stream", _checked_index(device), ctypes.byref(handle))
    return _Hold(handle.value)


def _queue_failure(message: str, device=None) -> None:
    """Queues work that fails with `message`; the next synchronize raises it. Tests only."""
    _checked("backplane_npu_queue_failure", _checked_index(device), message.encode())
