"""The in-tree Triton plugin (backends/triton) loaded through the core, as a deployer loads
it, under Triton's interpreter (conftest.py sets TRITON_INTERPRET=1), where it serves the
CPU key beside the CPU plugin: the core's conformance suite on every op it serves (each
registry sample in every layout and dtype against the reference, the contract's errors,
the backward formulas' values), torch.library.opcheck of every op in float32, and the core's
choice between the two plugins. On a GPU machine without the interpreter the same plugin
serves CUDA (tests/python/cuda is where that runs).

Trimmed for the interpreter, which runs each Triton program in numpy: opcheck in float32
only (the conformance suite covers every dtype)."""

import warnings

import pytest
import torch

pytest.importorskip("triton", reason="the Triton plugin needs the triton package (CUDA builds of torch ship it)")

import backplane  # noqa: E402
from samples import samples  # noqa: E402
from triton_plugin_fixture import SERVED  # noqa: E402


# Masked lanes (padding past a row) compute NaN or 1/0 in numpy, never stored.
pytestmark = [pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning"),
              pytest.mark.filterwarnings("ignore:divide by zero encountered:RuntimeWarning"),
              pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")]


@pytest.fixture(scope="module")
def triton_plugin():
    backplane.load("cpu")
    with warnings.catch_warnings():  # "offered by 'cpu', 'triton'": each test prefers one
        warnings.simplefilter("ignore")
        (plugin,) = backplane.load("triton")
    return plugin


def test_it_loads_for_the_cpu_key_under_the_interpreter_and_says_so(triton_plugin):
    assert triton_plugin.status == "loaded", triton_plugin
    assert triton_plugin.kind == "triton"
    assert triton_plugin.dispatch_key == "CPU"
    assert "TRITON_INTERPRET=1" in triton_plugin.reason, triton_plugin.reason
    assert sorted(triton_plugin.ops) == SERVED


@pytest.mark.parametrize("op_name", SERVED)
def test_conformance(triton_plugin, op_name):
    results = backplane.check("triton", [op_name])
    failed = [r for r in results if r.outcome not in ("passed", "skipped")]
    assert not failed, "\n".join(f"{r.case} [{r.dtype}]: {r.outcome} {r.detail}" for r in failed[:8])
    assert any(r.outcome == "passed" for r in results), results


def test_the_gradient_cases_ran(triton_plugin):
    results = backplane.check("triton", ["rms_norm"])
    assert any(r.case.startswith("gradient/") and r.outcome == "passed" for r in results), results


@pytest.mark.parametrize("op_name", SERVED)
def test_opcheck_through_the_triton_plugin(triton_plugin, op_name):
    op = getattr(torch.ops.backplane, op_name).default
    with backplane.prefer(op_name, "triton"):
        for args, kwargs in samples(torch.float32)[op_name]:
            torch.library.opcheck(op, args, kwargs)


def test_the_core_chooses_between_it_and_the_cpu_plugin(triton_plugin):
    x, w = torch.randn(4, 64), torch.randn(64)
    with backplane.prefer("rms_norm", "triton"):
        ours = torch.ops.backplane.rms_norm(x, w, 1e-6)
        chosen = {s.op: s.serving for s in backplane.serving() if s.dispatch_key == "CPU"}
        assert chosen["rms_norm"] == "triton", chosen
    with backplane.prefer("rms_norm", "cpu"):
        theirs = torch.ops.backplane.rms_norm(x, w, 1e-6)
    torch.testing.assert_close(ours, theirs)
    with backplane.prefer("rms_norm", "triton"), pytest.raises(TypeError, match="backplane::rms_norm"):
        torch.ops.backplane.rms_norm(x.to(torch.int32), w, 1e-6)  # the core's contract, not the launcher
