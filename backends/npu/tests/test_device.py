"""Device-level tests of the npu device, independent of any kernel: the device module,
tensors to, from and between devices, views, streams, events, memory statistics and
named errors. `backplane new-backend NAME --dispatch-key PrivateUse1` copies this file
with the device renamed, so a fresh device passes it before its first kernel.
Run: python -m pytest tests (the plugin on BACKPLANE_PLUGIN_PATH or installed)."""
import pytest
import torch

import backplane

backplane.load("npu")
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int8, torch.bool]


def _same(got, expected):
    torch.testing.assert_close(got.cpu(), expected, rtol=0, atol=0, equal_nan=True)


def test_device_module_and_tensor_methods():
    assert torch._C._get_privateuse1_backend_name() == "npu"
    assert torch.npu.is_available() and torch.npu.device_count() >= 1
    x = torch.ones(3).npu()
    assert x.is_npu and x.device == torch.device("npu", 0)
    assert torch.nn.Linear(2, 2).npu().weight.device.type == "npu"


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_round_trip_and_views(dtype):
    host = (torch.arange(30) % 7).to(dtype).view(5, 6)
    on = host.to("npu")
    _same(on, host)
    _same(on.t(), host.t())
    _same(on[1:, ::2], host[1:, ::2])  # an offset, strided view
    _same(host.t().to("npu"), host.t())  # a non-contiguous source


def test_between_devices():
    if torch.npu.device_count() < 2:
        pytest.skip("one npu device")
    host = torch.arange(12.0).view(3, 4)
    on1 = host.to("npu:0").to("npu:1")
    assert on1.device == torch.device("npu:1")
    _same(on1, host)


def test_streams_and_events():
    s = torch.npu.Stream()
    start, end = torch.npu.Event(enable_timing=True), torch.npu.Event(enable_timing=True)
    with torch.npu.stream(s):
        start.record()
        x = torch.ones(1000, device="npu").fill_(3.0)
        end.record()
    end.synchronize()
    assert start.query() and end.query() and start.elapsed_time(end) >= 0
    torch.npu.current_stream().wait_stream(s)
    _same(x, torch.full((1000,), 3.0))
    torch.npu.synchronize()


def test_memory_is_returned():
    torch.npu.synchronize()
    before = torch.npu.memory_allocated(0)
    t = torch.empty(1024, device="npu")  # 4096 bytes: blocks are multiples of 512 bytes
    assert torch.npu.memory_allocated(0) == before + 4096
    del t
    assert torch.npu.memory_allocated(0) == before


def test_torch_accelerator_memory_agrees_with_the_device_module():
    # torch.accelerator's memory API asks the device's registered allocator, which must
    # be a c10::DeviceAllocator (allocator.cpp); with a plain c10::Allocator every call
    # failed with "device_allocator INTERNAL ASSERT FAILED".
    index = torch.npu.device_count() - 1
    torch.npu.synchronize(index)
    torch.accelerator.reset_peak_memory_stats(index)
    before = torch.npu.memory_stats(index)
    t = torch.empty(1024, device=f"npu:{index}")
    stats = torch.accelerator.memory_stats(index)
    own = torch.npu.memory_stats(index)
    assert own["allocated_bytes.all.current"] == before["allocated_bytes.all.current"] + 4096
    assert stats == own
    assert torch.accelerator.memory_allocated(index) == own["allocated_bytes.all.current"]
    assert torch.accelerator.max_memory_allocated(index) == own["allocated_bytes.all.peak"]
    assert torch.accelerator.memory_reserved(index) == own["reserved_bytes.all.current"]
    del t
    assert torch.accelerator.memory_allocated(index) == torch.npu.memory_allocated(index) == before["allocated_bytes.all.current"]
    assert torch.accelerator.max_memory_allocated(index) == own["allocated_bytes.all.peak"]
    torch.accelerator.reset_peak_memory_stats(index)
    assert torch.npu.max_memory_allocated(index) == before["allocated_bytes.all.current"]
    # The caching allocator's own tests: test_memory.py.
    count = torch.npu.device_count()
    with pytest.raises(RuntimeError, match=rf"backplane npu: device index {count} out of range; expected 0 <= index < {count}"):
        torch.accelerator.memory_stats(count)


# Every torch.npu function that takes a device. ctypes narrows a Python int to a C int
# without a word, so 2**32 + k reached the plugin as k: a wrong device, silently.
DEVICE_TAKERS = {
    "set_device": torch.npu.set_device,
    "synchronize": torch.npu.synchronize,
    "Stream": torch.npu.Stream,
    "current_stream": torch.npu.current_stream,
    "default_stream": torch.npu.default_stream,
    "memory_stats": torch.npu.memory_stats,
    "memory_allocated": torch.npu.memory_allocated,
    "max_memory_allocated": torch.npu.max_memory_allocated,
    "reset_peak_memory_stats": torch.npu.reset_peak_memory_stats,
    "initial_seed": torch.npu.initial_seed,
    "get_rng_state": torch.npu.get_rng_state,
    "set_rng_state": lambda device: torch.npu.set_rng_state(torch.npu.get_rng_state(0), device),
}


@pytest.mark.parametrize("index", [2**32, 2**32 + 1, 2**64 + 1, -(2**32) - 1, -2], ids=str)
@pytest.mark.parametrize("name", DEVICE_TAKERS)
def test_device_indices_are_refused_not_wrapped(name, index):
    count = torch.npu.device_count()
    with pytest.raises(RuntimeError, match=rf"backplane npu: device index {index} out of range; "
                                           rf"expected 0 <= index < {count} \(or -1: the current device\)"):
        DEVICE_TAKERS[name](index)
    assert torch.npu.current_device() == 0


def test_errors_name_the_device():
    with pytest.raises(RuntimeError, match="npu"):
        torch.empty(2, device=f"npu:{torch.npu.device_count() + 5}")
    with pytest.raises((RuntimeError, torch.OutOfMemoryError), match="npu"):
        torch.empty(1 << 50, device="npu")


def test_freeing_on_workers_never_waits_for_the_gil():
    # A queued task holds a reference to a tensor that has a Python object; the main
    # thread waits for the stream with the GIL held (as Inductor's first compile does in a
    # device copy; here a synchronize through ctypes.PyDLL, which keeps the GIL). Were the
    # worker to drop that reference, it would wait in decref_pyobject for the GIL while
    # the main thread waits for it. The delay makes every task finish while the main
    # thread is already waiting; before the fix this hung at the first iteration.
    import os
    import subprocess
    import sys

    code = """
import ctypes, torch, backplane
backplane.load("npu")
holding = ctypes.PyDLL(torch.npu._lib._name)
sync = holding.backplane_npu_synchronize
sync.argtypes, sync.restype = [ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t], ctypes.c_int
message = ctypes.create_string_buffer(256)
for i in range(300):
    x = torch.full((64,), float(i), device="npu")
    x.fill_(2.0)                         # queued: the task holds x
    del x                                # the task's reference is the last C++ one
    assert sync(0, message, 256) == 0, message.value
    assert torch.ones(4, device="npu").sum().item() == 4  # a copy to the host
print("done")
"""
    env = {**os.environ, "BACKPLANE_NPU_TASK_DELAY_MS": "1"}
    try:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    except subprocess.TimeoutExpired:
        pytest.fail("npu work and the GIL deadlocked: a stream worker waited for the GIL")
    assert done.returncode == 0 and done.stdout.strip() == "done", done.stderr[-2000:]
