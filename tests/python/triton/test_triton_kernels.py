"""The Triton plugin's launchers against PyTorch references, under Triton's interpreter on
CPU tensors (conftest.py sets TRITON_INTERPRET=1): here the interface and the elementwise
ops, the row ops and rotary in test_triton_row_kernels.py (helpers: kernel_cases.py). Every
op, every registry dtype, odd shapes, empty and zero-dim inputs where the op allows them,
and views (transposed, sliced, offset, permuted, expanded broadcasts, fused-projection
halves, a fused qkv).
Outputs are allocated as the core does (contiguous; a broadcast op's output takes a dense
permuted first input's layout) and filled with NaN first, so an element left unwritten
fails. References follow registry/ops.yaml's `reference:`, in float64, rounded to the
dtype, compared with the registry's tolerances.

The interpreter runs each program in numpy: it checks indexing, masks, layouts and
arithmetic, not compilation for a GPU, vectorization, registers or speed (README.md)."""
import pytest
import torch

pytest.importorskip("triton", reason="the Triton plugin needs the triton package (CUDA builds of torch ship it)")

import backplane_triton  # noqa: E402
from backplane_triton import elementwise, tuning  # noqa: E402
from kernel_cases import (DTYPES, KERNELS, OPS, broadcast_output, check, f64, forget_plans,  # noqa: E402
                          laid_out, nan_like, run, values)

# Masked lanes (padding past a row, rows past the last) compute NaN or 1/0 in numpy, never stored.
pytestmark = [pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning"),
              pytest.mark.filterwarnings("ignore:divide by zero encountered:RuntimeWarning"),
              pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")]


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
    times = {"slow": 2.0, "fast": 1.0}
    monkeypatch.setattr(tuning, "autotuning", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    monkeypatch.setattr(tuning, "_time_ms", lambda fn: (fn(), times[ran[-1]])[1])
    ran = []

    def broken_or_record(c):
        if c == "broken":
            raise RuntimeError("out of resources")
        ran.append(c)

    key = ("test-only", object())
    assert tuning.pick(key, ["slow", "broken", "fast"], broken_or_record) == "fast"
    assert tuning.pick(key, ["slow", "fast"], lambda c: pytest.fail("timed twice")) == "fast"


def test_tuning_times_the_candidates_in_turn_and_keeps_each_ones_best_round(monkeypatch):
    """A figure skewed in one round (a clock still rising, an outlier) does not decide: each
    candidate is timed once a round, by its median, and its fastest round counts."""
    rounds = {"a": [1.0, 1.0], "b": [3.0, 0.5]}  # b is slow only in the first round
    order = []

    def time_ms(fn):
        fn()
        return rounds[order[-1]][sum(c == order[-1] for c in order) - 1]

    monkeypatch.setattr(tuning, "autotuning", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    monkeypatch.setattr(tuning, "_time_ms", time_ms)
    assert tuning.pick(("test-only", object()), ["a", "b"], order.append) == "b"
    assert order == ["a", "b", "a", "b"]


def test_tuning_times_by_do_bench_median_where_there_is_no_cuda(monkeypatch):
    """CUDA graph replays decide on CUDA (tests/python/cuda/test_cuda_triton_launch_cache.py
    runs them); a device without them is timed by triton.testing.do_bench, by its median."""
    import triton.testing

    seen = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(triton.testing, "do_bench", lambda fn, **kw: (fn(), seen.append(kw), 0.25)[2])
    assert tuning._time_ms(lambda: seen.append("ran")) == 0.25
    assert seen[0] == "ran" and seen[1]["return_mode"] == "median"


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
