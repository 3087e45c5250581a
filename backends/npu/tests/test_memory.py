"""The npu caching allocator through torch.npu and torch.accelerator: reuse on a stream, no
reuse across streams before recorded work has run (ordered by a held stream, never by
timing), statistics against counts kept here, out-of-memory messages, snapshots, private
pools (graph capture) and the pinned host cache. Copied into scaffolds with the device
renamed. Run: python -m pytest tests (the plugin on BACKPLANE_PLUGIN_PATH or installed)."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import backplane

backplane.load("npu")
DEVICE = "npu"
DEV = getattr(torch, DEVICE)
MiB = 1 << 20


def _empty(nbytes, device=DEVICE):
    return torch.empty(nbytes, dtype=torch.uint8, device=device)


def _segment_of(ptr, device=None):
    for segment in DEV.memory_snapshot(device):
        for block in segment["blocks"]:
            if block["address"] == ptr:
                return segment, block
    raise AssertionError(f"no block at {ptr:#x} in the snapshot")


@pytest.fixture(autouse=True)
def _quiet_device():
    DEV.synchronize()  # finished work releases what it held: counts below start settled
    yield
    DEV.synchronize()


# Sizes below are multiples of 512 used by no other test, so the best-fitting free block of
# a request is the one the test freed, whatever other tests left in the cache.
def test_a_freed_block_is_reused_on_its_stream():
    x = _empty(771 * 512)
    ptr = x.data_ptr()
    del x
    y = _empty(771 * 512)
    assert y.data_ptr() == ptr
    # Another stream never gets it, even though it is free.
    del y
    with DEV.stream(DEV.Stream()):
        z = _empty(771 * 512)
    assert z.data_ptr() != ptr


def test_no_reuse_across_streams_before_the_recorded_work_has_run():
    side = DEV.Stream()
    x = _empty(773 * 512)
    ptr = x.data_ptr()
    with DEV.stream(side):
        hold = DEV._hold_stream()  # work queued on `side` from now waits for release()
    x.record_stream(side)
    del x  # the free records an event on `side`, behind the hold
    assert _segment_of(ptr)[1]["state"] == "active_pending_free"
    early = _empty(773 * 512)
    assert early.data_ptr() != ptr, "reused while the recorded stream's work was still queued"
    hold.release()
    DEV.synchronize()
    assert _segment_of(ptr)[1]["state"] == "inactive"
    assert _empty(773 * 512).data_ptr() == ptr
    del early


def test_a_held_stream_delays_only_the_blocks_recorded_on_it():
    held, free_running = DEV.Stream(), DEV.Stream()
    x, y = _empty(777 * 512), _empty(779 * 512)
    x_ptr, y_ptr = x.data_ptr(), y.data_ptr()
    with DEV.stream(held):
        hold = DEV._hold_stream()
    x.record_stream(held)  # its free waits behind the hold
    del x
    y.record_stream(free_running)  # recorded after x's: must not wait for it
    del y
    free_running.synchronize()
    try:
        assert _segment_of(x_ptr)[1]["state"] == "active_pending_free"
        assert _segment_of(y_ptr)[1]["state"] == "inactive"
        assert _empty(779 * 512).data_ptr() == y_ptr
    finally:
        hold.release()


def test_without_record_stream_the_block_is_reused_at_once():
    # The control for the test above: the same steps without record_stream reuse the block
    # while the other stream is held, so the held stream is what kept it from reuse there.
    side = DEV.Stream()
    x = _empty(775 * 512)
    ptr = x.data_ptr()
    with DEV.stream(side):
        hold = DEV._hold_stream()
    x.record_stream(DEV.current_stream())  # its own stream: no event, as CUDA
    del x
    try:
        assert _empty(775 * 512).data_ptr() == ptr
    finally:
        hold.release()


def test_record_stream_names_a_wrong_stream():
    x = _empty(16)
    if DEV.device_count() > 1:
        other = DEV.Stream(1)
        with pytest.raises(RuntimeError, match=rf"backplane {DEVICE}: record_stream of memory on {DEVICE}:0 expects a "
                                               rf"stream of {DEVICE}:0, got .*{DEVICE}:1"):
            x.record_stream(other)
    with pytest.raises(RuntimeError, match=rf"backplane {DEVICE}: record_stream expects an {DEVICE} stream, got one on cpu"):
        torch.ops.aten.record_stream(x, torch.Stream(device="cpu"))


def test_statistics_agree_with_a_count_kept_here():
    DEV.empty_cache()
    DEV.reset_peak_memory_stats()
    before = DEV.memory_stats()
    free_before, total = DEV.mem_get_info()
    # Large requests over 20 MiB get segments of their own (rounded to 2 MiB); small ones
    # (<= 1 MiB) are rounded to 512 bytes. Nothing cached can serve these after empty_cache.
    sizes = [22 * MiB, 30 * MiB + 1, 100, 512, 513, MiB]
    kept = [_empty(n) for n in sizes]
    rounded = [-(-n // 512) * 512 for n in sizes]
    large = [r for n, r in zip(sizes, rounded) if n > MiB]
    small = [r for n, r in zip(sizes, rounded) if n <= MiB]
    stats = DEV.memory_stats()

    def delta(key):
        return stats[key] - before[key]

    assert delta("allocation.all.current") == len(sizes)
    assert delta("allocated_bytes.all.current") == sum(rounded)
    assert delta("allocated_bytes.large_pool.current") == sum(large)
    assert delta("allocated_bytes.small_pool.current") == sum(small)
    assert delta("requested_bytes.all.current") == sum(sizes)
    assert delta("reserved_bytes.large_pool.current") == 22 * MiB + 32 * MiB
    assert stats["allocated_bytes.all.peak"] == stats["allocated_bytes.all.current"]
    assert DEV.memory_allocated() == stats["allocated_bytes.all.current"]
    assert DEV.memory_reserved() == stats["reserved_bytes.all.current"]
    assert DEV.mem_get_info() == (free_before - (DEV.memory_reserved() - before["reserved_bytes.all.current"]), total)
    # torch.accelerator asks the same allocator (c10::DeviceAllocator) and agrees.
    index = DEV.current_device()
    assert torch.accelerator.memory_stats(index) == stats
    assert torch.accelerator.memory_allocated(index) == DEV.memory_allocated()
    assert torch.accelerator.memory_reserved(index) == DEV.memory_reserved()
    if hasattr(torch.accelerator, "get_memory_info"):
        assert torch.accelerator.get_memory_info(index) == DEV.mem_get_info()
    peak = stats["allocated_bytes.all.current"]
    del kept
    after = DEV.memory_stats()
    assert after["allocated_bytes.all.current"] == before["allocated_bytes.all.current"]
    assert after["allocated_bytes.all.freed"] - before["allocated_bytes.all.freed"] == sum(rounded)
    assert DEV.max_memory_allocated() == peak
    assert after["reserved_bytes.all.current"] == stats["reserved_bytes.all.current"]  # cached, not returned
    torch.accelerator.empty_cache()
    assert DEV.memory_reserved() == before["reserved_bytes.all.current"]
    torch.accelerator.reset_peak_memory_stats(index)
    assert DEV.max_memory_allocated() == DEV.memory_allocated()
    DEV.reset_accumulated_memory_stats()
    assert DEV.memory_stats()["allocation.all.allocated"] == 0


def test_out_of_memory_names_the_request_and_the_memory_held():
    DEV.empty_cache()  # the failed request empties the cache first: the free memory named must be this
    stats = DEV.memory_stats()
    free, total = DEV.mem_get_info()
    request = total + 1
    with pytest.raises(torch.OutOfMemoryError) as error:
        _empty(request)
    assert str(error.value).startswith(
        f"backplane {DEVICE}: allocating {request} bytes on {DEVICE}:0 failed: out of memory; the device has {total} "
        f"bytes, {free} free; {stats['allocated_bytes.all.current']} bytes are allocated to tensors and ")
    assert "call torch.npu.empty_cache() to return cached memory to the device" in str(error.value)
    assert DEV.memory_stats()["num_ooms"] == stats["num_ooms"] + 1


def _run_program(name, **env):
    program = Path(__file__).parent / "programs" / name
    done = subprocess.run([sys.executable, str(program)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **env})
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.splitlines()


def test_a_small_device_returns_its_cache_before_failing():
    retries, message, held = _run_program("small_capacity.py", BACKPLANE_NPU_MEMORY_MB="64")
    assert retries == "1"  # the 50 MiB request fitted after the cached 40 MiB went back
    assert message == (f"backplane {DEVICE}: allocating {20 * MiB} bytes on {DEVICE}:0 failed: out of memory; the device "
                       f"has {64 * MiB} bytes, {14 * MiB} free; {50 * MiB} bytes are allocated to tensors and {50 * MiB} "
                       "reserved by the caching allocator (0 cached, unused; the cache was emptied of whole free "
                       "segments before this error). Free tensors or call torch.npu.empty_cache() to return cached "
                       "memory to the device; memory of a graph's private pool returns when the graph is released")
    assert held == f"{50 * MiB} {50 * MiB} {14 * MiB}"


def test_a_malformed_capacity_is_refused_by_name():
    done = subprocess.run([sys.executable, "-c", "import backplane; backplane.load('npu')"], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "BACKPLANE_NPU_MEMORY_MB": "64x"})
    assert done.returncode != 0
    assert "BACKPLANE_NPU_MEMORY_MB='64x': expected an integer from 1 to 1073741824 (MiB of memory per device)" in done.stderr


def test_snapshot_has_cuda_shape():
    x = _empty(3000)
    segment, block = _segment_of(x.data_ptr())
    assert set(segment) == {"device", "address", "total_size", "allocated_size", "active_size", "requested_size",
                            "stream", "segment_type", "segment_pool_id", "blocks"}
    assert segment["segment_type"] == "small" and segment["total_size"] == 2 * MiB
    assert segment["stream"] == DEV.current_stream().stream_id and segment["segment_pool_id"] == [0, 0]
    assert block == {"address": x.data_ptr(), "size": 3072, "requested_size": 3000, "state": "active_allocated"}
    assert sum(b["size"] for b in segment["blocks"]) == segment["total_size"]


def test_a_private_pool_keeps_its_blocks_until_released():
    pool = DEV.graph_pool_handle()
    capturing = DEV.Stream()
    DEV._memory._begin_allocate_to_pool(pool, capturing)
    with DEV.stream(capturing):
        x = _empty(4000)
    outside = _empty(4000)  # another stream: the general pool
    DEV._memory._end_allocate_to_pool(pool)
    segment = _segment_of(x.data_ptr())[0]
    assert segment["segment_pool_id"] == list(pool)
    assert _segment_of(outside.data_ptr())[0]["segment_pool_id"] == [0, 0]
    ptr = x.data_ptr()
    del x
    with DEV.stream(capturing):  # after end: the general pool, never the pool's free block
        general = _empty(4000)
    assert general.data_ptr() != ptr
    DEV.empty_cache()  # a live pool's free segment is not the general cache's: it stays
    assert any(s["segment_pool_id"] == list(pool) for s in DEV.memory_snapshot())
    DEV._memory._begin_allocate_to_pool(pool, capturing)  # a second capture into the same pool reuses it
    with DEV.stream(capturing):
        again = _empty(4000)
    DEV._memory._end_allocate_to_pool(pool)
    assert again.data_ptr() == ptr
    reserved = DEV.memory_reserved()
    DEV._memory._release_pool(pool)  # one reference per begin: the first release keeps the pool
    assert DEV.memory_reserved() == reserved
    DEV._memory._release_pool(pool)
    assert DEV.memory_reserved() == reserved  # `again` still lives in its segment
    del again
    assert DEV.memory_reserved() == reserved - 2 * MiB  # the last block's free returned the segment
    assert not any(s["segment_pool_id"] == list(pool) for s in DEV.memory_snapshot())


def test_private_pool_misuse_is_named():
    pool, stream = DEV.graph_pool_handle(), DEV.Stream()
    text = f"({pool[0]}, {pool[1]}) on {DEVICE}:0"
    with pytest.raises(RuntimeError, match=rf"a private memory pool needs an id other than \(0, 0\)"):
        DEV._memory._begin_allocate_to_pool((0, 0), stream)
    with pytest.raises(RuntimeError, match=rf"end_allocate_to_pool: no allocations are routed to memory pool "
                                           rf"{re.escape(text)}; expected a begin_allocate_to_pool first"):
        DEV._memory._end_allocate_to_pool(pool)
    with pytest.raises(RuntimeError, match=rf"release_pool: no memory pool {re.escape(text)}"):
        DEV._memory._release_pool(pool)
    DEV._memory._begin_allocate_to_pool(pool, stream)
    with pytest.raises(RuntimeError, match=rf"memory pool {re.escape(text)} already has allocations routed to it; "
                                           "expected end_allocate_to_pool first"):
        DEV._memory._begin_allocate_to_pool(pool, stream)
    with pytest.raises(RuntimeError, match=rf"release_pool: memory pool {re.escape(text)} still has allocations routed"):
        DEV._memory._release_pool(pool)
    DEV._memory._end_allocate_to_pool(pool)
    DEV._memory._release_pool(pool)


def test_pinned_blocks_are_cached_and_copies_stay_right():
    DEV.empty_host_cache()
    before = DEV.host_memory_stats()
    a = torch.arange(1000.0).pin_memory()
    ptr = a.data_ptr()
    on_device = a.to(DEVICE, non_blocking=True)
    back = torch.empty(1000).pin_memory()
    back.copy_(on_device, non_blocking=True)
    DEV.synchronize()
    torch.testing.assert_close(back, torch.arange(1000.0), rtol=0, atol=0)
    assert DEV.host_memory_stats()["allocations"] == before["allocations"] + 2
    del a
    again = torch.empty(1000).pin_memory()
    assert again.data_ptr() == ptr and again.is_pinned()  # same size class (4 KiB): the cached block
    assert DEV.host_memory_stats()["reserved_bytes"] == before["reserved_bytes"] + 2 * 4096
    del again, back
    DEV.empty_host_cache()
    assert DEV.host_memory_stats() == before


# ctypes narrows a Python int to a C int without a word: every function taking a device
# must refuse an index out of range by name, never wrap it to another device.
MEMORY_DEVICE_TAKERS = ["memory_stats", "memory_allocated", "memory_reserved", "max_memory_reserved",
                        "reset_accumulated_memory_stats", "mem_get_info", "memory_snapshot"]


@pytest.mark.parametrize("name", MEMORY_DEVICE_TAKERS)
def test_device_indices_are_refused_not_wrapped(name):
    count = DEV.device_count()
    with pytest.raises(RuntimeError, match=rf"backplane {DEVICE}: device index {2**32 + 1} out of range; "
                                           rf"expected 0 <= index < {count}"):
        getattr(DEV, name)(2**32 + 1)
