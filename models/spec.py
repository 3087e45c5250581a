"""What the pipeline needs to know about a model."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch


@dataclass(frozen=True)
class ModelSpec:
    name: str
    doc: str
    # build(device, dtype) -> the model, in eval mode, weights on device.
    build: Callable[[torch.device, torch.dtype], torch.nn.Module]
    # inputs(batch, device, dtype) -> positional inputs; dimension 0 of each is the batch.
    inputs: Callable[[int, torch.device, torch.dtype], tuple[torch.Tensor, ...]]
    # reference(model, *inputs) -> what the model must compute, in plain PyTorch.
    reference: Callable[..., torch.Tensor]
    # (atol, rtol) per dtype; (0, 0) means bit for bit.
    tolerances: dict[torch.dtype, tuple[float, float]]
    dtypes: tuple[torch.dtype, ...]
    traced_batch: int = 3
    # Batch 1 is not among them: torch.export specializes a size of 1, so the dynamic
    # batch dimension starts at 2 (a package refuses batch 1 with a clear error).
    check_batches: tuple[int, ...] = (2, 3, 7)

    def tolerance(self, dtype: torch.dtype) -> tuple[float, float]:
        if dtype not in self.tolerances:
            raise ValueError(f"model '{self.name}' supports dtypes {[str(d) for d in self.dtypes]}, found {dtype}")
        return self.tolerances[dtype]


def assert_matches(actual: torch.Tensor, expected: torch.Tensor, tolerance: tuple[float, float], what: str) -> None:
    """Raises AssertionError with the max difference when actual is not expected within tolerance."""
    atol, rtol = tolerance
    if actual.shape != expected.shape or actual.dtype != expected.dtype:
        raise AssertionError(f"{what}: expected {tuple(expected.shape)} {expected.dtype}, "
                             f"found {tuple(actual.shape)} {actual.dtype}")
    actual, expected = actual.detach().cpu(), expected.detach().cpu()
    # NaN matches NaN at the same position, as `backplane run` compares (a model whose
    # reference holds NaN is not a mismatch for holding it too); NaN anywhere else is.
    if actual.is_floating_point() or actual.is_complex():
        nan_here, nan_there = actual.isnan(), expected.isnan()
        if not torch.equal(nan_here, nan_there):
            raise AssertionError(f"{what}: NaN at {int((nan_here & ~nan_there).sum())} positions where the reference "
                                 f"holds a number, a number at {int((~nan_here & nan_there).sum())} positions where "
                                 "it holds NaN")
    if atol == 0 and rtol == 0:
        if not torch.equal(actual.nan_to_num(0.0) if actual.is_floating_point() else actual,
                           expected.nan_to_num(0.0) if expected.is_floating_point() else expected):
            diff = (actual.double() - expected.double()).abs().nan_to_num(0.0).max().item()
            raise AssertionError(f"{what}: expected bit-for-bit equality, found max abs difference {diff:g}")
        return
    try:
        torch.testing.assert_close(actual, expected, atol=atol, rtol=rtol, equal_nan=True)
    except AssertionError as e:
        raise AssertionError(f"{what}: {e}") from None
