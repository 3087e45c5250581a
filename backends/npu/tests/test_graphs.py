"""Graph capture and replay on the npu device (torch.npu.NPUGraph, torch.npu.graph, and
torch.accelerator.Graph where torch has it): a captured training step replayed equals
eager, refusals during capture, and the private memory pool.

Copied into every PrivateUse1 scaffold (renamed): capture is the driver's and the
device's, so a fresh device passes these before its first kernel.
"""
from __future__ import annotations

import pytest
import torch

import backplane

backplane.load("npu")

DEVICE = "npu"
DEV = getattr(torch, DEVICE)
# These two compile: a device made `--without compile` has no torch.compile to capture.
needs_compile = pytest.mark.skipif("compile" not in DEV.PARTS, reason="this device was made --without compile")


def _model(optimizer: str):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4)).to(DEVICE)
    if optimizer == "sgd":
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    else:  # Adam's step counter must live on the device for a replay to advance it
        opt = torch.optim.AdamW(model.parameters(), lr=0.01, capturable=True, foreach=False)
    return model, opt


def _step(model, opt, x, y):
    opt.zero_grad(set_to_none=True)
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    return loss


def _batches(n):
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(5, 8, generator=g), torch.randn(5, 4, generator=g)) for _ in range(n)]


@pytest.mark.parametrize("optimizer", ["sgd", "adamw"])
def test_captured_training_step_replayed_equals_eager(optimizer):
    warmup, batches = _batches(2), _batches(12)[2:]
    eager, eager_opt = _model(optimizer)
    expected = []
    for x, y in warmup + batches:
        expected.append(_step(eager, eager_opt, x.to(DEVICE), y.to(DEVICE)).cpu())

    model, opt = _model(optimizer)
    for x, y in warmup:  # optimizer state is created eagerly, before capture
        _step(model, opt, x.to(DEVICE), y.to(DEVICE))
    static_x, static_y = torch.zeros(5, 8, device=DEVICE), torch.zeros(5, 4, device=DEVICE)
    g = DEV.NPUGraph()
    with DEV.graph(g):
        static_loss = _step(model, opt, static_x, static_y)
    assert g.node_count() > 10
    losses = []
    for x, y in batches:
        static_x.copy_(x)
        static_y.copy_(y)
        g.replay()
        losses.append(static_loss.cpu())
    for got, want in zip(losses, expected[2:]):
        torch.testing.assert_close(got, want, rtol=0, atol=0)
    for p, q in zip(model.parameters(), eager.parameters()):
        torch.testing.assert_close(p.cpu(), q.cpu(), rtol=0, atol=0)


def test_capture_records_instead_of_running():
    x = torch.ones(4, device=DEVICE)
    g = DEV.NPUGraph()
    with DEV.graph(g):
        x.mul_(3)  # the CPU fallback, queued in stream order while capturing
        assert DEV.is_current_stream_capturing()
    assert not DEV.is_current_stream_capturing()
    torch.testing.assert_close(x.cpu(), torch.ones(4))  # capture ran nothing
    g.replay()
    g.replay()
    torch.testing.assert_close(x.cpu(), torch.full((4,), 9.0))


def test_outputs_live_in_the_graphs_private_pool_at_fixed_addresses():
    x = torch.arange(6.0, device=DEVICE)
    g = DEV.NPUGraph()
    with DEV.graph(g):
        y = (x * 2).sum()
    address = y.data_ptr()
    pools = [s["segment_pool_id"] for s in DEV.memory_snapshot()
             if s["address"] <= address < s["address"] + s["total_size"]]
    assert pools == [list(g.pool())] and g.pool() != (0, 0)
    for _ in range(3):
        g.replay()
    assert y.data_ptr() == address and y.item() == 30.0


def test_replay_after_reset_is_refused():
    x = torch.ones(3, device=DEVICE)
    g = DEV.NPUGraph()
    with DEV.graph(g):
        x.add_(1)
    g.replay()
    g.reset()  # drops the recording and releases its pool
    with pytest.raises(RuntimeError, match=r"NPUGraph.replay: nothing to replay: this graph has no capture \(never "
                                           r"captured, or reset\(\) released it and its memory pool\)"):
        g.replay()
    torch.testing.assert_close(x.cpu(), torch.full((3,), 2.0))
    with pytest.raises(RuntimeError, match="nothing to replay"):
        DEV.NPUGraph().replay()


_REFUSED = r"waiting for npu:0 stream \d while it captures a graph is refused: a host read \(.item\(\), .cpu\(\), print\)"


@pytest.mark.parametrize("read", [lambda t: t.sum().item(), lambda t: t.cpu(), lambda t: DEV.synchronize()],
                         ids=["item", "cpu", "synchronize"])
def test_host_read_or_synchronize_during_capture_is_refused(read):
    x = torch.ones(3, device=DEVICE)
    g = DEV.NPUGraph()
    with pytest.raises(RuntimeError, match=_REFUSED):
        with DEV.graph(g):
            read(x * 2)
    with pytest.raises(RuntimeError, match="nothing to replay"):  # the spoilt capture kept nothing
        g.replay()
    assert not DEV.is_current_stream_capturing()
    torch.testing.assert_close((x + 1).cpu(), torch.full((3,), 2.0))  # the device works on


def test_spoilt_capture_raises_at_its_end():
    x = torch.ones(3, device=DEVICE)
    g = DEV.NPUGraph()
    s = DEV.Stream()
    with DEV.stream(s):
        g.capture_begin()
        with pytest.raises(RuntimeError, match=_REFUSED):
            x.sum().item()
        with pytest.raises(RuntimeError, match=r"the graph capture on npu:0 stream \d was spoilt by a call refused "
                                               r"during it .* nothing was captured"):
            g.capture_end()


def _wait_for_captured_event():
    e = DEV.Event()
    e.record()
    e.synchronize()


@pytest.mark.parametrize("work, message", [
    (_wait_for_captured_event, r"synchronizing an event failed: not permitted while the stream captures a graph"),
    (lambda: torch.randn(4, device=DEVICE),
     r"aten::normal_ has no npu kernel and draws random numbers; while a graph captures, the CPU fallback cannot run it"),
], ids=["event-wait", "random-op-in-fallback"])
def test_work_a_capture_cannot_hold_is_refused(work, message):
    g = DEV.NPUGraph()
    with pytest.raises(RuntimeError, match=message):
        with DEV.graph(g):
            work()
    with pytest.raises(RuntimeError, match="nothing to replay"):
        g.replay()


def test_capture_misuse_is_refused():
    g = DEV.NPUGraph()
    with pytest.raises(RuntimeError, match="NPUGraph.capture_end: this graph is not capturing; expected capture_begin"):
        g.capture_end()
    with pytest.raises(ValueError, match=r"capture_error_mode must be one of .*, got 'loose'"):
        g.capture_begin(capture_error_mode="loose")
    with pytest.raises(TypeError, match=r"expected a graph pool as a pair of non-negative ints .*, got 'pool'"):
        g.capture_begin(pool="pool")
    s = DEV.Stream()
    with DEV.stream(s):
        g.capture_begin()
        other = DEV.NPUGraph()
        with pytest.raises(RuntimeError, match=r"stream \d captures another graph already; expected one capture per "
                                               r"stream at a time"):
            other.capture_begin()
        with pytest.raises(RuntimeError, match="this graph is capturing already; expected capture_end first"):
            g.capture_begin()
        g.capture_end()
    with pytest.raises(RuntimeError, match=r"holds a capture already; expected reset\(\) before capturing again"):
        g.capture_begin()


def test_graphs_share_a_pool():
    x = torch.ones(2, device=DEVICE)
    first, second = DEV.NPUGraph(), DEV.NPUGraph()
    with DEV.graph(first):
        y = x + 1
    with DEV.graph(second, pool=first.pool()):
        z = y * 10
    assert second.pool() == first.pool()
    first.replay()
    second.replay()
    torch.testing.assert_close(z.cpu(), torch.full((2,), 20.0))
    first.reset()  # the pool stays while the second graph holds it
    second.replay()
    torch.testing.assert_close(z.cpu(), torch.full((2,), 20.0))


@pytest.mark.skipif(not hasattr(torch.accelerator, "Graph"), reason="torch.accelerator.Graph is new in torch 2.12")
def test_accelerator_graph_runs_on_the_device():
    x = torch.ones(3, device=DEVICE)
    g = torch.accelerator.Graph()
    with DEV.stream(DEV.Stream()):
        g.capture_begin()
        x.mul_(2)
        g.capture_end()
    g.replay()
    g.replay()
    torch.testing.assert_close(x.cpu(), torch.full((3,), 4.0))
    g.reset()
    with pytest.raises(RuntimeError, match="nothing to replay"):
        g.replay()


@pytest.mark.skipif(not hasattr(torch.accelerator, "Graph"), reason="torch.accelerator.Graph is new in torch 2.12")
def test_accelerator_graph_as_a_context_manager_empties_the_pinned_cache():
    # __enter__ calls torch.accelerator.empty_host_cache(), which reaches the device's pinned
    # host allocator through at::getHostAllocator(PrivateUse1) (host_allocator_registration.cpp).
    torch.empty(1000, pin_memory=True)  # one pinned block, cached once the temporary is freed
    assert DEV.host_memory_stats()["reserved_bytes"] > DEV.host_memory_stats()["allocated_bytes"]
    x = torch.ones(3, device=DEVICE)
    g = torch.accelerator.Graph()
    with DEV.stream(DEV.Stream()):
        with g:
            x.add_(1)
    stats = DEV.host_memory_stats()
    assert stats["reserved_bytes"] == stats["allocated_bytes"]  # the cached block went back
    torch.testing.assert_close(x.cpu(), torch.ones(3))  # capture ran nothing
    g.replay()
    torch.testing.assert_close(x.cpu(), torch.full((3,), 2.0))


@needs_compile
def test_compiled_kernels_are_captured_and_replayed():
    def fn(x, w):
        return torch.nn.functional.silu(x * 2 + 1) @ w

    compiled = torch.compile(fn)
    x, w = torch.randn(4, 8, device=DEVICE), torch.randn(8, 3, device=DEVICE)
    compiled(x, w)  # compiles outside the capture
    g = DEV.NPUGraph()
    with DEV.graph(g):
        out = compiled(x, w)
    fresh = torch.randn(4, 8)
    x.copy_(fresh)
    g.replay()
    torch.testing.assert_close(out.cpu(), fn(fresh, w.cpu()), rtol=1e-5, atol=1e-5)


@needs_compile
def test_reduce_overhead_warns_once_that_it_runs_without_graphs():
    import warnings

    from backplane_npu.compile import _reduce_overhead

    _reduce_overhead._warned = False
    x = torch.ones(8, device=DEVICE)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert torch.compile(lambda t: (t * 2 + 1).sum(), mode="reduce-overhead")(x).item() == 24.0
        assert torch.compile(lambda t: (t * 3).sum(), mode="reduce-overhead")(x).item() == 24.0
    messages = [str(w.message) for w in caught if "reduce-overhead" in str(w.message)]
    assert messages == [_reduce_overhead.MESSAGE]
    assert messages[0].startswith('backplane npu: torch.compile(mode="reduce-overhead") runs without device graphs on '
                                  'npu')
