"""Gradients through Backplane ops: until an op has a derivative, asking for one is an
error naming the op, never a silent None gradient or a wrong one (the core registers an
Autograd kernel for every registry op)."""
import pytest
import torch

import backplane  # noqa: F401  (defines torch.ops.backplane.*)
from samples import op_names, require_kernel, samples


def _first_sample(op_name):
    for dtype in (torch.float32, torch.float64):
        cases = samples(dtype)[op_name]
        if cases:
            return cases[0]
    pytest.skip(f"{op_name} has no float sample")


@pytest.mark.parametrize("op_name", op_names())
def test_backward_through_an_op_without_derivative_raises_naming_it(op_name):
    require_kernel(op_name, "cpu")
    args, kwargs = _first_sample(op_name)
    op = getattr(torch.ops.backplane, op_name).default
    # Differentiate through a clone, so in-place and out= ops write to a non-leaf.
    leaves = [a.clone().requires_grad_() if isinstance(a, torch.Tensor) else a for a in args]
    inputs = [a.clone() if isinstance(a, torch.Tensor) else a for a in leaves]
    kwargs = {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in kwargs.items()}
    result = op(*inputs, **kwargs)
    if not isinstance(result, torch.Tensor):  # `-> ()`: the written argument is the result
        written = [a for a in op._schema.arguments if a.alias_info and a.alias_info.is_write]
        position = op._schema.arguments.index(written[0])
        result = kwargs[written[0].name] if written[0].kwarg_only else inputs[position]
    with pytest.raises(RuntimeError, match=f"backplane::{op_name} has no derivative for '"):
        result.float().sum().backward()


def test_upstream_parameters_are_not_silently_left_without_gradient():
    # The reported failure: a norm in the middle of a model cut the graph, and every
    # parameter before it kept .grad None with only a warning.
    w_in = torch.randn(8, 8, requires_grad=True)
    x = torch.randn(4, 8) @ w_in
    y = torch.ops.backplane.rms_norm(x, torch.ones(8), 1e-5)
    with pytest.raises(RuntimeError, match="backplane::rms_norm has no derivative for 'x': its registry entry has no `backward:`"):
        y.sum().backward()
    assert w_in.grad is None


def test_in_place_op_on_a_leaf_that_requires_grad_is_refused():
    a = torch.randn(4, requires_grad=True)
    with pytest.raises(RuntimeError, match="backplane::scale_: argument 'x' is a leaf tensor that requires grad"):
        torch.ops.backplane.scale_(a, 2.0)


def test_in_place_op_bumps_the_version_counter():
    # What lets autograd notice a saved tensor was overwritten.
    c = torch.randn(4)
    before = c._version
    torch.ops.backplane.scale_(c, 2.0)
    assert c._version == before + 1
    out = torch.empty(4)
    before = out._version
    torch.ops.backplane.sin_out(torch.randn(4), out=out)
    assert out._version == before + 1


def test_in_place_op_in_a_graph_never_gives_a_wrong_gradient():
    # Reported: a.grad came out 1 where it should be 2, with no warning.
    a = torch.randn(4, requires_grad=True)
    c = a.clone()
    torch.ops.backplane.scale_(c, 2.0)
    with pytest.raises(RuntimeError, match="backplane::scale_ has no derivative for 'x'"):
        c.sum().backward()


def test_no_grad_and_inference_are_unaffected():
    w = torch.nn.Parameter(torch.ones(8))  # requires grad, as module parameters do
    x = torch.randn(2, 8)
    with torch.no_grad():
        y = torch.ops.backplane.rms_norm(x, w, 1e-5)
    assert y.grad_fn is None
    torch.testing.assert_close(y, torch.nn.functional.rms_norm(x, (8,), torch.ones(8), 1e-5))
