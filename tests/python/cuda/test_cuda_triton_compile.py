"""The Triton plugin on a GPU, through the core: an eager call through the bridge, and under
torch.compile the call traced into the graph as the plugin's Triton kernel
(python/backplane/compile/triton_trace.py), which Inductor then compiles into the code. The
CPU plugin's result (on copies of the inputs) is the reference. Skips, with the reason, where
there is no GPU, no triton or the plugin is not built."""
import pytest
import torch

import backplane
from triton_plugin_fixture import triton_plugin  # noqa: F401 - the fixture

# The CUDA plugin is not needed: the Triton plugin serves CUDA by itself.
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(),
                                reason="no CUDA device in this process (torch.cuda.is_available() is False)")


def _on_cpu(fn, *args):
    return fn(*(a.cpu() for a in args))


def test_an_eager_call_through_the_core_runs_the_triton_kernel(triton_plugin):
    x, w = torch.randn(64, 4096, device="cuda"), torch.randn(4096, device="cuda")
    with backplane.prefer("rms_norm", "triton"):
        got = torch.ops.backplane.rms_norm(x, w, 1e-6)
    torch.testing.assert_close(got.cpu(), _on_cpu(lambda x, w: torch.ops.backplane.rms_norm(x, w, 1e-6), x, w))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_compiled_calls_become_the_plugins_kernels_in_the_generated_code(triton_plugin, dtype):
    from torch._inductor.utils import run_and_get_code

    from backplane.compile import resolutions

    x, w = torch.randn(8, 1024, device="cuda", dtype=dtype), torch.randn(1024, device="cuda", dtype=dtype)
    g, u = torch.randn(8, 1024, device="cuda", dtype=dtype), torch.randn(8, 1024, device="cuda", dtype=dtype)

    def f(x, w, g, u):
        return torch.ops.backplane.rms_norm(x, w, 1e-6) + torch.ops.backplane.silu_mul(g, u)

    with backplane.prefer("rms_norm", "triton"), backplane.prefer("silu_mul", "triton"):
        torch._dynamo.reset()
        before = len(resolutions())
        got, code = run_and_get_code(torch.compile(f, fullgraph=True), x, w, g, u)
        chosen = resolutions()[before:]
    assert {r["op"] for r in chosen if r["traced"] and r["choice"] == "triton"} == {"rms_norm", "silu_mul"}, chosen
    source = "\n".join(code)
    assert "_register_rows_kernel" in source and "_dense_kernel" in source, source[:3000]
    assert "backplane.rms_norm" not in source and "backplane.silu_mul" not in source, source[:3000]
    expected = _on_cpu(f, x, w, g, u)
    torch.testing.assert_close(got.cpu(), expected, rtol=2e-2 if dtype == torch.bfloat16 else 1e-5,
                               atol=2e-2 if dtype == torch.bfloat16 else 1e-5)
