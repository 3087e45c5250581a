"""Backplane ops under torch.autocast: each follows its registry `autocast:` rule (promote
by default, fp32, lower; an op that writes an argument follows that argument's dtype), the
same on cpu and cuda (npu: backends/npu/tests/test_amp.py), with gradients through
the casts. CUDA cases skip, with the reason, where no GPU or cuda plugin is present."""
import functools
import os
import re
from pathlib import Path

import pytest
import torch

import backplane
from conftest import run_python
from samples import op_names, require_kernel, results, samples, why_cuda_unavailable

REPO = Path(__file__).resolve().parents[3]
FAST = [torch.bfloat16, torch.float16]


_why_no_cuda = why_cuda_unavailable()
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(bool(_why_no_cuda), reason=_why_no_cuda))]


@functools.cache
def _rules():
    """op -> its `autocast:` value as registry/ops.yaml writes it; promote where absent."""
    rules, name = {}, None
    for line in (REPO / "registry" / "ops.yaml").read_text().splitlines():
        if m := re.match(r"\s*- schema: (\w+)\(", line):
            name = m.group(1)
            rules[name] = "promote"
        elif (m := re.match(r"\s+autocast: (\w+)", line)) and name:
            rules[name] = m.group(1)
    return rules


@functools.cache
def _first_samples(device):
    return {name: cases[0] for name, cases in samples(torch.float32, device, per_op=1).items() if cases}


def _schema(op_name):
    return backplane.torch_op(op_name).default._schema


def _fresh_call(op_name, device, fast):
    """The op's first float32 sample on `device` (fresh copies), with its first floating
    Tensor argument that it does not write made `fast`, as a matmul's output under autocast
    would be. Returns (args, kwargs, the Tensor inputs it does not write, those it writes)."""
    args, kwargs = _first_samples(device)[op_name]
    args = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
    kwargs = {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
    schema = _schema(op_name)
    names = [a.name for a in schema.arguments]
    written = {a.name for a in schema.arguments if a.alias_info and a.alias_info.is_write}
    inputs = [n for n in names if n not in written and isinstance(_get(args, kwargs, names, n), torch.Tensor)]
    first = (inputs or sorted(written))[0]  # an op with no other input: its written tensor
    _set(args, kwargs, names, first, _get(args, kwargs, names, first).to(fast))
    return args, kwargs, inputs, written


def _get(args, kwargs, names, name):
    i = names.index(name)
    return args[i] if i < len(args) else kwargs.get(name)


def _set(args, kwargs, names, name, value):
    i = names.index(name)
    if i < len(args):
        args[i] = value
    else:
        kwargs[name] = value


def _expected_dtype(op_name, fast, args, kwargs, inputs, written):
    names = [a.name for a in _schema(op_name).arguments]
    if written:
        return _get(args, kwargs, names, next(iter(written))).dtype
    rule = _rules()[op_name]
    if rule == "fp32":
        return torch.float32
    if rule == "lower":
        return fast
    assert rule == "promote", f"{op_name}: unknown rule {rule!r} in this test"
    return functools.reduce(torch.promote_types, [_get(args, kwargs, names, n).dtype for n in inputs])


def test_every_op_has_autocast_kernels():
    keys = ["AutocastCPU", "AutocastCUDA", "AutocastPrivateUse1"]
    for op in backplane.ops():
        qualified = f"{op.namespace}::{op.name}"
        assert all(torch._C._dispatch_has_kernel_for_dispatch_key(qualified, k) for k in keys), qualified


def test_rules_read_from_the_registry():
    # The test's own reading of ops.yaml sees the keys the registry sets.
    assert _rules()["softmax"] == "fp32" and _rules()["rms_norm"] == "fp32"
    assert _rules()["identity_conv"] == "lower" and _rules()["add"] == "promote"
    assert set(_rules()) == set(op_names())


@pytest.mark.parametrize("fast", FAST, ids=str)
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op_name", op_names())
def test_op_follows_its_registry_rule(op_name, device, fast):
    """Under autocast the op computes exactly what it computes outside autocast on its
    inputs cast by hand to the dtype its rule names."""
    require_kernel(op_name, device)
    op = backplane.torch_op(op_name)
    args, kwargs, inputs, written = _fresh_call(op_name, device, fast)
    expected = _expected_dtype(op_name, fast, args, kwargs, inputs, written)
    names = [a.name for a in _schema(op_name).arguments]
    ref_args, ref_kwargs = list(args), dict(kwargs)
    for name in inputs:
        _set(ref_args, ref_kwargs, names, name, _get(args, kwargs, names, name).to(expected))
    ref_args = [a.clone() if isinstance(a, torch.Tensor) else a for a in ref_args]
    ref_kwargs = {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in ref_kwargs.items()}
    with torch.autocast(device, dtype=fast):
        got = results(op, op(*args, **kwargs), args, kwargs)
    want = results(op, op(*ref_args, **ref_kwargs), ref_args, ref_kwargs)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == expected
        torch.testing.assert_close(g, w, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("device", DEVICES)
def test_the_rules_on_a_transformer_block(device):
    """A linear's bfloat16 output meets float32 weights and caches."""
    g = torch.Generator().manual_seed(0)
    x, w = torch.randn(4, 16, generator=g).to(device), torch.randn(16, generator=g).to(device)
    proj = torch.randn(16, 16, generator=g).to(device)
    with torch.autocast(device, dtype=torch.bfloat16):
        h = x @ proj
        assert h.dtype == torch.bfloat16
        assert torch.ops.backplane.rms_norm(h, w).dtype == torch.float32  # fp32
        assert torch.ops.backplane.softmax(h).dtype == torch.float32  # fp32
        assert torch.ops.backplane.add(h, x).dtype == torch.float32  # promote: widest
        assert torch.ops.backplane.add(h, h).dtype == torch.bfloat16  # promote: inputs that agree stay
        assert torch.ops.backplane.silu_mul(h, h).dtype == torch.bfloat16
        assert torch.ops.backplane.identity_conv(x).dtype == torch.bfloat16  # lower
        out = torch.empty(4, 16, device=device)
        torch.ops.backplane.sin_out(h, out=out)  # writes float32: h is cast to it
        assert out.dtype == torch.float32
        torch.testing.assert_close(out, torch.sin(h.float()))
        inplace = h.clone()
        torch.ops.backplane.scale_(inplace, 2.0)  # the written tensor keeps its dtype
        assert inplace.dtype == torch.bfloat16


@pytest.mark.parametrize("device", DEVICES)
def test_float64_is_never_cast(device):
    x = torch.randn(3, 8, dtype=torch.float64, device=device)
    with torch.autocast(device, dtype=torch.bfloat16):
        assert torch.ops.backplane.identity_conv(x).dtype == torch.float64  # lower leaves it
        assert torch.ops.backplane.add(x, x.float()).dtype == torch.float64  # promote reaches it


@pytest.mark.parametrize("device", DEVICES)
def test_no_cast_outside_autocast_or_when_disabled(device):
    a, b = torch.randn(3, 8, device=device), torch.randn(3, 8, device=device, dtype=torch.bfloat16)
    with pytest.raises(TypeError, match="must share one dtype, found float32 and bfloat16"):
        torch.ops.backplane.add(a, b)  # the op contract: one dtype across Tensor arguments
    with torch.autocast(device, dtype=torch.bfloat16), torch.autocast(device, enabled=False):
        assert torch.ops.backplane.identity_conv(a).dtype == torch.float32
        with pytest.raises(TypeError, match="must share one dtype, found float32 and bfloat16"):
            torch.ops.backplane.add(a, b)


@pytest.mark.parametrize("device", DEVICES)
def test_gradients_flow_through_the_casts(device):
    """Gradients reach float32 parameters through the casts, equal to the same computation
    with the casts written by hand."""
    g = torch.Generator().manual_seed(1)
    x = torch.randn(6, 16, generator=g).to(device)
    proj, w = torch.randn(16, 16, generator=g).to(device), torch.randn(16, generator=g).to(device)
    params = [p.clone().requires_grad_() for p in (proj, w)]
    with torch.autocast(device, dtype=torch.bfloat16):
        h = x @ params[0]
        y = torch.ops.backplane.softmax(torch.ops.backplane.rms_norm(h, params[1]))
        loss = torch.ops.backplane.silu_mul(y, y).sum()
    loss.backward()
    ref = [p.clone().requires_grad_() for p in (proj, w)]
    h = (x.bfloat16() @ ref[0].bfloat16()).float()
    y = torch.ops.backplane.softmax(torch.ops.backplane.rms_norm(h, ref[1]))
    torch.ops.backplane.silu_mul(y, y).sum().backward()
    for p, r in zip(params, ref):
        assert p.grad.dtype == torch.float32
        torch.testing.assert_close(p.grad, r.grad, rtol=1e-5, atol=1e-6)


def test_compiled_autocast_matches_eager():
    """torch.compile traces the Autocast kernels: the graph holds the casts."""
    w = torch.randn(8)
    lin = torch.nn.Linear(8, 8)

    def f(x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            h = lin(x)
            return torch.ops.backplane.softmax(torch.ops.backplane.rms_norm(h, w)), torch.ops.backplane.add(h, h)

    x = torch.randn(4, 8)
    eager = f(x)
    torch._dynamo.reset()
    compiled = torch.compile(f, backend="aot_eager")(x)
    for e, c in zip(eager, compiled, strict=True):
        assert c.dtype == e.dtype
        torch.testing.assert_close(c, e, rtol=0, atol=0)
    assert [t.dtype for t in eager] == [torch.float32, torch.bfloat16]


def test_a_plugins_own_ops_get_the_autocast_kernels_too():
    """A plugin's registry fragment (the acme fixture) gets the same kernels (in a child
    process: the fragment's ops stay defined for the life of a process)."""
    backplane_bin = Path(os.environ.get("BACKPLANE_BIN", REPO / "build" / "bin" / "backplane"))
    fixtures = backplane_bin.parent.parent / "tests" / "fixtures"
    code = f"""
import torch, backplane
backplane.load("cpu")
backplane.load("acme", path={str(fixtures)!r})
for key in ("AutocastCPU", "AutocastCUDA", "AutocastPrivateUse1"):
    assert torch._C._dispatch_has_kernel_for_dispatch_key("acme::fused_gelu", key), key
x = torch.randn(4, 8)
with torch.autocast("cpu", dtype=torch.bfloat16):
    assert torch.ops.acme.fused_gelu(x).dtype == torch.float32  # promote: as called
    assert torch.ops.acme.fused_gelu(x.bfloat16()).dtype == torch.bfloat16
"""
    r = run_python(code)
    assert r.returncode == 0, r.stderr[-3000:]
