"""torch.library.opcheck on every registry op (schema, fake/Meta kernel, autograd
registration, AOT dispatch), for every dtype, with the registry's samples; and the
conformance suite (numerics against each op's PyTorch reference) driven from Python."""
import pytest
import torch

import backplane
from samples import DTYPES, op_names, require_kernel, samples


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("op_name", op_names())
def test_opcheck(op_name, dtype):
    require_kernel(op_name, "cpu")
    op = getattr(torch.ops.backplane, op_name).default
    cases = samples(dtype)[op_name]
    if not cases:
        pytest.skip(f"{op_name} does not take {dtype}")
    for args, kwargs in cases:
        torch.library.opcheck(op, args, kwargs)


@pytest.mark.parametrize("op_name", op_names())
def test_conformance_from_python(op_name):
    results = backplane.check("cpu", [op_name])
    assert results, "the suite ran no case"
    if [r.outcome for r in results] == ["not implemented"]:
        pytest.skip(results[0].detail)
    failed = [r for r in results if r.outcome not in ("passed", "skipped")]
    assert not failed, "\n".join(f"{r.case} [{r.dtype}]: {r.outcome} {r.detail}" for r in failed[:5])
