"""The Triton plugin's ops on a GPU, for real: the core's conformance suite (every registry
sample in every layout and dtype against the reference, the contract's errors, the backward
formulas' values) and torch.library.opcheck in float32 and bfloat16, for every op the plugin
serves. CI runs the same suites under Triton's interpreter on CPU tensors
(tests/python/triton/test_triton_plugin.py); this is what checks the compiled kernels.

Launch configurations are not tuned here (BACKPLANE_TRITON_AUTOTUNE=0: the first
candidate, as under the interpreter): tuning times several configurations at every new
shape, a minute for two ops, and checks no value. What that leaves unchecked: the other
configurations the tuner may pick (tests/python/cuda/test_cuda_triton_launch_cache.py
runs tuned; so does `backplane bench` outside the tests, checking each row before timing it)."""
import pytest
import torch

import backplane
from samples import samples
from triton_plugin_fixture import SERVED, triton_plugin  # noqa: F401 - the fixture

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(),
                                reason="no CUDA device in this process (torch.cuda.is_available() is False)")

@pytest.fixture(autouse=True)
def untuned(monkeypatch):
    monkeypatch.setenv("BACKPLANE_TRITON_AUTOTUNE", "0")


# Each op's suite takes a quarter of a minute or more, the row kernels' a minute (Triton
# compiling each layout's and dtype's specialization; test-times.md): marked slow, so that
# they start first (tests/python/conftest.py) rather than last on some worker.
@pytest.mark.slow
@pytest.mark.parametrize("op_name", SERVED)
def test_conformance_on_the_gpu(triton_plugin, op_name):
    assert op_name in triton_plugin.ops, triton_plugin
    results = backplane.check("triton", [op_name])
    failed = [r for r in results if r.outcome not in ("passed", "skipped")]
    assert not failed, "\n".join(f"{r.case} [{r.dtype}]: {r.outcome} {r.detail}" for r in failed[:8])
    assert any(r.outcome == "passed" for r in results), results


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("op_name", SERVED)
def test_opcheck_on_the_gpu(triton_plugin, op_name, dtype):
    op = getattr(torch.ops.backplane, op_name).default
    cases = samples(dtype, "cuda").get(op_name, [])
    if not cases:
        pytest.skip(f"{op_name} has no registry samples in {dtype}")
    with backplane.prefer(op_name, "triton"):
        for args, kwargs in cases:
            torch.library.opcheck(op, args, kwargs)
