"""The Triton plugin's row kernels (rms_norm, rms_norm_backward, softmax, softmax_backward)
and rotary against PyTorch references under Triton's interpreter, as test_triton_kernels.py
does the elementwise ones (its docstring says how inputs, outputs and references are made),
and their launch machinery: every candidate configuration, 64-bit offsets, launch plans per
layout, the rows' layout."""
import math

import pytest
import torch

pytest.importorskip("triton", reason="the Triton plugin needs the triton package (CUDA builds of torch ship it)")

from backplane_triton import elementwise, rows as rows_module, tuning  # noqa: E402
from kernel_cases import (DTYPES, broadcast_output, check, f64, forget_plans, laid_out,  # noqa: E402
                          nan_like, run, values)

# Masked lanes (padding past a row, rows past the last) compute NaN or 1/0 in numpy, never stored.
pytestmark = [pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning"),
              pytest.mark.filterwarnings("ignore:divide by zero encountered:RuntimeWarning"),
              pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")]

def rms_norm_reference(x, weight, eps):
    x, w = f64(x, weight)
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rms_norm_backward_reference(grad, x, weight, eps):
    g, x, w = f64(grad, x, weight)
    r = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    n = x * r
    dx = r * (g * w - n * (g * w * n).mean(-1, keepdim=True))
    return dx, (g * n).reshape(-1, x.shape[-1]).sum(0)


ROW_CASES = [  # (x's shape, layout); the weight is [x's last dimension]
    ([4, 64], "contiguous"),
    ([1, 7], "contiguous"),
    ([3, 769], "contiguous"),
    ([33], "contiguous"),
    ([2, 3, 32], "contiguous"),
    ([3, 4096], "contiguous"),
    ([300, 128], "contiguous"),
    ([2, 20000], "contiguous"),  # beyond the register rows: the looped kernel
    ([5, 40], "transposed"),  # column-major rows: the looped kernel's tiles
    ([5, 40], "sliced"),
    ([5, 40], "offset"),
    ([5, 40], "padded_rows"),
    ([5, 40], "expanded"),
    ([2, 3, 40], "permuted"),
    ([2, 3, 4, 40], "permuted_rows"),  # three leading dimensions
    ([2, 3, 2, 2, 24], "permuted_rows"),  # four: copied first
]
ROW_PARAMS = [(c, d) for c in ROW_CASES for d in (DTYPES if math.prod(c[0]) <= 20000 else
                                                   [torch.float32, torch.bfloat16])]
ROW_IDS = [f"{'x'.join(map(str, c[0]))}_{c[1]}-{d}" for c, d in ROW_PARAMS]


@pytest.mark.parametrize("case,dtype", ROW_PARAMS, ids=ROW_IDS)
def test_rms_norm(case, dtype):
    shape, layout = case
    x = laid_out(shape, dtype, layout)
    weight = values([shape[-1]], dtype) + 1
    out = nan_like(shape, dtype)
    run("rms_norm", [out], x, weight, 1e-6)
    check("rms_norm", out, rms_norm_reference(x, weight, 1e-6), dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_rms_norm_weights_eps_magnitude_and_no_rows(dtype):
    x = laid_out([4, 257], dtype, magnitude=300)  # x*x overflows float16: the sums are float32
    for weight in (values([257], dtype), values([1], dtype).expand(257), values([514], dtype)[::2]):
        out = nan_like([4, 257], dtype)
        run("rms_norm", [out], x, weight, 1e-2)
        check("rms_norm", out, rms_norm_reference(x, weight, 1e-2), dtype)
    run("rms_norm", [nan_like([0, 16], dtype)], values([0, 16], dtype), values([16], dtype), 1e-6)


@pytest.mark.parametrize("case,dtype", ROW_PARAMS, ids=ROW_IDS)
def test_rms_norm_backward(case, dtype):
    shape, layout = case
    x, grad = laid_out(shape, dtype, layout), laid_out(shape, dtype, layout)
    weight = values([shape[-1]], dtype) + 1
    dx, dweight = nan_like(shape, dtype), nan_like([shape[-1]], dtype)
    run("rms_norm_backward", [dx, dweight], grad, x, weight, 1e-6)
    expected = rms_norm_backward_reference(grad, x, weight, 1e-6)
    check("rms_norm_backward", dx, expected[0], dtype)
    check("rms_norm_backward", dweight, expected[1], dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_rms_norm_backward_no_rows_gives_zero_dweight(dtype):
    dx, dweight = nan_like([0, 16], dtype), nan_like([16], dtype)
    run("rms_norm_backward", [dx, dweight], values([0, 16], dtype), values([0, 16], dtype), values([16], dtype),
        1e-6)
    assert torch.equal(dweight, torch.zeros(16, dtype=dtype))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_rms_norm_backward_mixed_views(dtype):
    x = laid_out([6, 40], dtype, "transposed")  # x column-major, grad contiguous
    grad = laid_out([6, 40], dtype, magnitude=2)
    weight = values([80], dtype)[::2]
    dx, dweight = nan_like([6, 40], dtype), nan_like([40], dtype)
    run("rms_norm_backward", [dx, dweight], grad, x, weight, 1e-2)
    expected = rms_norm_backward_reference(grad, x, weight, 1e-2)
    check("rms_norm_backward", dx, expected[0], dtype)
    check("rms_norm_backward", dweight, expected[1], dtype)


# --- rows: softmax and its backward ----------------------------------------------------

SOFTMAX_CASES = ROW_CASES + [([2, 32000], "contiguous"), ([2, 70000], "contiguous")]
SOFTMAX_PARAMS = [(c, d) for c in SOFTMAX_CASES for d in (DTYPES if math.prod(c[0]) <= 20000 else
                                                           [torch.float32, torch.float16])]
SOFTMAX_IDS = [f"{'x'.join(map(str, c[0]))}_{c[1]}-{d}" for c, d in SOFTMAX_PARAMS]


@pytest.mark.parametrize("case,dtype", SOFTMAX_PARAMS, ids=SOFTMAX_IDS)
def test_softmax(case, dtype):
    shape, layout = case
    x = laid_out(shape, dtype, layout, magnitude=3)
    out = nan_like(shape, dtype)
    run("softmax", [out], x)
    check("softmax", out, torch.softmax(x.double(), -1), dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_softmax_zero_dim_magnitude_and_infinities(dtype):
    x = values([], dtype)
    out = nan_like([], dtype)
    run("softmax", [out], x)
    check("softmax", out, torch.softmax(x.double(), -1), dtype)
    for rows, length in [(4, 257), (3, 20000)]:  # register rows, looped rows
        x = laid_out([rows, length], dtype, magnitude=30)  # exp(x) overflows float16: the maximum first
        x[0, 3] = x[1, :] = -math.inf  # a row of -inf gives NaN, as PyTorch's
        x[2, 5] = math.inf  # so does +inf
        out = nan_like([rows, length], dtype)
        run("softmax", [out], x)
        check("softmax", out, torch.softmax(x.double(), -1), dtype)


def softmax_backward_reference(grad, y):
    g, y = f64(grad, y)
    return y * (g - (g * y).sum(-1, keepdim=True))


@pytest.mark.parametrize("case,dtype", SOFTMAX_PARAMS, ids=SOFTMAX_IDS)
def test_softmax_backward(case, dtype):
    shape, layout = case
    grad, y = laid_out(shape, dtype, layout), laid_out(shape, dtype, layout)
    out = nan_like(shape, dtype)
    run("softmax_backward", [out], grad, y)
    check("softmax_backward", out, softmax_backward_reference(grad, y), dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_softmax_backward_zero_dim_and_mixed_views(dtype):
    grad, y = values([], dtype), values([], dtype)
    out = nan_like([], dtype)
    run("softmax_backward", [out], grad, y)
    check("softmax_backward", out, softmax_backward_reference(grad, y), dtype)
    grad, y = laid_out([7, 50], dtype, "transposed"), laid_out([7, 50], dtype, "padded_rows", magnitude=10)
    out = nan_like([7, 50], dtype)
    run("softmax_backward", [out], grad, y)
    check("softmax_backward", out, softmax_backward_reference(grad, y), dtype)


# --- rotary ----------------------------------------------------------------------------

def rotary_reference(x, cos, sin):
    x, cos, sin = f64(x, cos, sin)
    halves = x.unflatten(-1, [2, -1])
    rotated = torch.cat([-halves.narrow(-2, 1, 1), halves.narrow(-2, 0, 1)], -2)
    return (halves * cos.unsqueeze(-2) + rotated * sin.unsqueeze(-2)).flatten(-2, -1)


def rotary_inputs(dtype):
    """(x, cos, sin) of each registry sample, then views: q of a fused qkv tensor with its
    heads transposed, caches sliced from a longer one, x's last dimension strided, and
    leading dimensions that merge to more than three (the copy fallback)."""
    for x_shape, cache_shape in [([2, 3, 5, 8], [5, 4]), ([1, 2, 7, 128], [7, 64]), ([3, 6, 14], [6, 7]),
                                 ([2, 3, 4, 8], [2, 1, 4, 4]), ([4, 1, 16], [1, 8]), ([2, 0, 8], [0, 4])]:
        yield values(x_shape, dtype), values(cache_shape, dtype), values(cache_shape, dtype)
    qkv = values([2, 5, 3, 4, 16], dtype)  # [B, S, 3, H, D]
    cache = values([9, 16], dtype)
    yield qkv[:, :, 0].transpose(1, 2), cache[:5, :8], cache[2:7, 8:]
    yield laid_out([2, 3, 5, 8], dtype, "transposed"), laid_out([5, 4], dtype, "sliced"), values([5, 4], dtype)
    yield laid_out([2, 3, 5, 8], dtype, "expanded"), laid_out([5, 4], dtype, "expanded"), values([5, 4], dtype)
    yield values([5, 4, 3, 2, 8], dtype).permute(3, 2, 1, 0, 4), values([4, 1, 4], dtype), values([4, 1, 4], dtype)
    weird = values([3, 1, 2, 4], dtype).permute(2, 0, 1, 3).expand(2, 3, 5, 4)
    yield values([2, 3, 5, 8], dtype, magnitude=2), weird, weird


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_rotary(dtype):
    for x, cos, sin in rotary_inputs(dtype):
        out = nan_like(x.shape, dtype)
        run("rotary", [out], x, cos, sin)
        check("rotary", out, rotary_reference(x, cos, sin), dtype)


# --- every launch configuration a tuner may pick, and 64-bit offsets --------------------

ROW_OPS = {
    "rms_norm": lambda x, w, g: (([nan_like(x.shape, x.dtype)], x, w, 1e-6),
                                 lambda: [rms_norm_reference(x, w, 1e-6)]),
    "rms_norm_backward": lambda x, w, g: (([nan_like(x.shape, x.dtype), nan_like(w.shape, x.dtype)], g, x, w, 1e-6),
                                          lambda: list(rms_norm_backward_reference(g, x, w, 1e-6))),
    "softmax": lambda x, w, g: (([nan_like(x.shape, x.dtype)], x), lambda: [torch.softmax(x.double(), -1)]),
    "softmax_backward": lambda x, w, g: (([nan_like(x.shape, x.dtype)], g, x),
                                         lambda: [softmax_backward_reference(g, x)]),
    "rotary": lambda x, w, g: (([nan_like(x.shape, x.dtype)], x, *w.chunk(2)),
                               lambda: [rotary_reference(x, *w.chunk(2))]),
}


@pytest.mark.parametrize("op", sorted(ROW_OPS))
def test_every_candidate_configuration(op, monkeypatch):
    for shape, layout in [([6, 96], "contiguous"), ([6, 96], "transposed"), ([2, 9000], "contiguous")]:
        for index in range(8):
            forget_plans(monkeypatch)
            monkeypatch.setattr(tuning, "pick", lambda key, configs, launch, i=index: configs[min(i, len(configs) - 1)])
            x, g = laid_out(shape, torch.float32, layout), laid_out(shape, torch.float32, layout)
            (outs, *args), expected = ROW_OPS[op](x, values([shape[-1]], torch.float32), g)
            run(op, outs, *args)
            for got, want in zip(outs, expected()):
                check(op, got, want, torch.float32)


@pytest.mark.parametrize("op", sorted(ROW_OPS))
def test_row_ops_64_bit_offsets(op, monkeypatch):
    forget_plans(monkeypatch)
    monkeypatch.setattr(rows_module, "needs_int64", lambda *ts: True)
    for layout in ("contiguous", "transposed"):
        x, g = laid_out([5, 40], torch.float32, layout), laid_out([5, 40], torch.float32, layout)
        (outs, *args), expected = ROW_OPS[op](x, values([40], torch.float32), g)
        run(op, outs, *args)
        for got, want in zip(outs, expected()):
            check(op, got, want, torch.float32)


def test_plans_are_reused_per_layout_and_redone_for_another(monkeypatch):
    forget_plans(monkeypatch)
    x, w = values([6, 40], torch.float32), values([40], torch.float32)
    for _ in range(2):
        out = nan_like([6, 40], torch.float32)
        run("rms_norm", [out], x, w, 1e-6)
        check("rms_norm", out, rms_norm_reference(x, w, 1e-6), torch.float32)
    assert len(rows_module._plans) == 1
    xt = laid_out([6, 40], torch.float32, "transposed")
    for eps in (1e-6, 0.5):  # another layout, then the same layout with another eps
        out = nan_like([6, 40], torch.float32)
        run("rms_norm", [out], xt, w, eps)
        check("rms_norm", out, rms_norm_reference(xt, w, eps), torch.float32)
    assert len(rows_module._plans) == 2
    for a, b in [(x, w), (x, w), (x.t(), x.t())]:
        out = broadcast_output(torch.broadcast_shapes(a.shape, b.shape), [a, b], torch.float32)
        run("add", [out], a, b, 3.0)
        check("add", out, a.double() + 3 * b.double(), torch.float32)
    assert len(elementwise._plans) == 2


def test_row_ops_into_a_non_contiguous_output():
    # Never from the core; the launchers compute into a temporary and copy.
    x, w = values([6, 40], torch.float32), values([40], torch.float32)
    out = nan_like([40, 6], torch.float32).t()
    run("rms_norm", [out], x, w, 1e-6)
    check("rms_norm", out, rms_norm_reference(x, w, 1e-6), torch.float32)


def test_row_layout_merges_leading_dimensions():
    x = values([2, 3, 4, 8], torch.float32)
    assert rows_module.Rows([x]).dims == 1
    assert rows_module.Rows([x[:, :2]]).dims == 2
    assert rows_module.Rows([x.transpose(0, 1)]).dims == 3
    assert rows_module.Rows([x.permute(2, 1, 0, 3)[:, :, :, None]]).dims == 3  # four, copied: one
