"""backplane.sample_values / sample_call: an op's registry sample as a call, for any op."""
import pytest
import torch

import backplane
from samples import op_names, require_kernel, results


def _op(name):
    return next(o for o in backplane.ops() if o.name == name)


@pytest.mark.parametrize("name", op_names())
def test_every_sample_call_runs_with_the_registry_sizes(name):
    require_kernel(name, "cpu")
    op = _op(name)
    packet = backplane.torch_op(name)
    for index, sample in enumerate(op.samples):
        args, kwargs = backplane.sample_call(op, index)
        given = {**dict(zip((a.name for a in packet.default._schema.arguments), args)), **kwargs}
        assert set(given) == set(sample["args"]), "every argument the sample states, and no other"
        for arg in op.tensor_args:
            if arg in given:
                assert list(given[arg].shape) == list(sample["args"][arg])
        results(packet, packet(*args, **kwargs), args, kwargs)


def test_keyword_only_arguments_go_by_keyword():
    checked = 0
    for op in (o for o in backplane.ops() if o.samples):
        schema = backplane.torch_op(op.name).default._schema
        keyword_only = {a.name for a in schema.arguments if a.kwarg_only} & set(op.samples[0]["args"])
        if keyword_only:
            args, kwargs = backplane.sample_call(op)
            assert keyword_only <= set(kwargs), op.name
            assert len(args) + len(kwargs) == len(op.samples[0]["args"]), op.name
            checked += 1
    if not checked:
        pytest.skip("no registry op's first sample gives a keyword-only argument")


def test_every_device_and_dtype_gets_the_same_values():
    op = next(o for o in backplane.ops() if o.tensor_args and o.samples)
    arg = next(a for a in op.tensor_args if a in op.samples[0]["args"])
    v32 = backplane.sample_values(op)[arg]
    v64 = backplane.sample_values(op, dtype=torch.float64)[arg]
    assert v64.dtype == torch.float64 and torch.equal(v64.float(), v32)
    if v32.numel():
        assert not torch.equal(backplane.sample_values(op, seed=1)[arg], v32)


def test_a_sample_that_does_not_exist_is_a_clear_error():
    op = next(o for o in backplane.ops() if o.samples)
    with pytest.raises(IndexError, match=f"{op.name} has {len(op.samples)} registry samples, asked for sample 99"):
        backplane.sample_values(op, 99)


def test_a_samples_magnitude_scales_its_drawn_values():
    """`magnitude: M` (rms_norm's large_magnitude sample): each Tensor argument drawn as
    any sample's, times M in float64, then rounded to the dtype; the JSON carries the key
    only where a sample states it."""
    op = _op("rms_norm")
    assert "magnitude" not in op.samples[0]
    index = next(i for i, s in enumerate(op.samples) if s["name"] == "large_magnitude")
    assert op.samples[index]["magnitude"] == 300
    g = torch.Generator().manual_seed(5)
    drawn = {n: torch.randn(sizes, generator=g, dtype=torch.float64) for n, sizes in op.samples[index]["args"].items()}
    wide = backplane.sample_values(op, index, dtype=torch.float64, seed=5)
    half = backplane.sample_values(op, index, dtype=torch.float16, seed=5)
    for name, values in drawn.items():
        assert torch.equal(wide[name], values * 300), name
        assert torch.equal(half[name], (values * 300).half()), name
    assert torch.isinf(half["x"] * half["x"]).any()  # the point of the sample: x*x leaves float16's range
