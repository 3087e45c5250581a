"""Compile-time handling of the Triton plugin's calls (python/backplane/compile/triton_trace.py)
on the CPU, under Triton's interpreter: there a call cannot be traced into the graph
(torch.library.wrap_triton gives the plain kernel), so the pass keeps it as an extern call
through the core, says why in resolutions(), and the compiled function still computes with
the Triton plugin's kernel. The tracing itself (wrap_triton nodes, Inductor generating the
kernels' launches, an AOTInductor package) runs on a GPU: tests/python/cuda/test_cuda_triton_compile.py."""
import warnings

import pytest
import torch

pytest.importorskip("triton", reason="the Triton plugin needs the triton package (CUDA builds of torch ship it)")

import backplane  # noqa: E402
import torch._inductor.config  # noqa: E402,F401  (installs the pass, as a compile does)
from backplane.compile import graph_pass, resolutions  # noqa: E402

pytestmark = [pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning"),
              pytest.mark.filterwarnings("ignore:divide by zero encountered:RuntimeWarning")]


@pytest.fixture(scope="module", autouse=True)
def triton_plugin():
    backplane.load("cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        backplane.load("triton")


def test_under_the_interpreter_a_compiled_call_stays_the_plugins_and_says_why():
    x, w = torch.randn(6, 64), torch.randn(64)

    def f(x, w):
        return torch.ops.backplane.rms_norm(x, w, 1e-6) * 2

    with backplane.prefer("rms_norm", "cpu"):
        expected = f(x, w)
    # A fresh Inductor cache: a graph found in the cache (an earlier run's, on disk) is not
    # passed through the selection pass again, so nothing would be recorded (a second CI
    # run on one machine failed so).
    from torch._inductor.utils import fresh_cache

    with backplane.prefer("rms_norm", "triton"), fresh_cache():
        torch._dynamo.reset()
        before = len(resolutions())
        got = torch.compile(f, fullgraph=True)(x, w)
        chosen = [r for r in resolutions()[before:] if r["op"] == "rms_norm"]
    torch.testing.assert_close(got, expected)
    assert chosen and not chosen[0]["traced"], chosen
    assert chosen[0]["choice"].startswith("triton (kept as a call: Triton's interpreter"), chosen


def test_the_cache_key_sees_which_plugin_serves():
    with backplane.prefer("rms_norm", "triton"):
        traced = graph_pass.SelectionPass().uuid()
    with backplane.prefer("rms_norm", "cpu"):
        plain = graph_pass.SelectionPass().uuid()
    assert traced != plain
