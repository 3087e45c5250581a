"""A `backward:` formula that gives a gradient of the wrong shape is named, with its
registry location, when backward runs (its shape cannot be known when the registry is
read), instead of failing deep inside sum_to with "non-reduction path was assumed due to
unbacked symbols". Uses a copy of the `acme` fixture plugin whose fragment's formula is
wrong, in a child process (defined ops stay defined for the life of a process)."""
import os
import shutil
from pathlib import Path

import pytest

from conftest import run_python

REPO = Path(__file__).resolve().parents[3]
BACKPLANE = Path(os.environ.get("BACKPLANE_BIN", REPO / "build" / "bin" / "backplane"))
FIXTURES = BACKPLANE.parent.parent / "tests" / "fixtures"


def test_a_gradient_of_the_wrong_shape_is_named(tmp_path):
    if not (FIXTURES / "libbackplane_acme.so").exists():
        pytest.skip(f"the acme fixture plugin is not built ({FIXTURES})")
    for name in ("libbackplane_acme.so", "libbackplane_acme.manifest.yaml", "libbackplane_acme.ops.yaml"):
        shutil.copy(FIXTURES / name, tmp_path / name)
    fragment = tmp_path / "libbackplane_acme.ops.yaml"
    text = fragment.read_text()
    assert 'backward: {x: "aten::gelu_backward(grad, x)"}' in text
    fragment.write_text(text.replace('backward: {x: "aten::gelu_backward(grad, x)"}', 'backward: {x: "aten::sum(grad)"}'))
    code = f"""
import torch, backplane
backplane.load("cpu")
backplane.load("acme", path={str(tmp_path)!r})
x = torch.randn(4, 33, requires_grad=True)
try:
    torch.ops.acme.fused_gelu(x).sum().backward()
except RuntimeError as e:
    print(str(e).splitlines()[0])
"""
    done = run_python(code)
    assert done.returncode == 0, done.stderr[-3000:]
    line = done.stdout.strip()
    assert line.startswith("acme::fused_gelu: its backward formula for 'x' ("), line
    assert "libbackplane_acme.ops.yaml:" in line, line
    assert line.endswith("gave a gradient of sizes [], which does not reduce to the argument's sizes [4, 33] "
                         "(expected those sizes, or a broadcast of them)"), line
