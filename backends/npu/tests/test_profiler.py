"""Device time in torch.profiler on the npu device: each kernel a stream worker runs while
a profile records ProfilerActivity.PrivateUse1 is a device event on its device and stream,
counted as device time of the op that queued it, and drawn on its stream's row of the
Chrome trace. `backplane new-backend NAME --dispatch-key PrivateUse1` copies this file with
the device renamed.
Run: python -m pytest tests (the plugin on BACKPLANE_PLUGIN_PATH or installed)."""
import json
import time

import pytest
import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

import backplane

backplane.load("npu")

pytestmark = pytest.mark.skipif(not torch.npu._profiler.is_available(), reason="this torch has no Kineto")


def _profile(fn, activities=(ProfilerActivity.CPU, ProfilerActivity.PrivateUse1)):
    with profile(activities=list(activities)) as prof:
        fn()
    return prof


def _kernels(prof):
    """The device events, in the order they started."""
    found = [e for e in prof.events() if e.device_type == DeviceType.PrivateUse1]
    return sorted(found, key=lambda e: e.time_range.start)


def _host_op(prof, name):
    """The op called by the test (an op may call itself inside, on other tensors)."""
    events = prof.events() if hasattr(prof, "events") else prof.function_events  # torch.profiler, autograd's
    (event,) = [e for e in events if e.name == name and e.device_type == DeviceType.CPU and e.cpu_parent is None]
    return event


def _has_device_kernel(op):
    return torch._C._dispatch_has_kernel_for_dispatch_key(op, "PrivateUse1")


def test_each_kernel_is_device_time_of_its_op_on_its_stream():
    a, b = torch.randn(32, 32).to("npu"), torch.randn(32, 32).to("npu")
    side = torch.npu.Stream()
    torch.npu.synchronize()

    def work():
        torch.mm(a, b)  # a device kernel of the device layer (aten/matmul.cpp)
        torch.add(a, b)  # no device kernel: the CPU fallback, whose device work is its copies
        with torch.npu.stream(side):
            a.new_empty(64).fill_(2.0)

    prof = _profile(work)
    kernels = _kernels(prof)
    assert all(k.time_range.end > k.time_range.start for k in kernels), [(k.name, k.time_range) for k in kernels]
    assert all(k.device_index == 0 for k in kernels)
    by_name = {k.name: k for k in kernels}
    assert by_name["aten::mm"].device_resource_id == 0  # the default stream
    assert by_name["aten::fill_"].device_resource_id == side.stream_id
    assert "copy npu to cpu" in by_name and "copy cpu to npu" in by_name

    mm = _host_op(prof, "aten::mm")
    assert [k.name for k in mm.kernels] == ["aten::mm"]  # attributed to the op that queued it
    assert mm.device_time_total == pytest.approx(by_name["aten::mm"].time_range.elapsed_us())
    assert _host_op(prof, "aten::add").device_time_total > 0  # its copies, through its children
    averages = {e.key: e for e in prof.key_averages()}
    assert averages["aten::mm"].device_time_total > 0 and averages["aten::fill_"].device_time_total > 0


def test_a_backplane_op_has_device_time():
    if not _has_device_kernel("backplane::rms_norm"):
        pytest.skip("backplane::rms_norm has no kernel on this device yet")
    x, w = torch.randn(8, 64).to("npu"), torch.ones(64).to("npu")
    torch.npu.synchronize()
    prof = _profile(lambda: torch.ops.backplane.rms_norm(x, w, 1e-6))
    op = _host_op(prof, "backplane::rms_norm")
    assert [k.name for k in op.kernels] == ["backplane::rms_norm"] and op.device_time_total > 0


def test_kernels_on_one_stream_run_in_queue_order():
    a = torch.randn(16, 16).to("npu")
    torch.npu.synchronize()

    def work():
        y = torch.mm(a, a)
        y.fill_(1.0)
        torch.mm(y, a)
        y.fill_(2.0)

    kernels = [k for k in _kernels(_profile(work)) if k.device_resource_id == 0]
    assert [k.name for k in kernels] == ["aten::mm", "aten::fill_", "aten::mm", "aten::fill_"]
    for first, second in zip(kernels, kernels[1:]):
        assert second.time_range.start >= first.time_range.end


def test_chrome_trace_puts_device_work_on_its_streams_row(tmp_path):
    side = torch.npu.Stream()
    a = torch.randn(16, 16).to("npu")
    two = torch.npu.device_count() >= 2
    other = torch.randn(16, 16).to("npu:1") if two else None
    torch.npu.synchronize()

    def work():
        torch.mm(a, a)
        with torch.npu.stream(side):
            torch.mm(a, a)
        if two:
            torch.mm(other, other)
            torch.npu.synchronize(1)  # the profiler waits for the current device only, as for CUDA

    path = tmp_path / "trace.json"
    _profile(work).export_chrome_trace(str(path))
    events = json.loads(path.read_text())["traceEvents"]
    rows = {(e["pid"], e["tid"]) for e in events if e.get("cat") == "kernel" and e["name"] == "aten::mm"}
    expected = {(0, 0), (0, side.stream_id)} | ({(1, 0)} if two else set())
    assert rows == expected
    names = {(e["pid"], e["name"]): e["args"] for e in events if e.get("ph") == "M" and e["pid"] in (0, 1)}
    assert names[(0, "process_name")]["name"] == "npu:0"
    if two:
        assert names[(1, "process_name")]["name"] == "npu:1"
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    assert threads[(0, 0)] == "stream 0 (default)" and threads[(0, side.stream_id)] == f"stream {side.stream_id}"


def test_nothing_is_timed_unless_a_profile_records_the_device():
    a = torch.randn(16, 16).to("npu")
    torch.npu.synchronize()
    before = torch.npu._profiler._kernels_recorded()
    torch.mm(a, a)
    prof = _profile(lambda: torch.mm(a, a), activities=[ProfilerActivity.CPU])
    torch.npu.synchronize()
    assert torch.npu._profiler._kernels_recorded() == before
    assert _kernels(prof) == []


def test_each_profile_sees_only_its_own_kernels():
    a = torch.randn(16, 16).to("npu")
    torch.npu.synchronize()
    first = _profile(lambda: torch.mm(a, a))
    torch.mm(a, a).fill_(0.0)  # between the profiles: in neither
    torch.npu.synchronize()
    second = _profile(lambda: a.new_empty(4).fill_(1.0))
    assert [k.name for k in _kernels(first)] == ["aten::mm"]
    assert [k.name for k in _kernels(second)] == ["aten::fill_"]


@pytest.mark.skipif(torch.npu.device_count() < 2, reason="needs two devices")
def test_a_kernel_begun_in_one_profile_is_in_no_later_one():
    # A profile waits for the current device only: a long product on npu:1, begun in the
    # first profile, is still running when the second starts. It is not the second's.
    big = torch.randn(2000, 2000).to("npu:1")
    torch.npu.synchronize(1)

    def begin_a_long_product():
        torch.mm(big, big)
        time.sleep(0.05)  # the idle stream's worker starts it at once; a product takes longer

    _profile(begin_a_long_product)
    second = _profile(lambda: torch.npu.synchronize(1))
    assert [k.name for k in _kernels(second)] == []


def test_legacy_profiler_times_ops_with_device_events():
    # torch.autograd.profiler without Kineto: an event on the current stream as each op
    # begins and ends; the device time between them is the op's.
    a = torch.randn(64, 64).to("npu")
    torch.npu.synchronize()
    with torch.autograd.profiler.profile(use_device="npu") as prof:
        torch.mm(a, a)
    mm = _host_op(prof, "aten::mm")
    assert mm.device_time_total > 0


def test_device_clock_is_its_own():
    # Kernels are stamped on the device's timer, which shares no origin with host time: a
    # trace that showed its readings unmapped would put them decades from the host's events.
    host_ns = time.time_ns()
    assert abs(host_ns - torch.npu._profiler._device_clock_ns(0)) > 10 * 365 * 86400 * 10**9
    with pytest.raises(RuntimeError, match="device index 99 out of range"):
        torch.npu._profiler._device_clock_ns(99)


def test_chrome_trace_puts_each_kernel_inside_its_host_op(tmp_path):
    # A copy to the host waits for its kernel inside aten::copy_, so the kernel, stamped on
    # the device's clock and mapped to host time, must lie within that op's range: on
    # every device, each with a clock of its own.
    devices = range(min(torch.npu.device_count(), 2))
    tensors = [torch.randn(256, 256).to(f"npu:{d}") for d in devices]
    torch.npu.synchronize()
    path = tmp_path / "trace.json"
    _profile(lambda: [t.cpu() for t in tensors]).export_chrome_trace(str(path))
    events = json.loads(path.read_text())["traceEvents"]
    copies = sorted((e for e in events if e.get("cat") == "cpu_op" and e["name"] == "aten::copy_"),
                    key=lambda e: e["ts"])
    kernels = sorted((e for e in events if e.get("cat") == "kernel" and e["name"] == "copy npu to cpu"),
                     key=lambda e: e["ts"])
    assert [k["pid"] for k in kernels] == list(devices)
    assert len(copies) == len(kernels)
    for host, kernel in zip(copies, kernels):
        assert host["ts"] <= kernel["ts"] and kernel["ts"] + kernel["dur"] <= host["ts"] + host["dur"], (host, kernel)
