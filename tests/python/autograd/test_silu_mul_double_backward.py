"""Second derivatives through silu_mul, as PyTorch has them for silu(gate) * up: the core's
backward runs silu_mul_backward's registry reference under create_graph, which goes through
sigmoid (PyTorch has no derivative of aten::silu_backward, which the reference used before
and which raised "derivative for aten::silu_backward is not implemented")."""
import torch

from samples import require_kernel


def _inputs(dtype=torch.float64):
    g = torch.Generator().manual_seed(11)
    gate = torch.randn(3, 17, dtype=dtype, generator=g).requires_grad_()
    up = torch.randn(3, 17, dtype=dtype, generator=g).requires_grad_()
    return gate, up


def test_gradgradcheck():
    require_kernel("silu_mul", "cpu")
    gate, up = _inputs()
    assert torch.autograd.gradgradcheck(torch.ops.backplane.silu_mul, (gate, up))


def test_double_backward_equals_pytorchs():
    require_kernel("silu_mul", "cpu")
    gate, up = _inputs()

    def second(f):
        out = f(gate, up)
        dgate, dup = torch.autograd.grad(out.sum(), (gate, up), create_graph=True)
        return torch.autograd.grad((dgate * dgate).sum() + (dup * dgate).sum(), (gate, up))

    want = second(lambda a, b: torch.nn.functional.silu(a) * b)
    got = second(torch.ops.backplane.silu_mul)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w)


def test_hessian_under_torch_func():
    require_kernel("silu_mul", "cpu")
    gate, up = (t.detach() for t in _inputs())
    got = torch.func.hessian(lambda a: torch.ops.backplane.silu_mul(a, up).sum())(gate)
    want = torch.func.hessian(lambda a: (torch.nn.functional.silu(a) * up).sum())(gate)
    torch.testing.assert_close(got, want)
