"""Inputs, references and checks the Triton plugin's kernel tests share (test_triton_kernels.py:
the interface and the elementwise ops; test_triton_row_kernels.py: the row ops and rotary),
under Triton's interpreter on CPU tensors (conftest.py sets TRITON_INTERPRET=1)."""
import itertools
import math

import torch


import backplane_triton
from backplane_triton import elementwise, rows as rows_module
from backplane_triton.layout import is_dense

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
OPS = {"add", "mul", "rms_norm", "rms_norm_backward", "softmax", "softmax_backward", "silu_mul",
       "silu_mul_backward", "rotary"}
# registry/ops.yaml's `tolerance:` (rtol, atol) per op; assert_close's defaults elsewhere.
TOLERANCES = {
    "rms_norm": {torch.float32: (1.0e-5, 1.0e-5)},
    "rms_norm_backward": {torch.float32: (1.0e-4, 1.0e-4), torch.float16: (2.0e-3, 2.0e-3),
                          torch.bfloat16: (1.6e-2, 1.0e-4)},
    "softmax_backward": {torch.float32: (1.3e-6, 5.0e-3), torch.float16: (1.0e-3, 5.0e-3),
                         torch.bfloat16: (1.6e-2, 5.0e-3)},
}
KERNELS = backplane_triton.kernels()


# --- inputs in the layouts the conformance suite uses ---------------------------------

_seeds = itertools.count(1)


def values(shape, dtype, magnitude=1.0):
    """N(0, 1) * magnitude drawn in float64 (a new seed each call), rounded to dtype."""
    g = torch.Generator().manual_seed(next(_seeds))
    return (torch.randn(shape, dtype=torch.float64, generator=g) * magnitude).to(dtype)


def laid_out(shape, dtype, layout="contiguous", magnitude=1.0):
    """A tensor of `shape` whose memory is laid out as `layout` says."""
    shape = list(shape)
    if layout == "contiguous" or not shape:
        return values(shape, dtype, magnitude)
    if layout == "transposed" and len(shape) >= 2:  # the last two dimensions swapped in memory
        return values(shape[:-2] + [shape[-1], shape[-2]], dtype, magnitude).transpose(-1, -2)
    if layout == "sliced":  # every other element of the last dimension
        return values(shape[:-1] + [2 * shape[-1]], dtype, magnitude)[..., ::2]
    if layout == "offset":  # a storage offset of one element
        return values([math.prod(shape) + 1], dtype, magnitude)[1:].view(shape)
    if layout == "padded_rows" and len(shape) >= 2:  # rows further apart than their length
        return values(shape[:-1] + [shape[-1] + 3], dtype, magnitude)[..., :shape[-1]]
    if layout == "expanded":  # the first dimension broadcast (stride 0)
        return values([1] + shape[1:], dtype, magnitude).expand(shape)
    if layout == "permuted_rows":  # the leading dimensions reversed in memory, rows contiguous
        order = list(range(len(shape) - 1))[::-1] + [len(shape) - 1]
        return values(shape[-2::-1] + shape[-1:], dtype, magnitude).permute(order)
    if layout == "permuted":  # every dimension reversed in memory
        order = list(range(len(shape)))[::-1]
        return values(shape[::-1], dtype, magnitude).permute(order)
    return values(shape, dtype, magnitude)


def broadcast_output(shape, inputs, dtype):
    """The core's broadcast-rule output: a dense permuted input of the output's sizes gives
    its layout (the first such), else contiguous."""
    for t in inputs:
        if tuple(t.shape) == tuple(shape) and is_dense(t) and not t.is_contiguous():
            return torch.empty_like(t).fill_(math.nan)
    return torch.full(shape, math.nan, dtype=dtype)


def nan_like(shape, dtype):
    return torch.full(shape, math.nan, dtype=dtype)


def check(op, got, expected, dtype):
    rtol, atol = TOLERANCES.get(op, {}).get(dtype, (None, None))
    torch.testing.assert_close(got, expected.to(dtype), rtol=rtol, atol=atol, equal_nan=True)


def run(op, outs, *args):
    """Calls the launcher, checking that it leaves its inputs untouched."""
    before = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
    assert KERNELS[op](*outs, *args) is None
    for a, b in zip(args, before):
        if isinstance(a, torch.Tensor):
            torch.testing.assert_close(a, b, rtol=0, atol=0, equal_nan=True)


def f64(*ts):
    return [t.double() for t in ts]


def forget_plans(monkeypatch):
    """Empties the launch plans cached per layout, so that the next call plans (and picks
    its configuration) afresh."""
    monkeypatch.setattr(elementwise, "_plans", {})
    monkeypatch.setattr(rows_module, "_plans", {})


# --- the interface ---------------------------------------------------------------------
