"""npu streams and events: kernels and copies wait for the work queued before them, a side
stream needs a wait, a failure in queued work surfaces at synchronize, bad device and
stream ids raise instead of aborting, and bad arguments are refused at the call."""
from pathlib import Path

import pytest
import torch

from npu_common import QUIET_FALLBACK, run_alone, same

pytestmark = QUIET_FALLBACK


def test_kernels_wait_for_their_stream():
    # The copy below is queued (pinned source, non_blocking) behind a hold; a kernel
    # that ran at once instead of on the stream would read x before the copy: NaN.
    src = torch.arange(1000.0).pin_memory()
    assert src.is_pinned()
    x = torch.empty(1000, device="npu")
    hold = torch.npu._hold_stream()
    x.copy_(src, non_blocking=True)
    y = torch.ops.backplane.identity_conv(x)
    torch.ops.backplane.scale_(y, 2.0)
    assert not torch.npu.current_stream().query()
    hold.release()
    same(y, torch.arange(1000.0) * 2)


def test_copy_to_cpu_waits_for_queued_work():
    x = torch.arange(100.0, device="npu")
    hold = torch.npu._hold_stream()
    y = torch.ops.backplane.identity_conv(x)
    dst = torch.full((100,), -1.0)
    torch.npu._set_skip_host_waits(True)
    try:
        dst.copy_(y)  # without its host wait the copy returns before it ran
        assert torch.equal(dst, torch.full((100,), -1.0))
    finally:
        torch.npu._set_skip_host_waits(False)
        hold.release()
    torch.npu.synchronize()
    same(dst, torch.arange(100.0))
    same(y, torch.arange(100.0))


def test_side_stream_needs_a_wait():
    x = torch.arange(64.0, device="npu")
    side = torch.npu.Stream()
    with torch.npu.stream(side):
        hold = torch.npu._hold_stream()
        y = torch.ops.backplane.identity_conv(x)  # queued on the held side stream
    assert torch.npu.current_stream() != side
    assert y.cpu().isnan().all()  # the default stream read y before the side stream wrote it
    torch.npu.current_stream().wait_stream(side)
    dst = torch.empty(64).pin_memory()
    dst.copy_(y, non_blocking=True)  # queued behind the wait
    hold.release()
    torch.npu.synchronize()
    same(dst, torch.arange(64.0))


def test_failure_in_queued_work_surfaces_at_synchronize():
    torch.npu._queue_failure("boom", device=1)
    with pytest.raises(RuntimeError, match=r"backplane npu: work queued on npu:1 stream 0 failed: test failure: boom"):
        torch.npu.synchronize(1)
    torch.npu.synchronize(1)  # reported once, then cleared


def test_events_and_elapsed_time():
    start, end = torch.npu.Event(enable_timing=True), torch.npu.Event(enable_timing=True)
    x = torch.randn(1000, device="npu")
    start.record()
    torch.ops.backplane.scale_(x, 2.0)
    end.record()
    end.synchronize()
    assert start.query() and end.query()
    assert start.elapsed_time(end) >= 0
    plain = torch.npu.Event()
    plain.record()
    with pytest.raises(ValueError, match="Both events must be created with argument 'enable_timing=True'"):
        start.elapsed_time(plain)


def test_bad_device_and_stream_ids_raise_and_never_abort():
    # c10 reaches the plugin through noexcept functions for these: a check that threw
    # there aborted the process. Each must be a RuntimeError naming the id and the range.
    done = run_alone(Path(__file__).with_name("programs") / "bad_device_and_stream_ids.py")
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("refused:") == 7, done.stdout
    assert done.stdout.split()[-1] == "2.0"


def test_bad_scalars_are_refused_at_the_call_not_at_the_next_synchronize():
    a, b = torch.ones(3, device="npu"), torch.ones(3, device="npu")
    with pytest.raises(TypeError, match="backplane::add: argument 'alpha' is a bool \\(True\\)"):
        torch.ops.backplane.add(a, b, alpha=True)
    torch.npu.synchronize()  # nothing failed in queued work
