"""torch.compile with Inductor on the npu device: generated kernels queued on its streams.

Copied into every PrivateUse1 scaffold (renamed): a new device passes these from its
first build, since its generated code runs over the emulated driver like its kernels.
"""
from __future__ import annotations

import threading

import pytest
import torch

import backplane

backplane.load("npu")

from torch._inductor.utils import fresh_inductor_cache, run_and_get_code  # noqa: E402  (after the device registers)

DEVICE = "npu"
DEV = getattr(torch, DEVICE)


def fn(x, w):
    return torch.nn.functional.silu(x * 2 + 1) @ w + (x * x).sum(-1, keepdim=True)


def test_compiled_code_runs_fused_kernels_on_the_device():
    x, w = torch.randn(16, 32), torch.randn(32, 8)
    with fresh_inductor_cache():
        compiled = torch.compile(fn)
        out, (code, *_) = run_and_get_code(compiled, x.to(DEVICE), w.to(DEVICE))
    assert out.device.type == DEVICE
    torch.testing.assert_close(out.cpu(), fn(x, w), rtol=1e-5, atol=1e-5)
    # The elementwise work and the reduction are fused C++ kernels queued on the device,
    # not fallbacks; the matrix product is the device's own mm.
    assert "_host_kernels.compile_kernel(async_compile, 'cpp_fused_" in code
    assert code.count("_host_kernels.compile_kernel(") >= 1
    assert "extern_kernels.mm(" in code or "extern_kernels.addmm(" in code
    assert "cpp_pybinding" not in code


def _has_kernel(op: str) -> bool:
    return torch._C._dispatch_has_kernel_for_dispatch_key(f"backplane::{op}", "PrivateUse1")


needs_rms_norm = pytest.mark.skipif(not _has_kernel("rms_norm"), reason=f"backplane::rms_norm has no {DEVICE} kernel yet")


@needs_rms_norm
def test_backplane_ops_are_extern_calls_through_the_dispatcher():
    def f(x, w):
        return torch.ops.backplane.rms_norm(x * 3, w, 1e-6).relu()

    x, w = torch.randn(8, 64), torch.rand(64)
    with fresh_inductor_cache():
        out, (code, *_) = run_and_get_code(torch.compile(f), x.to(DEVICE), w.to(DEVICE))
    assert "torch.ops.backplane.rms_norm.default(" in code
    torch.testing.assert_close(out.cpu(), f(x.to(DEVICE), w.to(DEVICE)).cpu(), rtol=1e-5, atol=1e-5)


def test_dynamic_shapes_pass_sizes_to_the_kernels():
    def f(x):
        return (x.sin() * 2).sum(0)

    compiled = torch.compile(f, dynamic=True)
    for rows in (5, 9, 17):
        x = torch.randn(rows, 7)
        torch.testing.assert_close(compiled(x.to(DEVICE)).cpu(), f(x), rtol=1e-5, atol=1e-5)


def _run_bounded(fn_, seconds=60.0):
    """Runs fn_ on a thread; False if it did not return in time (it waits for a held stream)."""
    done = threading.Event()
    errors = []

    def body():
        try:
            fn_()
        except BaseException as e:  # noqa: BLE001  (reported by the test)
            errors.append(e)
        done.set()

    threading.Thread(target=body, daemon=True).start()
    finished = done.wait(seconds)
    if errors:
        raise errors[0]
    return finished


def test_compiled_code_is_ordered_with_queued_work_on_the_same_buffers():
    # Queued before: a write into x that the compiled code reads. Queued after: a write
    # into x (it must not overtake the compiled read) and a read of the compiled output.
    # All three are the device's own mm (queued like any kernel). The stream is held
    # throughout, so nothing runs before the release: a compiled kernel that ran at once
    # would read x before the first write, and one that synchronized would not return.
    def f(x):
        return (x + 1).exp() * x

    compiled = torch.compile(f)
    a = torch.rand(64, 33)
    compiled(a.to(DEVICE))  # compiled before the stream is held
    a_dev, x, z = a.to(DEVICE), torch.empty(64, 33, device=DEVICE), torch.empty(64, 33, device=DEVICE)
    two, three, five = (torch.eye(33, device=DEVICE) * k for k in (2, 3, 5))
    DEV.synchronize()
    hold = DEV._hold_stream()
    try:
        torch.mm(a_dev, two, out=x)
        result = {}
        assert _run_bounded(lambda: result.setdefault("y", compiled(x))), "compiled code waited for the held stream"
        y = result["y"]
        torch.mm(a_dev, three, out=x)
        torch.mm(y, five, out=z)
    finally:
        hold.release()
    torch.testing.assert_close(y.cpu(), f(2 * a), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(x.cpu(), 3 * a)
    torch.testing.assert_close(z.cpu(), 5 * f(2 * a), rtol=1e-5, atol=1e-5)


def test_compiled_code_queues_on_the_current_stream():
    def f(x):
        return x.cos() + x

    compiled = torch.compile(f)
    a = torch.randn(128)
    x = a.to(DEVICE)
    compiled(x)
    DEV.synchronize()
    side = DEV.Stream()
    hold = DEV._hold_stream()  # the default stream: work on the side stream does not wait for it
    try:
        with DEV.stream(side):
            y = compiled(x)
        result = {}

        def copy_on_side_stream():  # the current stream is per thread: set it on this one
            with DEV.stream(side):
                result["y"] = y.cpu()

        # Copied on the side stream: after the compiled kernel only if it went there too.
        assert _run_bounded(copy_on_side_stream), "the copy waited for the held stream"
        torch.testing.assert_close(result["y"], f(a))
    finally:
        hold.release()


def test_a_kernel_reads_the_buffers_its_inputs_had_at_the_call():
    # x gets another storage after the compiled call is queued and before it runs: the
    # queued kernel still reads the one x had at the call.
    def f(x):
        return x * 3 + 1

    compiled = torch.compile(f)
    a = torch.rand(40)
    compiled(a.to(DEVICE))
    x = a.to(DEVICE)
    DEV.synchronize()
    hold = DEV._hold_stream()
    try:
        result = {}
        assert _run_bounded(lambda: result.setdefault("y", compiled(x)))
        x.set_(torch.zeros(40, device=DEVICE))
    finally:
        hold.release()
    torch.testing.assert_close(result["y"].cpu(), f(a))


@pytest.mark.parametrize("order", ["scalar_first", "tensor_first"])
def test_cpu_scalars_and_cpu_work_in_a_compiled_graph(order):
    # A 0-dim CPU tensor beside a device tensor (an optimizer's step count): the device
    # wins, as a GPU does, whichever comes first; CPU work in the same graph stays on the
    # CPU.
    def f(s, x):
        y = s * x if order == "scalar_first" else x * s
        return y + 1, torch.arange(3.0) * s

    s, x = torch.tensor(2.5), torch.randn(33)
    got, cpu_part = torch.compile(f)(s, x.to(DEVICE))
    assert got.device.type == DEVICE and cpu_part.device.type == "cpu"
    torch.testing.assert_close(got.cpu(), x * 2.5 + 1)
    torch.testing.assert_close(cpu_part, torch.arange(3.0) * 2.5)


@pytest.mark.skipif(DEV.device_count() < 2, reason="needs two devices (BACKPLANE_NPU_DEVICE_COUNT >= 2)")
def test_compiled_code_runs_on_the_inputs_device():
    compiled = torch.compile(lambda x: (x * x).sum(1))
    x = torch.randn(4, 9)
    out = compiled(x.to(f"{DEVICE}:1"))
    assert out.device == torch.device(DEVICE, 1)
    torch.testing.assert_close(out.cpu(), (x * x).sum(1))


def test_host_kernel_launch_refuses_tensors_off_the_device():
    import importlib

    launch = importlib.import_module(f"backplane_{DEVICE}.compile._host_kernels").launch
    # (entry 1 is never called: every launch below is refused first)
    with pytest.raises(RuntimeError, match=r"got a tensor on meta; expected its tensors on one .* device"):
        launch(1, [torch.zeros(2, device="meta")], [], [], "cpp_fused_x")
    with pytest.raises(RuntimeError, match=r"and on the CPU; expected them on one .* device \(0-dim CPU scalars"):
        launch(1, [torch.zeros(2, device=DEVICE), torch.zeros(2)], [], [], "cpp_fused_x")
    with pytest.raises(RuntimeError, match="null entry point"):
        launch(0, [torch.zeros(2, device=DEVICE)], [], [], "cpp_fused_x")
    if DEV.device_count() >= 2:
        with pytest.raises(RuntimeError, match="expected them all on one"):
            launch(1, [torch.zeros(2, device=DEVICE), torch.zeros(2, device=f"{DEVICE}:1")], [], [], "k")


def _train(model, compiled, steps, batch_of, loss_of):
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    losses, grads = [], []
    for step in range(steps):
        inputs, targets = batch_of(step)
        opt.zero_grad(set_to_none=True)
        loss = loss_of(compiled, inputs, targets)
        loss.backward()
        losses.append(loss.detach().cpu())
        grads.append([p.grad.detach().cpu() for p in model.parameters()])
        opt.step()
    return losses, grads


def _assert_same_training(got, want):
    for step, (a, b) in enumerate(zip(got[0], want[0])):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5, msg=lambda m, step=step: f"loss, step {step}: {m}")
    for step, (a, b) in enumerate(zip(got[1], want[1])):
        for i, (ga, gb) in enumerate(zip(a, b)):
            torch.testing.assert_close(ga, gb, rtol=1e-4, atol=1e-5, msg=lambda m, s=step, i=i: f"grad {i}, step {s}: {m}")


def test_mlp_training_compiled_equals_eager():
    # Needs no Backplane op: a scaffolded device passes it from its first build.
    def make():
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Linear(12, 32), torch.nn.GELU(), torch.nn.LayerNorm(32),
                                   torch.nn.Linear(32, 5)).to(DEVICE)

    def mse(model, x, y):
        return torch.nn.functional.mse_loss(model(x), y)

    eager, ours = make(), make()
    g = torch.Generator().manual_seed(1)
    data = [(torch.randn(16, 12, generator=g).to(DEVICE), torch.randn(16, 5, generator=g).to(DEVICE)) for _ in range(3)]
    with fresh_inductor_cache():
        got = _train(ours, torch.compile(ours), len(data), lambda i: data[i], mse)
    _assert_same_training(got, _train(eager, eager, len(data), lambda i: data[i], mse))


@pytest.mark.skipif(not all(_has_kernel(op) for op in ("rms_norm", "add", "silu_mul", "rotary")),
                    reason=f"the decoder LM needs rms_norm, add, silu_mul and rotary on {DEVICE}")
def test_decoder_lm_training_compiled_equals_eager_with_a_cold_cache():
    train = pytest.importorskip("models.train", reason="Backplane's models/ is not importable here")
    DecoderLM, batch, loss_of = train.DecoderLM, train.batch, train.loss_of

    eager = DecoderLM(use_backplane=True).to(DEVICE)
    ours = DecoderLM(use_backplane=True).to(DEVICE)
    ours.load_state_dict(eager.state_dict())
    g = torch.Generator().manual_seed(3)
    data = [batch(8, g, DEVICE) for _ in range(3)]
    with fresh_inductor_cache():
        compiled = torch.compile(ours)
        with torch.no_grad():  # the forward alone first: its own graph
            torch.testing.assert_close(compiled(data[0][0]).cpu(), eager(data[0][0]).cpu(), rtol=1e-4, atol=1e-5)
        got = _train(ours, compiled, len(data), lambda i: data[i], loss_of)
    _assert_same_training(got, _train(eager, eager, len(data), lambda i: data[i], loss_of))
    assert all(p.device.type == DEVICE for p in ours.parameters())


def test_random_ops_in_compiled_code_follow_the_device_generator():
    def f(x):
        return torch.nn.functional.dropout(x, 0.5, training=True) + torch.rand_like(x)

    compiled = torch.compile(f)
    x = torch.ones(64, 16, device=DEVICE)
    DEV.manual_seed(7)
    torch.default_generator.manual_seed(1)  # the CPU's generator differs between the calls:
    first = compiled(x).cpu()               # the draws must come from the device's
    DEV.manual_seed(7)
    torch.default_generator.manual_seed(2)
    again = compiled(x).cpu()
    DEV.manual_seed(8)
    other = compiled(x).cpu()
    assert torch.equal(first, again)
    assert not torch.equal(first, other)
    dropped = first < 1  # a dropped element is rand_like alone, in [0, 1); a kept one is 2 + rand
    assert 0.3 < dropped.float().mean().item() < 0.7
