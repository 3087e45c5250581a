"""Operands that disagree on which dimension is unit-stride (x.t() + y): the elementwise
engine takes them in 32 x 32 tiles through shared memory (backends/cuda/kernels/
transposed_tiles.cuh), which the registry samples (every argument in one layout) never
reach. Every registry op whose first sample's tensors share one two-dimensional shape runs
with each tensor argument in turn transposed and the others contiguous, at sizes that leave
partial tiles on both edges, against the same call on the CPU plugin. Skips, with the
reason, where the plugin was not built or no GPU is present."""
import pytest
import torch

import backplane
from samples import results, why_cuda_unavailable

_why_not = why_cuda_unavailable()
pytestmark = pytest.mark.skipif(bool(_why_not), reason=_why_not)


def _two_dimensional_same_shape_ops():
    backplane.load("cpu")
    loaded = {b.name: set(b.ops) for b in backplane.backends() if b.status == "loaded"}
    for op in backplane.ops():
        if not op.samples or op.name not in loaded["cpu"] & loaded.get("cuda", set()):
            continue
        args, kwargs = backplane.sample_call(op)
        tensors = [a for a in [*args, *kwargs.values()] if isinstance(a, torch.Tensor)]
        if len(tensors) >= 2 and len({tuple(t.shape) for t in tensors}) == 1 and tensors[0].dim() == 2:
            yield op


# Partial tiles on both edges; rows stay short, since a row op's (softmax_backward's) float32
# sum over a long row differs between the two devices' summation orders beyond float32's
# default tolerance.
@pytest.mark.parametrize("shape", [(67, 45), (1000, 33), (2049, 31)], ids=str)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64], ids=str)
def test_one_transposed_operand_matches_cpu(shape, dtype):
    checked = []
    for op in _two_dimensional_same_shape_ops():
        args, kwargs = backplane.sample_call(op, dtype=dtype)
        # Every tensor argument by position or keyword (an out= argument is one too).
        names = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
        names += [k for k, v in kwargs.items() if isinstance(v, torch.Tensor)]
        for transposed in names:
            g = torch.Generator().manual_seed(len(checked))
            values = {name: torch.randn(shape, generator=g).to(dtype) for name in names}

            def on(device, name, a):
                if name not in values:
                    return a
                v = values[name].to(device)
                # The same values, stored transposed: a view whose unit stride is dimension 0.
                return v.t().contiguous().t() if name == transposed else v

            def call(device):
                call_args = [on(device, i, a) for i, a in enumerate(args)]
                call_kwargs = {k: on(device, k, v) for k, v in kwargs.items()}
                assert (call_args[transposed] if isinstance(transposed, int) else call_kwargs[transposed]).stride() \
                    == (1, shape[0])
                packet = backplane.torch_op(op.name)
                return results(packet, packet(*call_args, **call_kwargs), call_args, call_kwargs)

            for e, c in zip(call("cpu"), call("cuda"), strict=True):
                torch.testing.assert_close(c.cpu(), e, msg=lambda m, name=op.name, t=transposed:
                                           f"{name}, argument {t} transposed: {m}")
            checked.append(op.name)
    assert {"add", "mul"} <= set(checked), f"the binary elementwise ops were not reached: {sorted(set(checked))}"
