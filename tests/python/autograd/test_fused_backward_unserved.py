"""An op whose `backward:` calls a fused backward op (mul -> mul_backward) served by a
plugin that lacks that op: the stable scaffold's worked example, and the cpu_stable fixture,
serve mul alone. The backward formula then computes mul_backward from its registry
reference through ATen, warning once that it does, instead of the dispatcher's raw error
for an op the user never called."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import child_env

REPO = Path(__file__).resolve().parents[3]
BACKPLANE = Path(os.environ.get("BACKPLANE_BIN", REPO / "build" / "bin" / "backplane"))
FIXTURES = BACKPLANE.parent.parent / "tests" / "fixtures"

PROGRAM = """
import warnings, torch, backplane
backplane.load("cpu_stable", path={fixtures!r})
assert [s.serving for s in backplane.serving() if s.op == "mul"] == ["cpu_stable"]
a = torch.randn(4, 5, requires_grad=True)
b = torch.randn(4, 5, requires_grad=True)
with warnings.catch_warnings(record=True) as seen:
    warnings.simplefilter("always")
    for _ in range(3):
        a.grad = b.grad = None
        torch.ops.backplane.mul(a, b).sum().backward()
        torch.testing.assert_close(a.grad, b.detach())
        torch.testing.assert_close(b.grad, a.detach())
said = [str(w.message) for w in seen if "mul_backward" in str(w.message)]
assert len(said) == 1, said
print(said[0])
"""


@pytest.mark.skipif(not (FIXTURES / "libbackplane_cpu_stable.so").is_file(),
                    reason=f"no cpu_stable fixture plugin in {FIXTURES}")
def test_backward_through_mul_without_mul_backward_computes_from_the_reference():
    done = subprocess.run([sys.executable, "-c", PROGRAM.format(fixtures=str(FIXTURES))], capture_output=True,
                          text=True, timeout=300,
                          env=child_env(PYTHONPATH=str(REPO / "python"), BACKPLANE_BACKENDS="none"))
    assert done.returncode == 0, done.stderr[-3000:]
    assert ("backplane::mul_backward has no kernel for CPU in any loaded plugin; a formula that calls it (a "
            "`backward:`, or another op's `reference:`) computes it from its registry `reference:` through ATen "
            "instead") in done.stdout, done.stdout
