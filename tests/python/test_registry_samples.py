"""backplane.sample_values / sample_call: an op's registry sample as a call, for any op."""
import pytest
import torch

import backplane


def _op(name):
    return next(o for o in backplane.ops() if o.name == name)


def test_a_sample_call_runs_and_matches_the_registry_sizes():
    op = _op("rms_norm")
    args, kwargs = backplane.sample_call(op)
    sizes = op.samples[0]["args"]
    assert [tuple(a.shape) for a in args if isinstance(a, torch.Tensor)] == [tuple(sizes["x"]), tuple(sizes["weight"])]
    assert torch.ops.backplane.rms_norm(*args, **kwargs).shape == tuple(sizes["x"])


def test_keyword_only_arguments_go_by_keyword():
    op = _op("sin_out")  # sin_out(Tensor x, *, Tensor(a!) out)
    args, kwargs = backplane.sample_call(op)
    assert len(args) == 1 and set(kwargs) == {"out"}
    torch.ops.backplane.sin_out(*args, **kwargs)
    torch.testing.assert_close(kwargs["out"], torch.sin(args[0]))


def test_every_device_and_dtype_gets_the_same_values():
    op = _op("add")
    a32 = backplane.sample_values(op)["a"]
    a64 = backplane.sample_values(op, dtype=torch.float64)["a"]
    assert a64.dtype == torch.float64 and torch.equal(a64.float(), a32)
    assert not torch.equal(backplane.sample_values(op, seed=1)["a"], a32)


def test_a_sample_that_does_not_exist_is_a_clear_error():
    op = _op("add")
    with pytest.raises(IndexError, match=f"add has {len(op.samples)} registry samples, asked for sample 99"):
        backplane.sample_values(op, 99)
