"""torch.library.opcheck on every op (schema, fake/Meta kernel, autograd registration,
AOT dispatch), for every dtype. Numerics are checked against PyTorch separately."""
import pytest
import torch

from samples import DTYPES, samples


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("op_name", list(samples()))
def test_opcheck(op_name, dtype):
    op = getattr(torch.ops.backplane, op_name).default
    for args, kwargs in samples(dtype)[op_name]:
        torch.library.opcheck(op, args, kwargs)


def test_every_registry_op_has_samples():
    import backplane

    assert {op.name for op in backplane.ops()} == set(samples())


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_numerics_against_pytorch(dtype):
    # A short cross-check from Python (the C++ conformance suite is the full one).
    s = samples(dtype)
    b = torch.ops.backplane
    tol = {"rtol": 2e-2, "atol": 1e-2} if dtype in (torch.float16, torch.bfloat16) else {}
    for (x,), _ in s["identity_conv"]:
        assert torch.equal(b.identity_conv(x), x)
    for (x, y), kw in s["add"]:
        torch.testing.assert_close(b.add(x, y, **kw), torch.add(x, y, **kw), **tol)
    for (x, w, *eps), _ in s["rms_norm"]:
        e = eps[0] if eps else 1e-6
        ref = (x.double() * torch.rsqrt(x.double().pow(2).mean(-1, keepdim=True) + e) * w.double()).to(dtype)
        torch.testing.assert_close(b.rms_norm(x, w, *eps), ref, **tol)
