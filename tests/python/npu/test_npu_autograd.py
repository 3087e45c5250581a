"""Autograd on npu: the registry's backward formulas against finite differences, and
forward-mode AD."""
import pytest
import torch

import backplane
from npu_common import QUIET_FALLBACK
from samples import differentiable_call, require_kernel, samples

pytestmark = QUIET_FALLBACK


@pytest.mark.parametrize("op_name", list(samples()))
def test_gradcheck_npu(op_name):
    # The registry's backward: entries run on the npu (its backward ops' kernels, and aten
    # through the fallback where it lacks one); gradients must match finite differences
    # in float64. Only the arguments with a derivative require grad (rotary's cos and sin
    # are caches).
    require_kernel(op_name, "npu")
    op = getattr(torch.ops.backplane, op_name).default
    differentiable = next(o for o in backplane.ops() if o.name == op_name).differentiable
    if not differentiable:
        pytest.skip(f"{op_name} has no backward: in the registry")
    args, kwargs = samples(torch.float64, "npu")[op_name][0]
    fn, inputs = differentiable_call(op, args, kwargs, differentiable)
    assert inputs, f"{op_name}: no Tensor argument with a backward in the sample"
    assert torch.autograd.gradcheck(fn, inputs, eps=1e-6, atol=1e-5)
    assert all(t.grad is None for t in inputs)  # gradcheck leaves them alone


def test_forward_mode_ad_on_npu():
    x, t = torch.randn(4, 7, dtype=torch.float64), torch.randn(4, 7, dtype=torch.float64)
    w = torch.randn(7, dtype=torch.float64)
    fn = lambda a: torch.ops.backplane.rms_norm(a, w.npu(), 1e-6)  # noqa: E731
    _, got = torch.func.jvp(fn, (x.npu(),), (t.npu(),))
    _, want = torch.func.jvp(lambda a: torch.nn.functional.rms_norm(a, [7], w, 1e-6), (x,), (t,))
    assert got.device.type == "npu"
    torch.testing.assert_close(got.cpu(), want)
