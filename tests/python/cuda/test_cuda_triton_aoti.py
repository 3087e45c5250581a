"""An AOTInductor package made where the Triton plugin serves rms_norm and silu_mul holds
the plugin's kernels, compiled: the package calls no Backplane op for them, and `backplane
run` (C++, no Python, no Triton) runs it with only the CPU plugin loaded and matches the
eager result. Skips, with the reason, where there is no GPU, no triton, or the plugin or the
command is not built."""
import os
import subprocess
from pathlib import Path

import pytest
import torch

import backplane
from backplane.aoti.plugins import package_calls
from triton_plugin_fixture import triton_plugin  # noqa: F401 - the fixture

REPO = Path(__file__).resolve().parents[3]
BACKPLANE = Path(os.environ.get("BACKPLANE_BIN", REPO / "build" / "bin" / "backplane"))

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(),
                                reason="no CUDA device in this process (torch.cuda.is_available() is False)")


class Block(torch.nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(hidden))

    def forward(self, x, gate, up):
        return torch.ops.backplane.rms_norm(x, self.weight, 1e-6) * torch.ops.backplane.silu_mul(gate, up)


@pytest.fixture(scope="module")
def command():
    if not BACKPLANE.exists():
        pytest.skip(f"the backplane command is not built ({BACKPLANE})")
    return BACKPLANE


@pytest.mark.slow  # an AOTInductor compile with Triton kernels: half a minute
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_a_package_holds_the_triton_kernels_and_runs_from_cpp(triton_plugin, command, dtype, tmp_path):
    from backplane.compile import resolutions

    model = Block(1024).to("cuda", dtype)
    args = tuple(torch.randn(8, 1024, device="cuda", dtype=dtype) for _ in range(3))
    with torch.no_grad():
        expected = model(*args)
    with backplane.prefer("rms_norm", "triton"), backplane.prefer("silu_mul", "triton"):
        before = len(resolutions())
        exported = torch.export.export(model, args)
        package = torch._inductor.aoti_compile_and_package(exported, package_path=str(tmp_path / "block.pt2"))
        chosen = resolutions()[before:]
    assert {r["op"] for r in chosen if r.get("traced") and r["choice"] == "triton"} == {"rms_norm", "silu_mul"}, chosen
    assert package_calls(package, {"rms_norm", "silu_mul"}) == set()

    io = tmp_path / "block.io.pt"
    tolerance = 2e-2 if dtype == torch.bfloat16 else 1e-5
    torch.save({"atol": tolerance, "rtol": tolerance,
                "cases": [{"batch": 8, "inputs": [a.cpu() for a in args], "expected": [expected.cpu()]}]}, io)
    # Only the CPU plugin, and no Python path: the kernels come from the package alone.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "BACKPLANE_BACKENDS")}
    result = subprocess.run([str(command), "run", package, "--backends", "cpu", "--input", str(io), "--repeat", "3"],
                            capture_output=True, text=True, env=env, timeout=120)
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    assert "matches" in out, out
