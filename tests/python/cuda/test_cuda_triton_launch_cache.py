"""The bridge's launch cache on a GPU (python/src/triton_launch_cache.h): for every op of the
Triton plugin, a call of shapes already seen is replayed from C++ (a cache hit, counted) and
gives exactly what the plugin's Python launcher gives for the same inputs. Skips, with the
reason, where there is no GPU, no triton or the plugin is not loaded.

Each op is called twice on inputs A first: the first call may tune (timing candidates runs
torch ops, so it is not recorded), the second is recorded; then on inputs B (same shapes,
other values and addresses), which must be a hit. rms_norm_backward needs a temporary (its
partial sums), so it is never cached: its calls stay on Python, and that is checked too."""
import pytest
import torch

import backplane
from triton_plugin_fixture import triton_plugin  # noqa: F401 - the fixture: the plugin loaded for CUDA

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(),
                                reason="no CUDA device in this process (torch.cuda.is_available() is False)")

R, N = 256, 4096


@pytest.fixture(autouse=True)
def tuned(monkeypatch):
    """Tuned, as a user's calls are (scripts/test.sh turns tuning off for the rest of the
    suite): the configurations the tuner picks are checked here, against the launcher."""
    monkeypatch.setenv("BACKPLANE_TRITON_AUTOTUNE", "1")


def _inputs(op, dtype):
    def t(*shape):
        return torch.randn(*shape, device="cuda", dtype=dtype)

    return {
        "add": lambda: ((t(R, N), t(R, N)), {"alpha": 0.5}),
        "mul": lambda: ((t(R, N), t(1, N)), {}),
        "rms_norm": lambda: ((t(R, N), t(N), 1e-6), {}),
        "rms_norm_backward": lambda: ((t(R, N), t(R, N), t(N), 1e-6), {}),
        "rotary": lambda: ((t(2, 8, 64, 128), t(64, 64), t(64, 64)), {}),
        "silu_mul": lambda: ((t(R, N), t(R, N)), {}),
        "silu_mul_backward": lambda: ((t(R, N), t(R, N), t(R, N)), {}),
        "softmax": lambda: ((t(R, N),), {}),
        "softmax_backward": lambda: ((t(R, N), t(R, N)), {}),
    }[op]()


def _stats(op):
    from backplane import triton_kind

    return dict(triton_kind._native.launch_cache_stats()[f"backplane::{op}@triton"])


def _python_path(plugin, op, outs_like, args, kwargs):
    """The plugin's launcher called directly, on outputs like the op's: the Python path."""
    from backplane import triton_kind

    outs = [torch.empty_like(o) for o in outs_like]
    triton_kind.launcher_of(plugin, op)(*outs, *args, *kwargs.values())
    return outs


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("op", ["add", "mul", "rms_norm", "rms_norm_backward", "rotary", "silu_mul",
                                "silu_mul_backward", "softmax", "softmax_backward"])
def test_a_cached_call_equals_the_python_path(triton_plugin, op, dtype):
    fn = getattr(torch.ops.backplane, op)
    with backplane.prefer(op, "triton"):
        a_args, a_kwargs = _inputs(op, dtype)
        fn(*a_args, **a_kwargs)
        fn(*a_args, **a_kwargs)
        before = _stats(op)
        # Same shapes, new values at new addresses.
        b_args = tuple(x.clone().normal_() if isinstance(x, torch.Tensor) else x for x in a_args)
        b_kwargs = a_kwargs
        got = fn(*b_args, **b_kwargs)
        torch.cuda.synchronize()
    after = _stats(op)
    got = list(got) if isinstance(got, (tuple, list)) else [got]
    expected = _python_path(triton_plugin, op, got, b_args, b_kwargs)
    for g, e in zip(got, expected):
        assert torch.equal(g, e), f"{op} {dtype}: the replay differs from the Python path by {(g - e).abs().max()}"
    if op == "rms_norm_backward":
        assert after["hits"] == before["hits"], after
        assert "besides its kernel launches" in after["last_refusal"], after
    else:
        assert after["hits"] == before["hits"] + 1, (before, after)


def test_a_new_float_value_is_passed_on_a_hit(triton_plugin):
    x, w = torch.randn(R, N, device="cuda"), torch.randn(N, device="cuda")
    with backplane.prefer("rms_norm", "triton"):
        for _ in range(2):
            torch.ops.backplane.rms_norm(x, w, 1e-6)
        before = _stats("rms_norm")["hits"]
        got = torch.ops.backplane.rms_norm(x, w, 0.5)
    assert _stats("rms_norm")["hits"] == before + 1
    torch.testing.assert_close(got, torch.nn.functional.rms_norm(x, (N,), w, 0.5))

