"""An op's registry `reference:` as a function of the op's arguments, computed in the
op's opmath dtype as Backplane's kernels compute: float16 and bfloat16 Tensor inputs are
widened to float32, the formula runs (formula.py, over torch.ops.aten), and each result is
rounded back to the dtype of the op's output. Traced by the compile-time pass into the
graph in place of the op's call.

Limits: a formula reading dtype(x) sees the widened dtype; no registry op does today.
"""
from __future__ import annotations

import functools

import torch

from ..formula import Formula

_WIDENED = {torch.float16: torch.float32, torch.bfloat16: torch.float32}


@functools.lru_cache(maxsize=256)
def _formula(text: str) -> Formula:
    return Formula.parse(text)


def reference_call(op, names: dict, out_dtypes: list):
    """The reference's value for the call whose arguments are `names` ({argument: value}),
    with one result per dtype in out_dtypes (a list for an op returning several tensors)."""
    widened = {n: v.to(_WIDENED[v.dtype]) if isinstance(v, torch.Tensor) and v.dtype in _WIDENED else v
               for n, v in names.items()}
    result = _formula(op.reference)(**widened)
    results = list(result) if isinstance(result, (list, tuple)) else [result]
    if len(results) != len(out_dtypes):
        raise RuntimeError(f"backplane.compile: {op.name}'s reference gives {len(results)} values; the op returns "
                           f"{len(out_dtypes)}")
    rounded = [r.to(d) if r.dtype != d else r for r, d in zip(results, out_dtypes)]
    return rounded if isinstance(result, (list, tuple)) or len(out_dtypes) > 1 else rounded[0]
