"""The npu's c10d backend (collectives/): each collective runs on a communication stream
of its own, after the work already queued on the issuing stream, and the call returns
without waiting. A group of one process, so every order below is fixed by holding a
stream (the driver's test switch), not by timing. `backplane new-backend NAME
--dispatch-key PrivateUse1` copies this file with the device renamed."""
import contextlib
import threading

import pytest
import torch
import torch.distributed as dist

import backplane

backplane.load("npu")
from backplane_npu._collectives import comm_stream  # noqa: E402 (the plugin's package: on the path once loaded)

pytestmark = [pytest.mark.skipif(not dist.is_available(), reason="this torch has no torch.distributed"),
              pytest.mark.filterwarnings("ignore:backplane npu:UserWarning"),
              pytest.mark.filterwarnings("ignore:`torch.distributed.:FutureWarning")]
SAFETY_RELEASE_S = 20  # only where the code under test is wrong: a hold it would wait on forever


@pytest.fixture
def group(monkeypatch):
    monkeypatch.delenv("BACKPLANE_NPU_SYNC_COLLECTIVES", raising=False)
    dist.init_process_group(store=dist.HashStore(), rank=0, world_size=1)
    try:
        yield dist.group.WORLD
        torch.npu.synchronize()
    finally:
        dist.destroy_process_group()


def same(got, expected):
    torch.testing.assert_close(got.cpu(), expected, rtol=0, atol=0)


@contextlib.contextmanager
def held(stream=None):
    """Holds `stream` (the current stream if None) inside the block. Where the code under
    test wrongly waits for the held work, a safety timer releases it and the block's
    `late` is set, so the test fails instead of hanging."""
    with torch.npu.stream(stream) if stream is not None else contextlib.nullcontext():
        hold = torch.npu._hold_stream()
    late = threading.Event()
    safety = threading.Timer(SAFETY_RELEASE_S, lambda: (late.set(), hold.release()))
    safety.start()
    try:
        yield late
    finally:
        safety.cancel()
        if not late.is_set():
            hold.release()


def test_a_collective_waits_for_the_work_queued_before_it(group):
    x, out = torch.ones(64, device="npu"), torch.zeros(64, device="npu")
    with held() as late:
        x.fill_(3.0)  # queued behind the hold
        work = dist.all_gather_into_tensor(out, x, async_op=True)  # returns: the host does not wait for it
        assert not late.is_set(), "the call waited for the held stream"
        assert not work.is_completed()  # and it cannot have run: its input is not made yet
    work.wait()
    same(out, torch.full((64,), 3.0))  # the filled x, not the ones before it
    assert comm_stream() != torch.npu.current_stream()


def test_a_collective_leaves_the_issuing_stream_free(group):
    dist.all_reduce(torch.ones(1, device="npu"))  # the group's communication stream exists from here
    y, out, z = torch.full((8,), 2.0, device="npu"), torch.zeros(8, device="npu"), torch.empty(4, device="npu")
    with held(comm_stream()) as late:  # nothing on the communication stream runs until released
        work = dist.all_gather_into_tensor(out, y, async_op=True)
        z.fill_(3.0)  # on the issuing stream
        torch.npu.current_stream().synchronize()  # waits for z alone, not for the held collective
        assert not late.is_set(), "the issuing stream waited for the collective"
        same(z, torch.full((4,), 3.0))
        assert not work.is_completed()
        same(out, torch.zeros(8))  # the collective has not run
    work.wait()  # the current stream waits for the collective
    same(out, torch.full((8,), 2.0))


def test_wait_orders_the_current_stream_after_the_collective(group):
    dist.all_reduce(torch.ones(1, device="npu"))
    x, out = torch.full((16,), 4.0, device="npu"), torch.zeros(16, device="npu")
    with held(comm_stream()) as late:
        work = dist.all_gather_into_tensor(out, x, async_op=True)
        work.wait()  # the host goes on; the current stream waits for the held collective
        copied = out.clone()  # queued after that wait: reads the gathered out
        assert not late.is_set(), "the host waited for the collective"
        assert not work.is_completed()
    same(copied, torch.full((16,), 4.0))


def test_the_future_waits_on_the_device(group):
    x = torch.full((4,), 5.0, device="npu")
    future = dist.all_reduce(x, async_op=True).get_future()
    doubled = future.then(lambda f: f.value()[0] * 2)  # runs here, on this thread
    same(doubled.wait(), torch.full((4,), 10.0))


def test_a_failure_on_the_stream_reaches_the_issuing_stream(group):
    x = torch.ones(4, dtype=torch.uint16, device="npu")  # gloo has no uint16: it fails on the stream
    work = dist.all_reduce(x, async_op=True)
    work.get_future().wait()  # the current stream waits for the collective; the host does not, and cannot raise
    with pytest.raises(RuntimeError, match=r"npu_gloo: all_reduce failed: Invalid scalar type"):
        torch.npu.current_stream().synchronize()
    assert not work.is_success()
    with pytest.raises(RuntimeError, match=r"^npu_gloo: all_reduce failed: Invalid scalar type"):
        work.wait()
    with pytest.raises(RuntimeError, match=r"stream \d+ failed: npu_gloo: all_reduce: Invalid scalar type"):
        torch.npu.synchronize()  # the communication stream keeps its copy for its own synchronize


def test_cpu_tensors_and_barrier_finish_before_the_call_returns(group):
    x = torch.full((3,), 2.0)
    work = dist.all_reduce(x, async_op=True)
    assert work.is_completed()
    same(x, torch.full((3,), 2.0))
    dist.barrier()


def test_refusals_name_what_was_expected(group):
    x = torch.ones(4, device="npu")
    with pytest.raises(NotImplementedError, match=r"^npu_gloo: all_reduce does not support ReduceOp.PREMUL_SUM; "
                                                  r"supported: SUM, PRODUCT, MIN, MAX, BAND, BOR, BXOR, AVG"):
        dist.all_reduce(x, op=dist._make_nccl_premul_sum(2.0))
    with pytest.raises(NotImplementedError, match=r"^npu_gloo: all_reduce with ReduceOp.AVG needs floating-point "
                                                  r"tensors; got torch.int32"):
        dist.all_reduce(torch.ones(2, dtype=torch.int32, device="npu"), op=dist.ReduceOp.AVG)
    with pytest.raises(RuntimeError, match=r"^npu_gloo: all_gather_into_tensor expected an output of 4 elements "
                                           r"\(the input's 4 times the group size 1\); got 3"):
        dist.all_gather_into_tensor(torch.empty(3, device="npu"), x)
    with pytest.raises(RuntimeError, match=r"^npu_gloo: reduce_scatter_tensor expected an input of 2 elements "
                                           r"\(the output's 2 times the group size 1\); got 4"):
        dist.reduce_scatter_tensor(torch.empty(2, device="npu"), x)
    with pytest.raises(RuntimeError, match=r"^npu_gloo: all_to_all_single expected input_split_sizes to add up to "
                                           r"the input's first dimension 4; they add up to 3"):
        dist.all_to_all_single(torch.empty(4, device="npu"), x, [4], [3])
    with pytest.raises(RuntimeError, match=r"^npu_gloo: all_to_all_single expected 1 output_split_sizes \(one per "
                                           r"rank\); got 2"):
        dist.all_to_all_single(torch.empty(4, device="npu"), x, [2, 2], [4])
    same(x, torch.ones(4))  # refused before anything was queued


def test_tensors_of_another_device_are_refused(group):
    if torch.npu.device_count() < 2:
        pytest.skip("needs two npu devices")
    dist.all_reduce(torch.ones(1, device="npu:0"))
    with pytest.raises(RuntimeError, match=r"^npu_gloo: all_reduce got tensors on npu:1; this group runs on npu:0 "
                                           r"\(the device of its first collective\): one npu device per group"):
        dist.all_reduce(torch.ones(1, device="npu:1"))
    with pytest.raises(RuntimeError, match=r"^npu_gloo: all_gather_into_tensor takes npu tensors or CPU tensors; "
                                           r"got both \(npu:0 and cpu\)"):
        dist.all_gather_into_tensor(torch.empty(1), torch.ones(1, device="npu:0"))


def test_a_synchronous_group_waits_on_the_host(monkeypatch):
    monkeypatch.setenv("BACKPLANE_NPU_SYNC_COLLECTIVES", "1")
    dist.init_process_group(store=dist.HashStore(), rank=0, world_size=1)
    try:
        x, out = torch.ones(8, device="npu"), torch.zeros(8, device="npu")
        x.fill_(2.0)
        work = dist.all_gather_into_tensor(out, x, async_op=True)
        assert work.is_completed()  # the host waited for it, and for the fill before it
        same(out, torch.full((8,), 2.0))
    finally:
        dist.destroy_process_group()


def test_a_malformed_synchronous_switch_is_refused(monkeypatch):
    monkeypatch.setenv("BACKPLANE_NPU_SYNC_COLLECTIVES", "yes")
    with pytest.raises(ValueError, match=r"^BACKPLANE_NPU_SYNC_COLLECTIVES: expected 0 or 1; got 'yes'$"):
        dist.init_process_group(store=dist.HashStore(), rank=0, world_size=1)
    if dist.is_initialized():
        dist.destroy_process_group()
