"""Forward-mode AD (torch.func.jvp, torch.autograd.forward_ad) through Backplane ops: the
tangent of every op's output is the tangent of its registry `reference:` (the core derives
it from the reference, core/src/autograd/forward_ad.h), never a silent zero; and reverse mode under
torch.func (grad, vjp: create_graph=True) gives first derivatives, with true second
derivatives where the `backward:` formulas are differentiable and an error naming the op
where they are not."""
import pytest
import torch
import torch.autograd.forward_ad as fwAD

import backplane
from backplane.formula import Formula
from samples import op_names, require_kernel, samples


def _info(op_name):
    return next(op for op in backplane.ops() if op.name == op_name)


def _call_parts(op_name, args, kwargs):
    """(op, names as the call passes them, every argument by name, the argument it writes or None)."""
    op = getattr(torch.ops.backplane, op_name).default
    names = [a.name for a in op._schema.arguments]
    written = next((a.name for a in op._schema.arguments if a.alias_info and a.alias_info.is_write), None)
    defaults = {a.name: a.default_value for a in op._schema.arguments if a.has_default_value()}
    named = defaults | dict(zip(names, args)) | kwargs
    return op, names[:len(args)], named, written


def _jvp(fn, named, tangent_names):
    """torch.func.jvp of fn(values by name) in the tensors named, with seeded tangents."""
    generator = torch.Generator().manual_seed(7)
    primals = tuple(named[n] for n in tangent_names)
    tangents = tuple(torch.randn(p.shape, dtype=p.dtype, generator=generator) for p in primals)

    def f(*values):
        out = fn({**named, **dict(zip(tangent_names, values))})
        return tuple(out) if isinstance(out, list) else out

    return torch.func.jvp(f, primals, tangents)


@pytest.mark.parametrize("op_name", op_names())
def test_jvp_equals_the_references_jvp(op_name):
    require_kernel(op_name, "cpu")
    info = _info(op_name)
    reference = Formula.parse(info.reference)
    for args, kwargs in samples(torch.float64)[op_name]:
        op, positional, named, written = _call_parts(op_name, args, kwargs)
        if written is not None:
            continue  # ops that write an argument: test_tangent_of_a_written_argument
        tangent_names = [n for n, v in named.items() if isinstance(v, torch.Tensor) and v.is_floating_point()]
        call = lambda v: op(*(v[n] for n in positional), **{k: v[k] for k in kwargs})  # noqa: E731
        try:
            want = _jvp(lambda v: reference(**v), named, tangent_names)
        except NotImplementedError as e:
            # An ATen op of the reference has no forward derivative (silu_backward): the op
            # refuses too, naming itself, rather than giving a zero tangent.
            with pytest.raises(NotImplementedError, match=f"backplane::{op_name}: forward-mode AD derives"):
                _jvp(call, named, tangent_names)
            assert "does not support it" in str(e)
            continue
        got = _jvp(call, named, tangent_names)
        torch.testing.assert_close(got, want)
        outputs = got[1] if isinstance(got[1], tuple) else (got[1],)
        if all(t.numel() for t in named.values() if isinstance(t, torch.Tensor)):
            assert any(t.abs().sum() > 0 for t in outputs), f"{op_name}: every tangent is zero"


@pytest.mark.parametrize("op_name", ["add", "mul", "softmax", "rms_norm"])
def test_dual_tensors_get_a_tangent(op_name):
    # The red team's case: fwAD.make_dual tangents came back None.
    info = _info(op_name)
    args, kwargs = samples(torch.float64)[op_name][0]
    op, positional, named, _ = _call_parts(op_name, args, kwargs)
    generator = torch.Generator().manual_seed(3)
    tangents = {n: torch.randn(v.shape, dtype=v.dtype, generator=generator)
                for n, v in named.items() if isinstance(v, torch.Tensor)}
    with fwAD.dual_level():
        duals = {**named, **{n: fwAD.make_dual(named[n], t) for n, t in tangents.items()}}
        got = fwAD.unpack_dual(op(*(duals[n] for n in positional), **{k: duals[k] for k in kwargs})).tangent
        want = fwAD.unpack_dual(Formula.parse(info.reference)(**duals)).tangent
    assert got is not None, f"{op_name}: no tangent"
    torch.testing.assert_close(got, want)


def test_jvp_of_mul_is_not_zero():
    x, t = torch.randn(5, dtype=torch.float64), torch.randn(5, dtype=torch.float64)
    _, tangent = torch.func.jvp(lambda a: torch.ops.backplane.mul(a, a), (x,), (t,))
    torch.testing.assert_close(tangent, 2 * x * t)


def test_tangent_of_a_written_argument():
    x, t = torch.randn(4, 5, dtype=torch.float64), torch.randn(4, 5, dtype=torch.float64)
    with fwAD.dual_level():
        dual = fwAD.make_dual(x.clone(), t.clone())
        torch.ops.backplane.scale_(dual, 2.5)
        torch.testing.assert_close(fwAD.unpack_dual(dual).tangent, 2.5 * t)
        out = fwAD.make_dual(torch.empty(4, 5, dtype=torch.float64), torch.ones(4, 5, dtype=torch.float64))
        torch.ops.backplane.sin_out(fwAD.make_dual(x, t), out=out)
        torch.testing.assert_close(fwAD.unpack_dual(out).tangent, torch.cos(x) * t)
        # Overwritten by a value that has no tangent: the old tangent does not survive.
        torch.ops.backplane.sin_out(x, out=out)
        torch.testing.assert_close(fwAD.unpack_dual(out).tangent, torch.zeros(4, 5, dtype=torch.float64))


def test_func_grad_and_vjp_give_first_derivatives():
    x = torch.randn(3, 8, dtype=torch.float64)
    w = torch.randn(8, dtype=torch.float64)
    g = torch.func.grad(lambda a: torch.ops.backplane.mul(a, a).sum())(x)
    torch.testing.assert_close(g, 2 * x)
    out, pullback = torch.func.vjp(lambda a: torch.ops.backplane.rms_norm(a, w, 1e-6), x)
    (got,) = pullback(torch.ones_like(out))
    xr = x.clone().requires_grad_()
    torch.nn.functional.rms_norm(xr, [8], w, 1e-6).backward(torch.ones(3, 8, dtype=torch.float64))
    torch.testing.assert_close(got, xr.grad)


def test_second_derivatives_through_fused_backward_ops():
    # mul's, rms_norm's and silu_mul's formulas call fused backward ops that have no backward of
    # their own (mul_backward, rms_norm_backward, silu_mul_backward). Under create_graph the
    # core evaluates those ops' references, ATen calls: double backward is PyTorch's own.
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    w = torch.randn(4, dtype=torch.float64, requires_grad=True)
    up = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradgradcheck(lambda a: torch.ops.backplane.mul(a, a), (x,))
    assert torch.autograd.gradgradcheck(lambda a, b: torch.ops.backplane.rms_norm(a, b, 1e-6), (x, w))
    # silu_mul_backward's reference goes through sigmoid, which PyTorch differentiates
    # (aten::silu_backward, which it cannot, is only its bench baseline).
    assert torch.autograd.gradgradcheck(torch.ops.backplane.silu_mul, (x, up))
    hess = torch.func.grad(lambda a: torch.func.grad(lambda b: torch.ops.backplane.mul(b, b).sum())(a).sum())(x.detach())
    torch.testing.assert_close(hess, torch.full((3, 4), 2.0, dtype=torch.float64))
    # Without create_graph the fused op runs: one node, not the reference's many.
    (g,) = torch.autograd.grad(torch.ops.backplane.mul(x, x).sum(), x)
    assert g.grad_fn is None


def test_a_second_backward_after_the_graph_is_freed_is_refused():
    x = torch.randn(4, requires_grad=True)
    y = torch.ops.backplane.mul(x, x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="backplane::mul: Trying to backward through the graph a second time"):
        y.backward()
    torch.testing.assert_close(x.grad, 2 * x.detach())  # not accumulated twice
    # retain_graph keeps it, as in PyTorch.
    x.grad = None
    y = torch.ops.backplane.softmax(x)
    y.sum().backward(retain_graph=True)
    y.sum().backward()
    # A node that saved no tensor (add's) runs again, as PyTorch's AddBackward does.
    z = torch.ops.backplane.add(x, x).sum()
    x.grad = None
    z.backward()
    z.backward()
    torch.testing.assert_close(x.grad, torch.full((4,), 4.0))


def test_reverse_over_forward_differentiates_the_tangent():
    # jacrev(jacfwd(f)): the tangent must carry a backward graph, as PyTorch's own
    # forward formulas do; a constant tangent gives zero Hessians under torch.func.
    x = torch.randn(5, dtype=torch.float64)
    w = torch.randn(5, dtype=torch.float64)
    got = torch.func.jacrev(torch.func.jacfwd(lambda a: torch.ops.backplane.mul(a, a).sum()))(x)
    torch.testing.assert_close(got, 2 * torch.eye(5, dtype=torch.float64))
    got = torch.func.jacrev(torch.func.jacfwd(lambda a: torch.ops.backplane.rms_norm(a, w, 1e-6)))(x)
    want = torch.func.jacrev(torch.func.jacfwd(lambda a: torch.nn.functional.rms_norm(a, [5], w, 1e-6)))(x)
    torch.testing.assert_close(got, want)


def test_saved_tensors_go_through_saved_tensor_hooks():
    packed = []

    def pack(t):
        packed.append(t.shape)
        return t.clone()

    a, b = torch.randn(3, requires_grad=True), torch.randn(3)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        y = torch.ops.backplane.mul(a, b)
    assert len(packed) == 2, packed  # mul's formulas read a and b: both go through the hook
    y.sum().backward()
    torch.testing.assert_close(a.grad, b)
