"""The registry's formulas mean the same in both evaluators: Python's (backplane/formula.py,
which the bench and these tests use) and the core's C++ one (reference_expr), which the
conformance suite, autograd and forward-mode AD use. Both evaluate the one tree the core's
parser gives (Python receives it through the C API), so the grammar cannot disagree; what
each evaluator does with a node can, and this test holds them together.

Each formula is evaluated by both on the same float64 values (the op's first registry
sample), under a dispatch mode that records every op call: the calls the Python evaluator
makes, with their arguments and results, must be the calls the core makes, bit for bit.
The core evaluates
- every `backward:` formula when autograd runs backward through the op;
- every `reference:` when forward-mode AD runs through the op (on dual tensors: both the
  primal calls and PyTorch's tangent calls are recorded). Limit: where PyTorch has no
  forward derivative for an op the reference calls, both refuse, after the same calls.
`baseline:` formulas are evaluated in C++ only by the bench and the build's registry
check, which compares each with the reference there; test_formula.py does the same here.
"""
import pytest
import torch
import torch.autograd.forward_ad as fwAD
from torch.utils._python_dispatch import TorchDispatchMode

import backplane
from backplane.formula import Formula

from samples import op_names, require_kernel


class _Calls(TorchDispatchMode):
    """Records (op, arguments, result) of every call, tensors as copies of their values."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        result = (out.dtype, tuple(out.shape)) if func.__name__.split(".")[0] in _UNINITIALIZED else _values(out)
        self.calls.append((str(func), _values(args), _values(kwargs), result))
        return out


_UNINITIALIZED = {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided"}  # results: no values


def _values(value):
    if isinstance(value, torch.Tensor):
        return (value.dtype, tuple(value.shape), value.detach().clone())
    if isinstance(value, (list, tuple)):
        return tuple(_values(v) for v in value)
    if isinstance(value, dict):
        return {k: _values(v) for k, v in value.items()}
    return value


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return torch.equal(a, b) or (a.shape == b.shape and bool(((a == b) | (a.isnan() & b.isnan())).all()))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def _assert_made_by_the_core(python: list, core: list, what: str):
    """`python`'s calls are a run of `core`'s, equal in op, arguments and results."""
    names, wanted = [c[0] for c in core], [c[0] for c in python]
    for start in range(len(core) - len(python) + 1):
        run = slice(start, start + len(python))
        if names[run] == wanted and _same(core[run], python):
            return
    raise AssertionError(f"{what}: the Python evaluator called {wanted}; the core's calls "
                         f"{names} hold no such run with the same arguments and results")


def _op(name):
    require_kernel(name, "cpu")
    info = next(o for o in backplane.ops() if o.name == name)
    schema = backplane.torch_op(name).default._schema
    values = {**{a.name: a.default_value for a in schema.arguments if a.has_default_value()},
              **backplane.sample_values(info, dtype=torch.float64)}
    written = next((a.name for a in schema.arguments if a.alias_info and a.alias_info.is_write), None)
    return info, schema, values, written


def _call(name, schema, values):
    args = [values[a.name] for a in schema.arguments if not a.kwarg_only]
    kwargs = {a.name: values[a.name] for a in schema.arguments if a.kwarg_only}
    return backplane.torch_op(name)(*args, **kwargs)


def _copies(values):
    return {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in values.items()}


@pytest.mark.parametrize("name", op_names())
def test_backward_formulas_agree(name):
    info, schema, values, _ = _op(name)
    if not info.backward:
        pytest.skip(f"{name} has no backward formulas")
    inputs = [values[a] for a in info.differentiable]
    for t in inputs:
        t.requires_grad_()
    result = _call(name, schema, values)
    grad = torch.randn(result.shape, dtype=result.dtype, generator=torch.Generator().manual_seed(1))
    with _Calls() as core:
        got = torch.autograd.grad(result, inputs, grad)
    plain = {**{k: v.detach() if isinstance(v, torch.Tensor) else v for k, v in values.items()},
             "grad": grad, "result": result.detach()}
    for arg, gradient in zip(info.differentiable, got):
        formula = info.backward[arg]
        with _Calls() as python:
            value = Formula.parse(formula)(**plain)
        _assert_made_by_the_core(python.calls, core.calls, f"{name}'s backward for '{arg}' ({formula})")
        # A formula for several arguments gives one gradient each (which is whose is the
        # core's bookkeeping, not the evaluator's): the argument's is one of them.
        given = value if isinstance(value, (tuple, list)) else [value]
        assert any(v.shape == gradient.shape and torch.equal(v, gradient) or
                   v.shape != gradient.shape and torch.equal(v.sum_to_size(gradient.shape), gradient)
                   for v in given), f"{name}'s backward for '{arg}' ({formula})"


@pytest.mark.parametrize("name", op_names())
def test_references_agree(name):
    info, schema, values, written = _op(name)
    if not info.reference:
        pytest.skip(f"{name} has no reference")
    reference = Formula.parse(info.reference)
    generator = torch.Generator().manual_seed(2)
    # A tangent for every floating input the op reads (an argument it writes, only where read).
    tangents = {k: torch.randn(v.shape, dtype=v.dtype, generator=generator) for k, v in values.items()
                if isinstance(v, torch.Tensor) and v.is_floating_point() and (k != written or k in reference.names())}

    def run(evaluate):
        given = _copies(values)
        with fwAD.dual_level(), _Calls() as calls:
            duals = {**given, **{k: fwAD.make_dual(given[k], t) for k, t in tangents.items()}}
            try:
                evaluate(duals)
            except NotImplementedError as e:  # no forward derivative for an op the reference calls
                return calls.calls, e
        return calls.calls, None

    python, python_error = run(lambda duals: reference(**duals))
    core, core_error = run(lambda duals: _call(name, schema, duals))
    _assert_made_by_the_core(python, core, f"{name}'s reference ({info.reference})")
    assert (python_error is None) == (core_error is None), (python_error, core_error)
    if core_error is not None:
        assert f"backplane::{name}: forward-mode AD derives the tangent from the registry's" in str(core_error)
