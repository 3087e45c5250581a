"""mul's backward is one fused registry op, mul_backward: one call gives both gradients,
summed by the core to each input's size where mul broadcast; and since mul_backward has
no `backward:`, a second derivative through mul is an error naming it, never a zero.
(Its kernels are checked against the reference by the conformance suite, from the
registry samples.)"""
import pytest
import torch

from samples import require_kernel


@pytest.fixture(autouse=True)
def _cpu_kernels():
    require_kernel("mul", "cpu")
    require_kernel("mul_backward", "cpu")


def test_one_call_gives_both_gradients():
    from torch.profiler import ProfilerActivity, profile

    a, b = torch.randn(3, 7, requires_grad=True), torch.randn(3, 7, requires_grad=True)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        torch.autograd.grad(torch.ops.backplane.mul(a, b), (a, b), torch.ones(3, 7))
    calls = {e.key: e.count for e in prof.key_averages()}
    assert calls.get("backplane::mul") == 1, calls
    assert calls.get("backplane::mul_backward") == 1, calls
    assert "aten::mul" not in calls, calls


@pytest.mark.parametrize("a_sizes, b_sizes", [((4, 1, 5), (3, 5)), ((), (3, 4)), ((6, 8), (8,))])
def test_broadcast_gradients_match_torch(a_sizes, b_sizes):
    g = torch.Generator().manual_seed(0)
    a = torch.randn(a_sizes, generator=g, dtype=torch.float64, requires_grad=True)
    b = torch.randn(b_sizes, generator=g, dtype=torch.float64, requires_grad=True)
    out_grad = torch.randn(torch.broadcast_shapes(a_sizes, b_sizes), generator=g, dtype=torch.float64)
    got = torch.autograd.grad(torch.ops.backplane.mul(a, b), (a, b), out_grad)
    expected = torch.autograd.grad(a * b, (a, b), out_grad)
    assert [t.shape for t in got] == [a.shape, b.shape]
    torch.testing.assert_close(got, expected, rtol=0, atol=0)


def test_one_input_requiring_grad_gets_its_gradient():
    a, b = torch.randn(5, requires_grad=True), torch.randn(5)
    (da,) = torch.autograd.grad(torch.ops.backplane.mul(a, b).sum(), (a,))
    assert torch.equal(da, b)


def test_mul_backward_called_itself_has_no_derivative_and_says_so():
    # Through mul under create_graph the core runs mul_backward's reference (test_forward_ad);
    # a direct call of the fused op is differentiated by nothing, and named.
    grad, a, b = (torch.randn(3, 4, dtype=torch.float64, requires_grad=True) for _ in range(3))
    da, db = torch.ops.backplane.mul_backward(grad, a, b)
    with pytest.raises(RuntimeError, match="backplane::mul_backward has no derivative for"):
        (da.sum() + db.sum()).backward()
