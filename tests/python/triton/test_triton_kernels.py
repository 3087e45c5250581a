"""The Triton plugin's launchers against PyTorch references, under Triton's interpreter on
CPU tensors (conftest.py sets TRITON_INTERPRET=1): every op, every registry dtype, odd
shapes, empty and zero-dim inputs where the op allows them, and views (transposed,
sliced, offset, permuted, expanded broadcasts, fused-projection halves, a fused qkv).
Outputs are allocated as the core does (contiguous; a broadcast op's output takes a dense
permuted first input's layout) and filled with NaN first, so an element left unwritten
fails. References follow registry/ops.yaml's `reference:`, in float64, rounded to the
dtype, compared with the registry's tolerances.

The interpreter runs each program in numpy: it checks indexing, masks, layouts and
arithmetic, not compilation for a GPU, vectorization, registers or speed (README.md)."""
import itertools
import math

import pytest
import torch

pytest.importorskip("triton", reason="the Triton plugin needs the triton package (CUDA builds of torch ship it)")

import backplane_triton
from backplane_triton import elementwise, rows as rows_module, tuning
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
# Masked lanes (padding past a row, rows past the last) compute NaN or 1/0 in numpy, never stored.
pytestmark = [pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning"),
              pytest.mark.filterwarnings("ignore:divide by zero encountered:RuntimeWarning"),
              pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")]


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

def test_kernels_lists_every_op_once():
    assert set(KERNELS) == OPS
    assert all(callable(launcher) for launcher in KERNELS.values())
    import backplane_triton.kernels.add  # noqa: F401 - a later import leaves kernels() a function
    assert backplane_triton.kernels() == KERNELS


def test_kernel_decorator_refuses_a_second_launcher():
    with pytest.raises(ValueError, match="two launchers for op 'add'"):
        backplane_triton.kernel("add")(lambda out, a, b, alpha=1: None)


def test_tuning_picks_the_first_candidate_under_the_interpreter():
    assert not tuning.autotuning()
    assert tuning.pick(("k",), ["first", "second"], lambda c: None) == "first"


def test_tuning_keeps_the_fastest_candidate(monkeypatch):
    import triton.testing

    times = {"slow": 2.0, "fast": 1.0}
    monkeypatch.setattr(tuning, "autotuning", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    monkeypatch.setattr(triton.testing, "do_bench", lambda fn, **kw: (fn(), times[ran[-1]])[1])
    ran = []

    def broken_or_record(c):
        if c == "broken":
            raise RuntimeError("out of resources")
        ran.append(c)

    key = ("test-only", object())
    assert tuning.pick(key, ["slow", "broken", "fast"], broken_or_record) == "fast"
    assert tuning.pick(key, ["slow", "fast"], lambda c: pytest.fail("timed twice")) == "fast"


def test_tuning_times_nothing_while_a_cuda_graph_is_captured(monkeypatch):
    monkeypatch.setattr(tuning, "autotuning", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)
    key = ("test-only", object())
    assert tuning.pick(key, ["first", "second"], lambda c: pytest.fail("timed in a capture")) == "first"
    assert key not in tuning._chosen


# --- elementwise: add, mul, silu_mul, silu_mul_backward ---------------------------------

BINARY_CASES = [  # (a's shape, b's shape, layout of both)
    ([4, 33], [4, 33], "contiguous"),
    ([17], [17], "contiguous"),
    ([3, 769], [3, 769], "contiguous"),
    ([4, 1, 5], [3, 5], "contiguous"),
    ([6, 769], [769], "contiguous"),
    ([6, 1024], [1024], "contiguous"),
    ([], [3, 4], "contiguous"),
    ([0, 5], [5], "contiguous"),
    ([1], [1], "contiguous"),
    ([70001], [70001], "contiguous"),
    ([3, 5, 33], [3, 5, 33], "contiguous"),
    ([4, 257], [4, 257], "transposed"),
    ([4, 257], [4, 257], "sliced"),
    ([4, 257], [4, 257], "offset"),
    ([4, 257], [4, 257], "expanded"),
    ([3, 5, 33], [3, 5, 33], "permuted"),
    ([3, 5, 33], [5, 33], "permuted"),
]
LARGE_CASES = {"[70001]"}


def binary_inputs(a_shape, b_shape, layout, dtype, magnitude=1.0):
    return laid_out(a_shape, dtype, layout, magnitude), laid_out(b_shape, dtype, layout, magnitude)


def mixed_pairs(dtype):
    """Inputs whose layouts differ: transposed against contiguous (either first), a
    stride-0 expanded row, a scalar broadcast along a dimension, and more merged
    dimensions than the strided kernel takes (its copy fallback)."""
    yield laid_out([40, 70], dtype, "transposed"), laid_out([40, 70], dtype)
    yield laid_out([40, 70], dtype), laid_out([40, 70], dtype, "transposed")
    yield laid_out([9, 33], dtype), values([33], dtype).expand(9, 33)
    yield values([1], dtype).expand(300), laid_out([300], dtype)
    yield laid_out([3, 4, 5], dtype, "permuted"), laid_out([3, 4, 5], dtype, "sliced")
    yield laid_out([2, 3, 4, 5], dtype, "permuted"), laid_out([2, 3, 4, 5], dtype)  # four dimensions left
    six = [2, 3, 2, 3, 2, 5]
    yield values(six[::-1], dtype).permute(5, 4, 3, 2, 1, 0)[..., ::2], laid_out(six[:-1] + [3], dtype)


def case_id(case):
    return "x".join(map(str, case[0])) + "_" + "x".join(map(str, case[1])) + "_" + case[2]


def dtypes_for(case):
    return DTYPES if str(case[0]).replace(" ", "") not in LARGE_CASES else [torch.float32, torch.bfloat16]


BINARY_PARAMS = [(case, dtype) for case in BINARY_CASES for dtype in dtypes_for(case)]


@pytest.mark.parametrize("case,dtype", BINARY_PARAMS, ids=[f"{case_id(c)}-{d}" for c, d in BINARY_PARAMS])
def test_add(case, dtype):
    a, b = binary_inputs(*case, dtype)
    shape = torch.broadcast_shapes(a.shape, b.shape)
    for alpha in (1, 2.5, -1):
        out = broadcast_output(shape, [a, b], dtype)
        run("add", [out], a, b, alpha)
        da, db = f64(a, b)
        check("add", out, da + alpha * db, dtype)


@pytest.mark.parametrize("case,dtype", BINARY_PARAMS, ids=[f"{case_id(c)}-{d}" for c, d in BINARY_PARAMS])
def test_mul(case, dtype):
    a, b = binary_inputs(*case, dtype)
    out = broadcast_output(torch.broadcast_shapes(a.shape, b.shape), [a, b], dtype)
    run("mul", [out], a, b)
    check("mul", out, torch.mul(*f64(a, b)), dtype)


@pytest.mark.parametrize("case,dtype", BINARY_PARAMS, ids=[f"{case_id(c)}-{d}" for c, d in BINARY_PARAMS])
def test_silu_mul(case, dtype):
    gate, up = binary_inputs(*case, dtype)
    out = broadcast_output(torch.broadcast_shapes(gate.shape, up.shape), [gate, up], dtype)
    run("silu_mul", [out], gate, up)
    g, u = f64(gate, up)
    check("silu_mul", out, torch.nn.functional.silu(g) * u, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("op", ["add", "mul", "silu_mul"])
def test_binary_mixed_layouts(op, dtype):
    references = {"add": lambda a, b: a + 0.5 * b, "mul": torch.mul,
                  "silu_mul": lambda a, b: torch.nn.functional.silu(a) * b}
    for a, b in mixed_pairs(dtype):
        out = broadcast_output(torch.broadcast_shapes(a.shape, b.shape), [a, b], dtype)
        run(op, [out], a, b, *([0.5] if op == "add" else []))
        check(op, out, references[op](*f64(a, b)), dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_silu_mul_of_projection_halves(dtype):
    projection = values([6, 2 * 48], dtype, magnitude=3.0)  # [..., 2H]: gate and up strided views
    gate, up = projection[..., :48], projection[..., 48:]
    out = nan_like([6, 48], dtype)
    run("silu_mul", [out], gate, up)
    g, u = f64(gate, up)
    check("silu_mul", out, torch.nn.functional.silu(g) * u, dtype)


def silu_mul_backward_reference(grad, gate, up):
    g, x, u = f64(grad, gate, up)
    s = torch.sigmoid(x)
    return g * u * (s * (1 + x * (1 - s))), g * (x * s)


SILU_BACKWARD_CASES = [
    ([4, 33], [4, 33], [4, 33], "contiguous"),
    ([3, 769], [3, 769], [3, 769], "contiguous"),
    ([4, 3, 5], [4, 1, 5], [3, 5], "contiguous"),
    ([3, 4], [], [3, 4], "contiguous"),
    ([0, 5], [0, 5], [0, 5], "contiguous"),
    ([70001], [70001], [70001], "contiguous"),
    ([4, 257], [4, 257], [4, 257], "transposed"),
    ([4, 257], [4, 257], [4, 257], "sliced"),
    ([3, 5, 33], [3, 5, 33], [3, 5, 33], "permuted"),
    ([3, 5, 33], [5, 33], [3, 1, 33], "offset"),
    ([3, 5, 33], [3, 5, 33], [3, 5, 33], "expanded"),
]
SILU_BACKWARD_PARAMS = [(c, d) for c in SILU_BACKWARD_CASES for d in dtypes_for(c)]


@pytest.mark.parametrize("case,dtype", SILU_BACKWARD_PARAMS,
                         ids=[f"{'_'.join('x'.join(map(str, s)) for s in c[:3])}_{c[3]}-{d}"
                              for c, d in SILU_BACKWARD_PARAMS])
def test_silu_mul_backward(case, dtype):
    *shapes, layout = case
    grad, gate, up = (laid_out(s, dtype, layout) for s in shapes)
    shape = torch.broadcast_shapes(*shapes)
    dgate, dup = broadcast_output(shape, [grad, gate, up], dtype), broadcast_output(shape, [grad, gate, up], dtype)
    run("silu_mul_backward", [dgate, dup], grad, gate, up)
    expected = silu_mul_backward_reference(grad, gate, up)
    check("silu_mul_backward", dgate, expected[0], dtype)
    check("silu_mul_backward", dup, expected[1], dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_silu_mul_backward_into_permuted_outputs_from_mixed_inputs(dtype):
    grad = laid_out([3, 4, 5], dtype, "permuted")
    gate, up = laid_out([3, 4, 5], dtype, "transposed"), values([5], dtype).expand(3, 4, 5)
    dgate, dup = broadcast_output(grad.shape, [grad], dtype), broadcast_output(grad.shape, [grad], dtype)
    run("silu_mul_backward", [dgate, dup], grad, gate, up)
    expected = silu_mul_backward_reference(grad, gate, up)
    check("silu_mul_backward", dgate, expected[0], dtype)
    check("silu_mul_backward", dup, expected[1], dtype)


def test_elementwise_64_bit_offsets(monkeypatch):
    # Tensors past 2^31 elements are too large here: the 64-bit index code, forced.
    forget_plans(monkeypatch)
    monkeypatch.setattr(elementwise, "needs_int64", lambda *ts: True)
    for a, b in [(laid_out([5, 33], torch.float32), laid_out([5, 33], torch.float32)),
                 (laid_out([5, 33], torch.float32, "transposed"), values([33], torch.float32))]:
        out = broadcast_output([5, 33], [a, b], torch.float32)
        run("add", [out], a, b, 2.0)
        check("add", out, a.double() + 2 * b.double(), torch.float32)


# --- rows: rms_norm and its backward ---------------------------------------------------

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
