"""torch.npu's random number generators: a default generator per device, apart from the
CPU's and from each other (the plugin's generator.cpp). The API is torch.cuda's: states
are CPU uint8 tensors; `device` is an index, "npu:1", a torch.device or None (the
current device). torch.manual_seed and torch.seed reach every device through
manual_seed_all; torch.random.fork_rng(device_type="npu") through get/set_rng_state.
`torch.Generator(device="npu")` makes a generator of its own, for `generator=`."""
from __future__ import annotations

import ctypes
import sys

import torch

from ._device_index import device_index as _index

_lib = None


def on_load(lib) -> None:
    global _lib
    msg = [ctypes.c_char_p, ctypes.c_size_t]
    u64 = ctypes.POINTER(ctypes.c_uint64)
    for fn, args, res in [
        ("backplane_npu_manual_seed", [ctypes.c_int, ctypes.c_uint64, *msg], ctypes.c_int),
        ("backplane_npu_seed", [ctypes.c_int, u64, *msg], ctypes.c_int),
        ("backplane_npu_initial_seed", [ctypes.c_int, u64, *msg], ctypes.c_int),
        ("backplane_npu_rng_state_size", [], ctypes.c_size_t),
        ("backplane_npu_get_rng_state", [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, *msg], ctypes.c_int),
        ("backplane_npu_set_rng_state", [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, *msg], ctypes.c_int),
        ("backplane_npu_set_offset", [ctypes.c_int, ctypes.c_uint64, *msg], ctypes.c_int),
        ("backplane_npu_get_offset", [ctypes.c_int, u64, *msg], ctypes.c_int),
    ]:
        getattr(lib, fn).argtypes = args
        getattr(lib, fn).restype = res
    _lib = lib
    # torch.utils.checkpoint saves and restores a device's RNG states only where its module
    # says it is initialized (as torch.cuda._initialized does); the npu is, once loaded.
    sys.modules[__package__]._initialized = True


def _call(fn: str, *args) -> None:
    buf = ctypes.create_string_buffer(1024)
    if getattr(_lib, fn)(*args, buf, len(buf)) != 0:
        raise RuntimeError(buf.value.decode(errors="replace"))


def _seed_value(seed) -> int:
    # torch's own range check and remapping of negative seeds, as torch.manual_seed does.
    return torch.Generator().manual_seed(int(seed)).initial_seed()


def manual_seed(seed) -> None:
    """Seeds the default generator of the current device."""
    _call("backplane_npu_manual_seed", _index(None), _seed_value(seed))


def manual_seed_all(seed) -> None:
    """Seeds the default generator of every device (torch.manual_seed calls this)."""
    seed = _seed_value(seed)
    for index in range(_lib.backplane_npu_device_count()):
        _call("backplane_npu_manual_seed", index, seed)


def seed() -> int:
    """Seeds the current device's default generator from a non-deterministic source; returns the seed."""
    return _seed(_index(None))


def _seed(index: int) -> int:
    out = ctypes.c_uint64()
    _call("backplane_npu_seed", index, ctypes.byref(out))
    return out.value


def seed_all() -> int:
    """Seeds every device's default generator with one non-deterministic seed, as torch.cuda does."""
    count = _lib.backplane_npu_device_count()
    if count == 0:
        return 0
    value = _seed(0)
    for index in range(1, count):
        _call("backplane_npu_manual_seed", index, value)
    return value


def initial_seed(device=None) -> int:
    """The seed of the device's default generator (the current device by default)."""
    out = ctypes.c_uint64()
    _call("backplane_npu_initial_seed", _index(device), ctypes.byref(out))
    return out.value


def get_rng_state(device="npu") -> torch.Tensor:
    """The state of the device's default generator, a CPU torch.uint8 tensor."""
    state = torch.empty(_lib.backplane_npu_rng_state_size(), dtype=torch.uint8)
    _call("backplane_npu_get_rng_state", _index(device), state.data_ptr(), state.numel())
    return state


def set_rng_state(new_state: torch.Tensor, device="npu") -> None:
    """Sets the state of the device's default generator from get_rng_state's tensor."""
    if not isinstance(new_state, torch.Tensor) or new_state.dtype != torch.uint8 or new_state.device.type != "cpu":
        got = f"a {new_state.dtype} tensor on {new_state.device}" if isinstance(new_state, torch.Tensor) else \
            type(new_state).__name__
        raise TypeError(f"backplane npu: expected an RNG state, a CPU torch.uint8 tensor (from get_rng_state), got {got}")
    state = new_state.contiguous()
    _call("backplane_npu_set_rng_state", _index(device), state.data_ptr(), state.numel())


def get_rng_state_all() -> list:
    return [get_rng_state(index) for index in range(_lib.backplane_npu_device_count())]


def set_rng_state_all(new_states) -> None:
    """Sets device i's state from the i-th of new_states (get_rng_state_all's list)."""
    for index, state in enumerate(new_states):
        set_rng_state(state, index)


def set_offset(offset: int, device=None) -> None:
    """Sets the offset of the device's default generator. Its state is an mt19937 state,
    which has no offset: only 0 is accepted (torch.cuda's Philox generators take any)."""
    if not isinstance(offset, int) or offset < 0 or offset >= 2**64:
        raise ValueError(f"backplane npu: expected an offset, an int from 0 to 2**64 - 1, "
                         f"got {offset!r}")
    _call("backplane_npu_set_offset", _index(device), offset)


def get_offset(device=None) -> int:
    """The offset of the device's default generator: always 0 (see set_offset)."""
    out = ctypes.c_uint64()
    _call("backplane_npu_get_offset", _index(device), ctypes.byref(out))
    return out.value
