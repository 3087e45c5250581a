"""torch.autocast on the npu device: aten ops follow PyTorch's CUDA casting policy
(matmuls in the autocast dtype, reductions, norms, softmax and losses in float32, promote
for mixed inputs: autocast.cpp), Backplane ops follow their registry `autocast:` rule as
on the CPU (the core's Autocast kernels), gradients flow through the casts, and
torch.amp.GradScaler works on the device. `backplane new-backend NAME --dispatch-key
PrivateUse1` copies this file with the device renamed; ops the device does not implement
yet skip. Run: python -m pytest tests (the plugin on BACKPLANE_PLUGIN_PATH or installed)."""
import warnings

import pytest
import torch
import torch.nn.functional as F

import backplane

backplane.load("npu")
DEVICE = "npu"
FAST = [torch.bfloat16, torch.float16]

# The aten ops without a kernel of the device's own run through the CPU fallback, which
# warns once per op; that is not what these tests look at.
pytestmark = pytest.mark.filterwarnings("ignore:backplane npu:UserWarning")


def _cpu_backend_missing():
    try:
        backplane.load("cpu")
    except backplane.BackendError as e:
        return f"Backplane's cpu backend, the reference here, did not load: {e}"
    return ""


_why_no_cpu = _cpu_backend_missing()
needs_cpu_backend = pytest.mark.skipif(bool(_why_no_cpu), reason=_why_no_cpu)


def _randn(*sizes, seed=0):
    return torch.randn(*sizes, generator=torch.Generator().manual_seed(seed))


def _close(got, expected):
    assert got.device.type == DEVICE
    assert got.dtype == expected.dtype
    torch.testing.assert_close(got.cpu(), expected.cpu())


def _implemented(op_name):
    loaded = {b.name: b for b in backplane.backends() if b.status == "loaded"}
    return all(name in loaded and op_name in loaded[name].ops for name in (DEVICE, "cpu"))


def test_the_device_module_answers_amp():
    mod = getattr(torch, DEVICE)
    assert mod.get_amp_supported_dtype() == [torch.float16, torch.bfloat16]
    assert mod.is_bf16_supported()
    assert torch.amp.is_autocast_available(DEVICE)
    assert torch._C._dispatch_has_kernel_for_dispatch_key("aten::mm", "AutocastPrivateUse1")


# (name, call, argument sizes): each output in the autocast dtype.
LOWER = [
    ("mm", torch.mm, [(4, 8), (8, 5)]),
    ("matmul", torch.matmul, [(2, 4, 8), (8, 5)]),
    ("bmm", torch.bmm, [(2, 4, 8), (2, 8, 5)]),
    ("linear", F.linear, [(4, 8), (5, 8), (5,)]),
    ("addmm", torch.addmm, [(4, 5), (4, 8), (8, 5)]),
    ("baddbmm", torch.baddbmm, [(2, 4, 5), (2, 4, 8), (2, 8, 5)]),
]


@pytest.mark.parametrize("fast", FAST, ids=str)
@pytest.mark.parametrize("name,call,sizes", LOWER, ids=[c[0] for c in LOWER])
def test_matmuls_run_in_the_autocast_dtype(name, call, sizes, fast):
    host = [_randn(*s, seed=i) for i, s in enumerate(sizes)]
    with torch.autocast(DEVICE, dtype=fast):
        got = call(*(t.to(DEVICE) for t in host))
    _close(got, call(*(t.to(fast) for t in host)))


# (name, call): float32 outputs from autocast-dtype inputs, CUDA's fp32 lists.
FP32 = [
    ("sum", lambda x: x.sum()),
    ("sum_dim", lambda x: x.sum(-1)),
    ("softmax", lambda x: torch.softmax(x, -1)),
    ("log_softmax", lambda x: torch.log_softmax(x, -1)),
    ("layer_norm", lambda x: F.layer_norm(x, (x.shape[-1],))),
    ("exp", torch.exp),
    ("pow", lambda x: x.pow(2)),
    ("cumsum", lambda x: x.cumsum(-1)),
    ("norm", lambda x: x.norm()),
    ("mse_loss", lambda x: F.mse_loss(x, torch.zeros_like(x))),
]


@pytest.mark.parametrize("fast", FAST, ids=str)
@pytest.mark.parametrize("name,call", FP32, ids=[c[0] for c in FP32])
def test_reductions_norms_and_losses_run_in_float32(name, call, fast):
    host = _randn(4, 8).to(fast)
    with torch.autocast(DEVICE, dtype=fast):
        got = call(host.to(DEVICE))
    _close(got, call(host.float()))


def test_the_device_follows_cuda_lists_not_the_cpus():
    # PyTorch's CPU autocast list has no softmax; CUDA's (which the device follows) runs it in float32.
    x = _randn(3, 8).bfloat16()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert torch.softmax(x, -1).dtype == torch.bfloat16
    with torch.autocast(DEVICE, dtype=torch.bfloat16):
        assert torch.softmax(x.to(DEVICE), -1).dtype == torch.float32
        assert torch.softmax(x.to(DEVICE), -1, dtype=torch.float16).dtype == torch.float16  # an explicit dtype stays


def test_promote_and_ops_outside_the_lists():
    a, b = _randn(4, 8).to(DEVICE), _randn(4, 8, seed=1).to(DEVICE)
    with torch.autocast(DEVICE, dtype=torch.bfloat16):
        h = torch.mm(a, b.t())
        assert torch.addcmul(h, a[:, :4], b[:, :4]).dtype == torch.float32  # promote: widest
        assert torch.atan2(h, h).dtype == torch.bfloat16
        assert torch.relu(h).dtype == torch.bfloat16  # outside the lists: as called
        assert (h + a[:, :4]).dtype == torch.float32  # type promotion, as ever
        noise = torch.randn(3, device=DEVICE)  # a random op (aten::normal_), as called
        assert noise.dtype == torch.float32 and noise.device.type == DEVICE


def test_binary_cross_entropy_is_refused_as_on_cuda():
    p = torch.rand(4, device=DEVICE)
    with torch.autocast(DEVICE, dtype=torch.bfloat16), pytest.raises(RuntimeError, match="unsafe to autocast"):
        F.binary_cross_entropy(p, p)


def test_disabled_autocast_casts_nothing():
    a = _randn(4, 8).to(DEVICE)
    with torch.autocast(DEVICE, dtype=torch.bfloat16), torch.autocast(DEVICE, enabled=False):
        assert torch.mm(a, a.t()).dtype == torch.float32


def _mixed_call(op, fast, device):
    """The op's first registry sample on `device`, with its first Tensor argument that it
    does not write made `fast`; fresh tensors (one seed) on each call."""
    args, kwargs = backplane.sample_call(op, 0, dtype=torch.float32, device="cpu", seed=0)
    schema = backplane.torch_op(op.name).default._schema
    names = [a.name for a in schema.arguments]
    written = {a.name for a in schema.arguments if a.alias_info and a.alias_info.is_write}
    values = dict(zip(names, args)) | kwargs
    first = next((n for n in names if n not in written and isinstance(values.get(n), torch.Tensor)),
                 next(iter(written), None))
    values[first] = values[first].to(fast)
    values = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in values.items()}
    return [values[n] for n in names[:len(args)]], {k: values[k] for k in kwargs}, written


def _outputs(returned, args, kwargs, written, names):
    if isinstance(returned, torch.Tensor):
        return [returned]
    if returned:
        return list(returned)
    name = next(iter(written))
    return [kwargs[name] if name in kwargs else args[names.index(name)]]


@needs_cpu_backend
@pytest.mark.parametrize("fast", FAST, ids=str)
@pytest.mark.parametrize("op", backplane.ops(), ids=lambda op: op.name)
def test_backplane_ops_follow_their_rule_as_on_the_cpu(op, fast):
    """Each op's registry rule (autocast:) casts on the device exactly as on the CPU (where
    tests/python/test_autocast.py checks the rule itself): same dtypes, same values."""
    if not _implemented(op.name):
        pytest.skip(f"{op.name}: not implemented on {DEVICE} or cpu")
    fn = backplane.torch_op(op.name)
    names = [a.name for a in fn.default._schema.arguments]
    results = {}
    for device in (DEVICE, "cpu"):
        args, kwargs, written = _mixed_call(op, fast, device)
        with torch.autocast(device, dtype=fast):
            results[device] = _outputs(fn(*args, **kwargs), args, kwargs, written, names)
    for got, expected in zip(results[DEVICE], results["cpu"], strict=True):
        _close(got, expected)


@needs_cpu_backend
def test_backplane_rules_on_a_transformer_block():
    x, w = _randn(4, 16).to(DEVICE), _randn(16, seed=1).to(DEVICE)
    with torch.autocast(DEVICE, dtype=torch.bfloat16):
        h = x @ _randn(16, 16, seed=2).to(DEVICE)
        if _implemented("rms_norm"):
            assert torch.ops.backplane.rms_norm(h, w).dtype == torch.float32  # fp32
        if _implemented("softmax"):
            assert torch.ops.backplane.softmax(h).dtype == torch.float32  # fp32
        if _implemented("add"):
            assert torch.ops.backplane.add(h, x).dtype == torch.float32  # promote: widest
            assert torch.ops.backplane.add(h, h).dtype == torch.bfloat16  # promote: agreeing inputs stay
        if _implemented("identity_conv"):
            assert torch.ops.backplane.identity_conv(x).dtype == torch.bfloat16  # lower
        if _implemented("scale_"):
            inplace = h.clone()
            torch.ops.backplane.scale_(inplace, 2.0)  # a written tensor keeps its dtype
            assert inplace.dtype == torch.bfloat16


class _Block(torch.nn.Module):
    """linear (lower), rms_norm (fp32), silu_mul (promote), linear, softmax (fp32), in
    the rules every device shares for these ops."""

    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(3)
        self.up = torch.nn.Parameter(torch.randn(32, 16, generator=g) / 4)
        self.down = torch.nn.Parameter(torch.randn(16, 16, generator=g) / 4)
        self.norm = torch.nn.Parameter(1 + torch.randn(16, generator=g) / 10)

    def forward(self, x):
        h = torch.ops.backplane.rms_norm(F.linear(x, self.up)[..., :16], self.norm)
        h = torch.ops.backplane.silu_mul(h, F.linear(x, self.up)[..., 16:])
        return torch.ops.backplane.softmax(F.linear(h, self.down))


@needs_cpu_backend
@pytest.mark.parametrize("fast", FAST, ids=str)
def test_gradients_through_autocast_equal_the_cpus(fast):
    if not all(_implemented(op) for op in ("rms_norm", "rms_norm_backward", "silu_mul", "silu_mul_backward", "softmax",
                                           "softmax_backward")):
        pytest.skip(f"the block's ops are not all implemented on {DEVICE}")
    x, target = _randn(6, 16, seed=4), torch.softmax(_randn(6, 16, seed=5), -1)
    grads, losses = {}, {}
    for device in (DEVICE, "cpu"):
        model = _Block().to(device)
        with torch.autocast(device, dtype=fast):
            out = model(x.to(device))
            loss = F.mse_loss(out, target.to(device))
        assert out.dtype == torch.float32 and loss.dtype == torch.float32
        loss.backward()
        losses[device] = loss.detach()
        grads[device] = [p.grad for p in model.parameters()]
    _close(losses[DEVICE], losses["cpu"])
    for got, expected in zip(grads[DEVICE], grads["cpu"], strict=True):
        _close(got, expected)


def test_grad_scaler_skips_a_step_with_inf_gradients():
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 4).to(DEVICE)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler(DEVICE, init_scale=2.0**10, growth_interval=1000)
    x = _randn(16, 8).to(DEVICE)
    for step in range(2):
        opt.zero_grad()
        with torch.autocast(DEVICE, dtype=torch.float16):
            loss = model(x).float().pow(2).mean()
        scaler.scale(loss).backward()
        before = model.weight.detach().cpu().clone()
        if step == 1:
            model.weight.grad[0, 0] = float("inf")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            scaler.step(opt)
        scaler.update()
        after = model.weight.detach().cpu()
        if step == 0:
            assert scaler.get_scale() == 2.0**10 and not torch.equal(before, after)
        else:
            assert scaler.get_scale() == 2.0**9 and torch.equal(before, after)  # skipped, scale backed off
