"""Gradients and tangents that the core derives from an op's registry `reference:` are
computed as the kernels compute, in the op's opmath (float32 for float16 and bfloat16),
then cast back (core/include/backplane/reference_expr.h, evaluate_all_in_opmath).

Evaluated in the storage dtype instead, rms_norm's `x*x` overflows float16 for values
around 300: create_graph gradients, torch.func.grad and jvp tangents then came back all
zero while an ordinary backward was right. Every op with a reference is checked here in
float16 and bfloat16, on its registry samples (large-magnitude ones among them, `magnitude:`
in registry/ops.yaml) and on a sample made here at magnitude 300, against the same values
in float64.
"""
import pytest
import torch

import backplane
from samples import require_kernel, why_cuda_unavailable

# The core's autograd is one for every backend; on CUDA the fused kernels and the references
# it evaluates run on the GPU. (npu: tests/python/npu/test_npu_autograd.py, in its own process.)
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(bool(why_cuda_unavailable()),
                                                                reason=why_cuda_unavailable() or "cuda"))]

HALF_TYPES = [torch.float16, torch.bfloat16]
# Element error allowed, relative to the largest magnitude of the float64 result: the
# inputs are exact in both runs, so what differs is float32 arithmetic and one rounding
# to the storage dtype at the end (2**-11 for float16, 2**-8 for bfloat16), plus headroom
# for sums over a row.
RELATIVE = {torch.float16: 4e-3, torch.bfloat16: 3e-2}


def _info(op_name):
    return next(op for op in backplane.ops() if op.name == op_name)


def _ops_with(attribute):
    return [op.name for op in backplane.ops() if op.namespace == "backplane" and getattr(op, attribute)]


def _functional(op_name):
    schema = getattr(torch.ops.backplane, op_name).default._schema
    return schema.returns and not any(a.alias_info and a.alias_info.is_write for a in schema.arguments)


def _cases(op_name, dtype, device="cpu"):
    """(case name, values by name in `dtype`): each registry sample with a non-empty Tensor
    argument, and the first sample again at magnitude 300 (drawn values times 300)."""
    info = _info(op_name)
    out = []
    for index, sample in enumerate(info.samples):
        values = backplane.sample_values(info, index, dtype=torch.float64, seed=index)
        if any(isinstance(v, torch.Tensor) and v.numel() == 0 for v in values.values()):
            continue
        out.append((sample.get("name") or f"sample{index}", {k: _cast(v, dtype, device) for k, v in values.items()}))
        if index == 0:
            big = {k: _cast(v * 300 if k in _magnified(info) else v, dtype, device) for k, v in values.items()}
            out.append(("magnitude_300", big))
    return out


def _magnified(info):
    """The Tensor arguments a magnitude scales: data, not caches that must stay in [-1, 1]
    (rotary's cos and sin) or probabilities that must sum to one (softmax_backward's y)."""
    keep = {"rotary": {"cos", "sin"}, "softmax_backward": {"y"}}.get(info.name, set())
    return [n for n in info.tensor_args if n not in keep]


def _cast(value, dtype, device=None):
    return value.to(device=device, dtype=dtype) if isinstance(value, torch.Tensor) else value


def _call(op_name, values):
    op = getattr(torch.ops.backplane, op_name).default
    args = {a.name: values[a.name] for a in op._schema.arguments if a.name in values}
    out = op(**args)
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _assert_matches(got, want, dtype, what):
    assert got.dtype == dtype, f"{what}: dtype {got.dtype}, expected {dtype}"
    want_max = want.abs().max().item() if want.numel() else 0.0
    if want.numel() and want.to(dtype).abs().max().item() > 0:  # a value the dtype can hold
        assert got.abs().max().item() > 0, f"{what}: all zero, while the float64 result reaches {want_max:g}"
    # Below the dtype's smallest normal number a value may flush to zero (softmax's far tail).
    atol = max(RELATIVE[dtype] * want_max, torch.finfo(dtype).tiny)
    torch.testing.assert_close(got.double(), want, rtol=RELATIVE[dtype], atol=atol,
                               msg=lambda m: f"{what}: {m}")


def _grads(op_name, values, wrt, grad_outputs, create_graph):
    inputs = {k: (v.detach().clone().requires_grad_() if k in wrt else v) for k, v in values.items()}
    outs = _call(op_name, inputs)
    grads = torch.autograd.grad(outs, [inputs[k] for k in wrt], grad_outputs, create_graph=create_graph,
                                allow_unused=True)
    return grads, outs


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", HALF_TYPES, ids=str)
@pytest.mark.parametrize("op_name", _ops_with("backward"))
def test_create_graph_gradients_equal_float64(op_name, dtype, device):
    require_kernel(op_name, device)
    info = _info(op_name)
    for case, values in _cases(op_name, dtype, device):
        wrt = [n for n in info.differentiable if isinstance(values.get(n), torch.Tensor)]
        exact = {k: _cast(v, torch.float64) for k, v in values.items()}
        generator = torch.Generator().manual_seed(3)
        outs64 = _call(op_name, exact)
        grad_out64 = [torch.randn(o.shape, dtype=torch.float64, generator=generator).to(device) for o in outs64]
        grad_out = [g.to(dtype) for g in grad_out64]
        grad_out64 = [g.double() for g in grad_out]  # the same values in both runs
        want, _ = _grads(op_name, exact, wrt, grad_out64, create_graph=False)
        got, _ = _grads(op_name, values, wrt, grad_out, create_graph=True)
        for name, g, w in zip(wrt, got, want):
            _assert_matches(g.detach(), w, dtype, f"{op_name} {case} {dtype}: create_graph d{name}")


@pytest.mark.parametrize("dtype", HALF_TYPES, ids=str)
def test_torch_func_grad_of_rms_norm_is_not_zero_at_magnitude_300(dtype):
    """The issue's own case: under torch.func.grad (create_graph inside) dx was all zero."""
    g = torch.Generator().manual_seed(0)
    x64 = torch.randn(4, 257, dtype=torch.float64, generator=g) * 300
    w64 = torch.randn(257, dtype=torch.float64, generator=g)
    x, w = x64.to(dtype), w64.to(dtype)

    def loss(x, w):
        return torch.ops.backplane.rms_norm(x, w, 1e-6).float().pow(2).sum()

    dx, dw = torch.func.grad(loss, argnums=(0, 1))(x, w)
    want_dx, want_dw = torch.func.grad(loss, argnums=(0, 1))(x.double(), w.double())
    _assert_matches(dx, want_dx, dtype, "rms_norm torch.func.grad dx")
    _assert_matches(dw, want_dw, dtype, "rms_norm torch.func.grad dweight")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", HALF_TYPES, ids=str)
@pytest.mark.parametrize("op_name", [n for n in _ops_with("reference") if _functional(n)])
def test_jvp_tangents_equal_float64(op_name, dtype, device):
    """Ops that write an argument (scale_, sin_out) take their tangent from the same
    evaluation; tests/python/autograd/test_forward_ad.py checks them in float64."""
    require_kernel(op_name, device)
    info = _info(op_name)
    for case, values in _cases(op_name, dtype, device):
        names = [n for n in info.tensor_args if isinstance(values.get(n), torch.Tensor)]
        generator = torch.Generator().manual_seed(5)
        tangents = tuple(torch.randn(values[n].shape, dtype=torch.float64, generator=generator).to(device, dtype)
                         for n in names)

        def f(*primals, values=values):
            return tuple(_call(op_name, {**values, **dict(zip(names, primals))}))

        exact = {k: _cast(v, torch.float64) for k, v in values.items()}

        def f64(*primals):
            return tuple(_call(op_name, {**exact, **dict(zip(names, primals))}))

        _, got = torch.func.jvp(f, tuple(values[n] for n in names), tangents)
        _, want = torch.func.jvp(f64, tuple(exact[n] for n in names), tuple(t.double() for t in tangents))
        for i, (g, w) in enumerate(zip(got, want)):
            _assert_matches(g, w, dtype, f"{op_name} {case} {dtype}: jvp tangent of output {i}")
