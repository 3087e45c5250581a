"""The bridge's launch cache (python/src/triton_launch_cache.h) without a GPU: in its test
mode keys take the interpreter's CPU tensors, recordings describe each kernel from its
Python signature (launch_record.py's fake), and a replay is recorded instead of launched, so
the keying, the mapping of parameters to their sources and the packing are what run on a GPU.
tests/python/cuda/test_cuda_triton_launch_cache.py checks real replays against Python's."""
import warnings

import pytest
import torch

pytest.importorskip("triton", reason="the Triton plugin needs the triton package (CUDA builds of torch ship it)")

import backplane  # noqa: E402
from backplane import triton_kind  # noqa: E402
from backplane_triton import kernels, launch_record  # noqa: E402

pytestmark = [pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning"),
              pytest.mark.filterwarnings("ignore:divide by zero encountered:RuntimeWarning")]


@pytest.fixture()
def cache():
    backplane.load("cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        (plugin,) = backplane.load("triton")
    assert plugin.status == "loaded", plugin
    native = triton_kind._native
    native.launch_cache_clear()
    native._launch_cache_test_launches()
    native._launch_cache_test_mode(True)
    yield native
    native._launch_cache_test_mode(False)
    native.launch_cache_clear()


def stats(native, op):
    return native.launch_cache_stats()[f"backplane::{op}@triton"]


def rms_norm(x, w, eps):
    with backplane.prefer("rms_norm", "triton"):
        return torch.ops.backplane.rms_norm(x, w, eps)


def test_a_hit_replays_with_the_new_pointers_and_floats(cache):
    x, w = torch.randn(4, 32), torch.randn(32)
    first = rms_norm(x, w, 1e-6)  # a miss: Python computes it, and the launch is recorded
    torch.testing.assert_close(first, torch.nn.functional.rms_norm(x, (32,), w, 1e-6))
    assert cache._launch_cache_test_launches() == []
    assert stats(cache, "rms_norm")["stored"] == 1, stats(cache, "rms_norm")

    x2, w2 = torch.randn(4, 32), torch.randn(32)
    y2 = rms_norm(x2, w2, 1e-3)
    (replayed,) = cache._launch_cache_test_launches()
    assert stats(cache, "rms_norm")["hits"] == 1
    # What Python would launch for this call, mapped to its sources by the recorder.
    _, (expected,) = launch_record.record_call(kernels()["rms_norm"], (y2, x2, w2, 1e-3), True)
    values = {0: y2.data_ptr(), 1: x2.data_ptr(), 2: w2.data_ptr()}
    want = []
    for p in expected["params"]:
        if p[0] == "ptr":
            want.append(("ptr", values[p[1]] + p[2]))
        elif p[0] == "int":
            want.append(("int", p[1], p[3]))
        elif p[0] == "float":
            want.append(("float", p[1], 1e-3))
        else:
            want.append(p + (0,))
    assert replayed["params"] == want
    assert replayed["params"][:3] == [("ptr", y2.data_ptr()), ("ptr", x2.data_ptr()), ("ptr", w2.data_ptr())]
    assert ("float", 64, 1e-3) in replayed["params"]  # eps: fp64, this call's value
    assert (replayed["grid"], replayed["threads"], replayed["function"]) == (
        expected["grid"], expected["threads"], expected["function"])


def test_a_changed_stride_dtype_size_or_alignment_misses(cache):
    w = torch.randn(32)
    rms_norm(torch.randn(4, 32), w, 1e-6)
    flat = torch.randn(4 * 32 + 1)
    others = [torch.randn(32, 4).t(),                 # strides
              torch.randn(4, 32, dtype=torch.float64),  # dtype (weight too)
              torch.randn(5, 32),                     # size
              flat[1:].view(4, 32)]                   # data pointer 4 bytes off 16
    for x in others:
        rms_norm(x, w.to(x.dtype), 1e-6)
    assert cache._launch_cache_test_launches() == []
    s = stats(cache, "rms_norm")
    assert (s["hits"], s["stored"], s["entries"]) == (0, 5, 5), s
    rms_norm(torch.randn(32, 4).t(), w, 1e-6)  # each of them is a key of its own now
    assert stats(cache, "rms_norm")["hits"] == 1


def test_aliasing_is_part_of_the_key(cache):
    a, b = torch.randn(64), torch.randn(64)
    with backplane.prefer("add", "triton"):
        torch.ops.backplane.add(a, b)
        c = torch.randn(64)
        torch.ops.backplane.add(c, c)  # the same tensor twice: not the key of two tensors
        assert stats(cache, "add")["hits"] == 0
        torch.ops.backplane.add(b, a)
    (replayed,) = cache._launch_cache_test_launches()
    assert [p for p in replayed["params"] if p[0] == "ptr"][2:4] == [("ptr", b.data_ptr()), ("ptr", a.data_ptr())]


def test_a_call_with_a_temporary_is_never_cached_and_stops_being_recorded(cache):
    grad, x, w = torch.randn(8, 16), torch.randn(8, 16), torch.randn(16)
    with backplane.prefer("rms_norm_backward", "triton"):
        for _ in range(3):
            dx, dw = torch.ops.backplane.rms_norm_backward(grad, x, w, 1e-6)
    assert cache._launch_cache_test_launches() == []
    s = stats(cache, "rms_norm_backward")
    assert (s["hits"], s["stored"], s["refused"], s["python_only"]) == (0, 0, 2, 1), s
    assert "besides its kernel launches" in s["last_refusal"], s["last_refusal"]
    ref_dx, ref_dw = torch.ops.backplane.rms_norm_backward(grad, x, w, 1e-6)  # the CPU plugin
    torch.testing.assert_close((dx, dw), (ref_dx, ref_dw))


def test_a_pointer_to_a_temporary_is_refused_naming_it():
    import triton
    import triton.language as tl

    from backplane_triton.launch import grid_call

    @triton.jit
    def copy(dst, src, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(dst + offs, tl.load(src + offs, mask=offs < n), mask=offs < n)

    def launcher(out, x):
        grid_call(copy, (1,))(out, x, x.numel(), BLOCK=64)
        grid_call(copy, (1,))(out, torch.empty_like(x), x.numel(), BLOCK=64)

    out, x = torch.empty(8), torch.randn(8)
    recording = launch_record.Recording((out, x), True)
    recording.launch(copy, (1,), copy[(1,)], (out, x, 8), {"BLOCK": 64})
    assert recording.outcome()[0]["params"][:3] == [("ptr", 0, 0), ("ptr", 1, 0), ("int", 32, True, 8)]
    recording.launch(copy, (1,), copy[(1,)], (out, torch.empty(8), 8), {"BLOCK": 64})
    why, counts = recording.outcome()
    assert why == "copy: parameter src points to memory that none of the op's tensors own (a temporary)"
    assert counts
    _, (why, _) = launch_record.record_call(launcher, (out, x), True)
    assert why == "the launcher ran aten.empty_like.default besides its kernel launches", why


def test_a_float_that_is_several_of_the_arguments_is_refused():
    recording = launch_record.Recording((torch.empty(1), 0.5, 0.5), True)
    with pytest.raises(launch_record.NotReplayable, match="p = 0.5 is 2 of the op's float arguments, not exactly one"):
        recording._float("p", 64, 0.5)
    with pytest.raises(launch_record.NotReplayable, match="is 0 of the op's float arguments"):
        recording._float("p", 64, 0.25)
    no_floats = launch_record.Recording((torch.empty(1), 2), True)  # an int alpha is in the key
    assert no_floats._float("p", 64, 2.0) == ("const_float", 64, 2.0)


def _tests_conftest():
    """tests/python/conftest.py (its run_python): this folder's conftest takes the name."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location("python_tests_conftest", Path(__file__).parents[1] / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("setting, hits", [("0", None), ("1", 1)])
def test_backplane_triton_launch_cache_0_turns_it_off(setting, hits):
    import json
    from pathlib import Path

    run_python = _tests_conftest().run_python
    program = Path(__file__).parent / "programs" / "launch_cache_calls.py"
    done = run_python(program, env={"BACKPLANE_TRITON_LAUNCH_CACHE": setting})
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert (found if found is None else found["hits"]) == hits, found
