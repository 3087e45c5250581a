"""An op whose `backward:` calls a fused backward op (mul -> mul_backward) served by a
plugin that lacks that op: the stable scaffold's worked example, and the cpu_stable fixture,
serve mul alone. The backward formula then computes mul_backward from its registry
reference through ATen, warning once that it does, instead of the dispatcher's raw error
for an op the user never called."""
import os
from pathlib import Path

import pytest

from conftest import run_python

REPO = Path(__file__).resolve().parents[3]
BACKPLANE = Path(os.environ.get("BACKPLANE_BIN", REPO / "build" / "bin" / "backplane"))
FIXTURES = BACKPLANE.parent.parent / "tests" / "fixtures"

PROGRAM = Path(__file__).with_name("programs") / "mul_backward_unserved.py"


@pytest.mark.skipif(not (FIXTURES / "libbackplane_cpu_stable.so").is_file(),
                    reason=f"no cpu_stable fixture plugin in {FIXTURES}")
def test_backward_through_mul_without_mul_backward_computes_from_the_reference():
    done = run_python(PROGRAM, FIXTURES, env={"BACKPLANE_BACKENDS": "none"})
    assert done.returncode == 0, done.stderr[-3000:]
    assert ("backplane::mul_backward has no kernel for CPU in any loaded plugin; a formula that calls it (a "
            "`backward:`, or another op's `reference:`) computes it from its registry `reference:` through ATen "
            "instead") in done.stdout, done.stdout
